#pragma once
// torchao's float8 rowwise scaling (docs/fp8.md "Recipes": `rowwise`, `rowwise-gw-hp`): one
// scale per row of a 2-D operand, taken over the row (the GEMM's reduction dimension), and the
// FP8 GEMM whose epilogue applies the row scales of both operands.
//   amax[r]  = max |x[r, :]|, a NaN in the row making it NaN (as torch.amax)
//   scale[r] = f32(f64(fp8_max) / max(f64(amax[r]), 1e-12)) (torchao's amax_to_scale), rounded
//              down to a power of 2 (2^floor(log2 s)) when asked; 0 for an inf amax
//   codes    = satfinite_rne(f32(x * scale[r])), the same cast as the other recipes
//   scale_inv[r] = f32(1 / scale[r])
#include "mantissa/core/tensor.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/tensor.h"

namespace mantissa::fp8 {

// The floor torchao puts under an amax before dividing (its EPS).
inline constexpr double kTorchaoAmaxEpsilon = 1e-12;

// A 2-D operand quantized with one scale per row.
struct RowwiseFp8 {
  Tensor codes;             // [rows, cols] float8, contiguous (transposed: [cols, rows])
  Tensor scale;             // [rows] float32
  Tensor scale_inv;         // [rows] float32
  bool transposed = false;  // the codes hold the operand transposed (quantize_columns)
  float amax = 0.0f;        // the largest row amax (NaN passed over), for statistics
  CastCounts counts;        // the casts' saturated and flushed values
};

// torchao's amax_to_scale for one amax (see the file comment). NaN stays NaN.
float torchao_scale(float amax, float fp8_max, bool power_2);

// One scale per row of the 2-D float32/bfloat16/float16 CPU tensor x.
RowwiseFp8 quantize_rows(const Tensor& x, DType fp8, bool power_2);
// One scale per column of the 2-D tensor x: the operand x^T quantized per row, as
// quantize_rows(x.t().contiguous()) gives it, bit for bit, but with the codes left in x's layout
// ([x rows, x cols], `transposed`), so no transposed copy of x is made; rowwise_gemm reads them
// as the transposed operand.
RowwiseFp8 quantize_columns(const Tensor& x, DType fp8, bool power_2);
// One scale for the whole tensor (torchao's tensorwise dynamic scaling, torchao_scale of its
// amax, NaN propagating); the result has a single scale.
RowwiseFp8 quantize_tensorwise(const Tensor& x, DType fp8, bool power_2);

// out = (A @ op(B)) with the scales applied in the epilogue: A is [M, K] with one scale_inv per
// row (or one in all); B is [N, K] (transpose_b, one scale_inv per row = per output column, or
// one in all) or [K, N] (one scale_inv in all). A `transposed` operand's codes hold it transposed
// (the product reads them so; the values and so the result are the same). The code products
// accumulate in fp32 (fp8_gemm with unit scales), then out[m, n] = f32(f32(acc * a_inv[m]) *
// b_inv[n]), rounded once to out_dtype. torch._scaled_mm's rowwise product on the CPU. bias:
// undefined, or [N] in out_dtype, added as `y + bias` adds it to that product y (in fp32, then
// rounded to out_dtype again), inside the product's epilogue.
Tensor rowwise_gemm(const RowwiseFp8& a, const RowwiseFp8& b, bool transpose_b, DType out_dtype,
                    const Tensor& bias = Tensor());

}  // namespace mantissa::fp8
