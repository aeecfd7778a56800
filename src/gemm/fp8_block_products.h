#pragma once
// The engine of products of two block-scaled FP8 operands (fp8_block_products.cpp; FP8 block
// scaling, docs/fp8.md "Block scaling"). src/gemm/dispatch.cpp checks the operands (tiles along
// the product's K) and calls it.
#include "mantissa/gemm/gemm.h"

namespace mantissa::gemm::detail {

// op(A) @ op(B) on the CPU with the partial sums of every 128 elements of K promoted to fp32
// under the two block scales (kernels/cpu/fp8/fp8_block.h, block_scaled_gemm), bias added in
// fp32, rounded once to out_dtype. The codes are decoded inside the kernel's packing.
Tensor fp8_block_product(const Operand& a, const Operand& b, const Tensor& bias, DType out_dtype);

}  // namespace mantissa::gemm::detail
