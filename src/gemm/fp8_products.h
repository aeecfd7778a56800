#pragma once
// The engines of products of two FP8 operands (fp8_products.cpp): out = alpha * (op(A) @ op(B))
// (+ bias), one fp32 accumulator, rounded once to out_dtype. src/gemm/dispatch.cpp checks the
// operands, computes alpha (the product of their scale_inv) and chooses the engine. The CPU
// engines also take Epilogue's row and column scales (`scales`), applied after alpha.
#include "mantissa/gemm/gemm.h"

namespace mantissa::gemm::detail {

// Epilogue::row_scale and col_scale: undefined, or contiguous fp32 (M) and (N); and
// Epilogue::bias_after_rounding.
struct RowColScales {
  Tensor row, col;
  bool bias_after_rounding = false;
  bool any() const { return row.defined() || col.defined(); }
};

// The native AVX2 GEMM, codes decoded inside its packing (no widened copy of either operand);
// the scales and the rounding to out_dtype in its epilogue, on the tile in registers.
Tensor fp8_fused(const Operand& a, const Operand& b, const Tensor& bias, DType out_dtype,
                 float alpha, const RowColScales& scales = {});

// The codes (scale_inv 1) widened exactly to `wide` (bfloat16 or float32; an operand's own
// `widened` copy where it has one), multiplied with the fp32 accumulator kept, then scaled,
// biased and rounded. onednn_epilogue: bfloat16 operands on oneDNN's native bf16 matmul with
// the scale and bias in its epilogue (out_dtype float32 or bfloat16, bias float32/bfloat16); with
// row or column scales, its fp32 result (alpha applied) is scaled, biased and rounded after.
Tensor fp8_widened(const Operand& a, const Operand& b, const Tensor& bias, DType out_dtype,
                   float alpha, DType wide, bool onednn_native_bf16,
                   const RowColScales& scales = {});

// GPU codes: cuBLASLt's FP8 kernels where the GPU and shapes allow, else the emulation (codes
// widened exactly to fp32, an fp32 product, scaled once).
Tensor fp8_on_gpu(const Operand& a, const Operand& b, const Tensor& bias, DType out_dtype,
                  float alpha);

}  // namespace mantissa::gemm::detail
