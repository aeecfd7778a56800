#pragma once
// The engine of products of two block-format operands (block_format_products.cpp; MXFP8, MXFP4,
// NVFP4, docs/fp8.md "Block-format operands"). src/gemm/dispatch.cpp checks the operands
// (blocks along the product's K) and calls it.
#include "mantissa/gemm/gemm.h"

namespace mantissa::gemm::detail {

// op(A) @ op(B) on the CPU: the fp32 sum of the decoded elements times their block scales
// (kernels/cpu/mx/mx_gemm.h), times the two per-tensor scales, bias added in fp32, rounded once
// to out_dtype. The codes are decoded inside the kernel's packing.
Tensor block_format_product(const Operand& a, const Operand& b, const Tensor& bias,
                            DType out_dtype);

}  // namespace mantissa::gemm::detail
