#pragma once
// Batch normalisation over the channel dimension (torch.nn.functional.batch_norm).
#include "mantissa/core/tensor.h"

namespace mantissa {

// input [N, C, *] (e.g. [N, C] or [N, C, H, W]). Training: normalises with the batch mean and
// biased variance per channel and, when running_mean/running_var are defined, updates them in
// place as running = (1 - momentum) running + momentum stat, with the unbiased variance.
// Eval: normalises with the running statistics. weight/bias (optional, [C]) scale and shift.
// Statistics are computed in fp32 (f64 for f64 input) from any floating input; the output has
// the input's dtype. weight, bias and the running statistics may have another floating dtype
// than the input (fp32 parameters with a bf16 input, as under autocast). Differentiable in
// input, weight and bias.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);

}  // namespace mantissa
