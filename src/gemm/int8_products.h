#pragma once
// The engine of int8 row-wise products (LLM.int8's): A (M, K) and B (N, K) int8 codes with an
// fp32 absmax per row, C = (A @ B^T) * absmax_a[i] * absmax_b[j] / 127^2 (+ addend) (+ bias)
// in float32, or rounded once from it to a half out_dtype (bfloat16, float16). The int32 product
// runs on oneDNN's VNNI/AMX-INT8 matmul or the AVX2 kernel (kernels/cpu/quant/int8_rowwise.h);
// src/gemm/dispatch.cpp checks the operands.
#include "mantissa/gemm/gemm.h"

namespace mantissa::gemm::detail {

// addend: undefined or float32 (M, N); bias: undefined or (N), any float dtype; out_dtype:
// float32, bfloat16 or float16.
Tensor int8_rowwise_product(const Operand& a, const Operand& b, const Tensor& addend,
                            const Tensor& bias, DType out_dtype);

}  // namespace mantissa::gemm::detail
