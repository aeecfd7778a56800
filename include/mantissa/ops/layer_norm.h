#pragma once
// Layer normalisation over the trailing dimensions (torch.nn.functional.layer_norm).
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa {

// Normalises each slice of `input` over its last normalized_shape.size() dimensions, which
// must equal normalized_shape: y = (x - mean) / sqrt(var + eps) * weight + bias, with the
// biased variance. weight and bias (shape normalized_shape) are optional (undefined tensors).
// Statistics are computed in fp32 (f64 for f64) and each output is rounded once. Under
// autocast the op runs in fp32 (PyTorch's CPU fp32 list). weight/bias of another floating
// dtype are cast to the input's dtype (differentiably).
Tensor layer_norm(const Tensor& input, const std::vector<int64_t>& normalized_shape,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

}  // namespace mantissa
