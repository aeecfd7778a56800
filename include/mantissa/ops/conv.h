#pragma once
// 2-D convolution (torch.nn.functional.conv2d). f32 and bf16 run on oneDNN with fp32
// accumulation; f16 is widened to f32 and rounded once; f64 uses a direct reference loop.
#include "mantissa/core/tensor.h"
#include "mantissa/ops/size2.h"

namespace mantissa {

// input [N, C_in, H, W], weight [C_out, C_in / groups, kH, kW], bias undefined or [C_out].
// Returns [N, C_out, H_out, W_out] with H_out = (H + 2 pad - dil (kH - 1) - 1) / stride + 1
// (floored). All tensors share one floating dtype (autocast casts them to bf16/fp16).
// Differentiable in input, weight and bias.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              Size2 stride = {1, 1}, Size2 padding = {0, 0}, Size2 dilation = {1, 1},
              int64_t groups = 1);

}  // namespace mantissa
