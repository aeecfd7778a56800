#pragma once
// The FP8 linear function under torchao's rowwise recipes (docs/fp8.md "Recipes"), for x (rows
// M, features K), W (N, K) and dy (M, N); every FP8 operand E4M3, scaled per row of the GEMM
// operand along its reduction dimension (rowwise.h), the product rounded once to the input's
// dtype and the bias added after it (as torchao's Float8Linear adds it):
//   rowwise        y  = Qrow(x) @ Qrow(W)^T          (x over K per row, W over K per output)
//                  dx = Qrow(dy) @ Qcol(W)           (dy over N per row, W over N per column)
//                  dW = Qcol(dy)^T @ Qcol(x)         (both over M per column)
//                  scales rounded down to powers of 2 (torchao: round_scales_to_power_of_2)
//   rowwise-gw-hp  y  as rowwise, dx = Qrow(dy) @ Qtensor(W) (one scale for W),
//                  dW = dy^T @ x in the input's dtype (no FP8); scales not rounded unless
//                  use_power_2_scales.
// db is the column sum of dy in fp32. The layer's state records, per role, the largest amax of
// its last cast and the scale of that row.
#include <memory>

#include "mantissa/core/tensor.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/recipe.h"

namespace mantissa::fp8 {

Tensor fp8_linear_rowwise(const Tensor& input, const Tensor& weight, const Tensor& bias,
                          const std::shared_ptr<ScalingState>& state, const Recipe& recipe);

}  // namespace mantissa::fp8
