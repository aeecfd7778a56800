#pragma once
// LLM.int8() pieces (docs/quantization.md, "Int8"): row-wise absmax quantization with the
// outlier-column decomposition (bitsandbytes' int8_vectorwise_quant) and the int8 x int8 ->
// int32 product of two row-major matrices sharing their inner dimension.
#include <cstdint>
#include <vector>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::quant {

// The factor a row's values are multiplied by before rounding, in bitsandbytes' order: the
// float32 reciprocal of the absmax, then times 127 (its CPU op writes `127.0 / row_stats`, which
// torch evaluates as row_stats.reciprocal() * 127). Two roundings, so it can differ from a
// correctly rounded 127 / absmax by an ulp, and a product that is a tie (k + 0.5) under one
// factor is not under the other: the stored code then differs by one (Int8Rows.ScaleTie*).
inline float int8_row_scale(float absmax) { return (1.0f / absmax) * 127.0f; }

// a: [rows, cols] fp32. With threshold > 0, an element with |a| >= threshold is an outlier and
// its column an outlier column (listed ascending in outlier_cols). row_absmax[i] = max |a[i,j]|
// over non-outliers; out[i,j] = round_half_even(a[i,j] * int8_row_scale(row_absmax[i])), in
// float32, with outliers 0 and, when rows > 1, every element of an outlier column 0. A row whose
// absmax is 0 gives 0s; so does one with an infinite absmax, or a NaN among its non-outliers,
// whose absmax is then NaN: that row scale makes every output of the row NaN (0 * inf or * NaN in
// the epilogue), as a NaN or inf input makes a float Linear's row non-finite, instead of vanishing
// into finite codes. Rows run in parallel; each row on `level` (AVX-512 or scalar, the same bytes).
void int8_rowwise_quantize(const float* a, int64_t rows, int64_t cols, float threshold, int8_t* out,
                           float* row_absmax, std::vector<int64_t>* outlier_cols,
                           SimdLevel level = simd_level());

// The same for a bfloat16 or float16 (`half`) matrix: the codes, absmax and outlier columns of
// its values widened to float32 (exact), without a float32 copy of the matrix.
void int8_rowwise_quantize_half(const uint16_t* a, DType half, int64_t rows, int64_t cols,
                                float threshold, int8_t* out, float* row_absmax,
                                std::vector<int64_t>* outlier_cols, SimdLevel level = simd_level());

// One row: returns its absmax over non-outliers and writes its codes; zero_cols (or nullptr)
// flags the further columns to write as 0.
float int8_quantize_row_scalar(const float* r, int64_t cols, float threshold,
                               const uint8_t* zero_cols, int8_t* out);
float int8_quantize_row_avx2(const float* r, int64_t cols, float threshold,
                             const uint8_t* zero_cols, int8_t* out);
float int8_quantize_row_avx512(const float* r, int64_t cols, float threshold,
                               const uint8_t* zero_cols, int8_t* out);

// c[i, j] = sum_k a[i, k] * b[j, k] in int32 (a: [m, k], b: [n, k], c: [m, n]). Exact, so
// every level gives the same result.
void int8_gemm_nt(const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k, int32_t* c,
                  SimdLevel level = simd_level());
// Level kAvx512 and above, on a CPU with AVX-512 VNNI: oneDNN's s8 x s8 -> s32 matmul (VPDPBUSD,
// or AMX-INT8 tiles where the CPU has them), which is exact there; without VNNI oneDNN's int8
// kernels multiply through VPMADDUBSW, whose int16 pair sums saturate, so the AVX2 kernel runs.
void int8_gemm_nt_avx2(const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k,
                       int32_t* c);

}  // namespace mantissa::kernels::quant
