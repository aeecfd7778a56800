#pragma once
// The linear function under TransformerEngine 2.x's NVFP4BlockScaling (docs/fp8.md "NVFP4"), for
// x (rows M, features K), W (N, K) and dy (M, N); every operand NVFP4 (nvfp4_scaling.h), each
// product's operands blocked along its K, every copy quantized from the high-precision tensor:
//   y  = Q(x) @ Qw(W)^T + b                       (bias added to the fp32 accumulator)
//   dx = Qsr(dy) @ Qw(W^T)^T                     (16x16: W's own tiles read the other way)
//   dW = Qsr(RHT(dy^T)) @ Q(RHT(x^T))^T           (both along M, the tokens)
// Q: 1x16 blocks, round to nearest; Qw: 16x16 tiles (1x16 with disable_2d_quantization; a
// tile's codes read the other way equal W^T's, so both orientations hold the same numbers);
// Qsr: 1x16, stochastic rounding unless disable_stochastic_rounding; RHT: the 16-point random
// Hadamard transform along M unless disable_rht (kernels/cpu/mx/hadamard.h). As in
// TransformerEngine no product stays in high precision. Each product is rounded once to its
// output dtype; db is the column sum of dy in fp32. Backward keeps x^T's codes and the weight's
// (its tiles, read the other way in dx's product, or W^T's 1x16 blocks), half a byte per element.
// The layer's state records, per role, the amax of its last cast, the per-tensor encode scale
// (448 * 6 / amax) and the saturated and flushed counts.
#include <memory>

#include "mantissa/core/tensor.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/recipe.h"

namespace mantissa::fp8 {

Tensor fp8_linear_nvfp4(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::shared_ptr<ScalingState>& state, const Recipe& recipe);

}  // namespace mantissa::fp8
