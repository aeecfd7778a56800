#pragma once
// linear as one op (torch.nn.functional.linear): one 2-D GEMM over the flattened batch with
// the bias fused into the epilogue, one LinearBackward node, and an autocast entry ("linear",
// lower precision). nn::Linear and nn::functional::linear call it.
#include "mantissa/core/tensor.h"

namespace mantissa {

// y = x @ weight^T + bias. x: (..., in), weight: (out, in), bias: undefined or (out).
// Returns (..., out). x, weight and bias share one floating dtype. Differentiable in all
// three (dbias = sum of the output gradient over rows).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace mantissa
