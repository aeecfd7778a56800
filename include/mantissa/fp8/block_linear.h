#pragma once
// The FP8 linear function under TransformerEngine's Float8BlockScaling (docs/fp8.md "Block
// scaling"), for x (rows M, features K), W (N, K) and dy (M, N); every operand E4M3
// (block_scaling.h), 1x128 tiles along each product's K for activations and gradients, 128x128
// blocks for the weight:
//   y  = Q1x128(x) @ Q128x128(W)^T + b        (bias added to the fp32 accumulator)
//   dx = Q1x128(dy) @ Q128x128(W)             (the weight's blocks read the other way)
//   dW = Q1x128(dy^T) @ Q1x128(x^T)^T         (both quantized along M from the high-precision
//                                              tensors; x^T's codes are made in forward)
// each product rounded once to its output dtype; db is the column sum of dy in fp32. Backward
// keeps the weight's codes and x^T's codes (one byte per element). The layer's state records, per
// role, the largest tile amax of its last cast and the scale of that tile.
#include <memory>

#include "mantissa/core/tensor.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/recipe.h"

namespace mantissa::fp8 {

Tensor fp8_linear_block(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::shared_ptr<ScalingState>& state, const Recipe& recipe);

}  // namespace mantissa::fp8
