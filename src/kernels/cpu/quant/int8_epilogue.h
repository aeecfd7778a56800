#pragma once
// LLM.int8's dequantizing epilogue (docs/quantization.md, "Int8"): the int32 products back to
// fp32 with the row and column scales, the outlier columns' fp32 products and the bias, in one
// pass over the output. The scalar and AVX2 versions give the same bits: the same operations in
// the same order, no fused multiply-add.
#include <cstdint>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::quant {

// add[i, j] = sum over c = 0 .. ncols-1, in that order from 0.0f, of x[i, cols[c]] * w[c, j]
// (x: [rows, ld_x] row-major; w: [ncols, n], the outlier columns' scaled weights, transposed).
// Rows in parallel.
void int8_outlier_products(const float* x, int64_t ld_x, const int64_t* cols, int64_t ncols,
                           const float* w, int64_t rows, int64_t n, float* add,
                           SimdLevel level = simd_level());

// y[i, j] = float(acc[i, j]) * (sa[i] * sb[j]) * (1 / 16129), then + add[i, j] where add is
// given, then + bias[j] where bias is given (y: [rows, n]). Rows in parallel.
void int8_dequant_epilogue(const int32_t* acc, const float* sa, const float* sb, const float* add,
                           const float* bias, int64_t rows, int64_t n, float* y,
                           SimdLevel level = simd_level());

// The same y rounded once (to nearest even) to half (kBFloat16 or kFloat16), the bits of
// int8_dequant_epilogue's fp32 output converted, without that fp32 matrix: each row is made in
// fp32 a chunk at a time and narrowed while in cache.
void int8_dequant_epilogue_to_half(const int32_t* acc, const float* sa, const float* sb,
                                   const float* add, const float* bias, int64_t rows, int64_t n,
                                   DType half, uint16_t* y, SimdLevel level = simd_level());

// out[i, j] = float(codes[i, j]) * absmax[i] * (1 / 127), in that order (the row-wise int8
// codes back to fp32; codes and out: [rows, cols]). Rows in parallel.
void int8_dequantize_rows(const int8_t* codes, const float* absmax, int64_t rows, int64_t cols,
                          float* out, SimdLevel level = simd_level());

// The same values rounded once (to nearest even) to half (kBFloat16 or kFloat16), without an
// fp32 copy of the whole matrix: each row is dequantized a chunk at a time and narrowed.
void int8_dequantize_rows_to_half(const int8_t* codes, const float* absmax, int64_t rows,
                                  int64_t cols, DType half, uint16_t* out,
                                  SimdLevel level = simd_level());

}  // namespace mantissa::kernels::quant
