#pragma once
// The 4-bit Linear's forward for few input rows, y = x W^T (generation decodes one row per
// token): W's codes are read once from their packed bytes and decoded in registers, never into
// a dequantized copy of W. Each block of W gets a table of its sixteen values (the code book
// times the block's absmax, rounded to the compute dtype: exactly the values quant::dequantize
// gives), so one element costs a nibble split and a permute (VPERMPS) before its FMA. The product
// reads 4 bits per weight, so it runs near memory speed, where decoding W to bf16 before a GEMM
// wrote and read 16 bits per weight on every call.
//
// Summation order, the same on every level (so every level gives the same bits): the terms of
// an output go to sixteen fp32 lanes, x[k] * v[k] to lane k % 16 by fused multiply-add in
// increasing k; lane i and lane i + 8 are then added, then i and i + 4, i and i + 2, 0 and 1
// (common/sixteen_lane_sum.h); the bias is added to that in fp32, and the sum is rounded once
// to the output dtype.
#include <cstdint>

#include "kernels/cpu/quant/four_bit_amx.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::quant {

// Input rows up to which the 4-bit Linear's forward takes this kernel (bf16 compute on AMX keeps
// the AMX kernels): it decodes W once per four input rows, where decoding W to bf16 for oneDNN
// costs one decode per call; they meet at about 8 rows on Zen 4
// (bench/results/2026-11-28-1933-four-bit-gemv-rows.md).
inline constexpr int64_t kFourBitGemvMaxRows = 8;

// y[i, j] = round_out(sum_k x[i, k] * v(j, k) + bias[j]) for x (m, w.cols) in fp32 and
// y (m, w.rows) in y_dtype (float32, bfloat16 or float16), where v(j, k) is W's element (j, k)
// as dequantize(W, w_round) stores it: table[code] * absmax[block] in fp32, rounded once to
// w_round (float32: no rounding; bfloat16, float16: round to nearest even). bias is fp32 (w.rows
// values) or null. Rows of W run in parallel (OpenMP).
void four_bit_gemv(const FourBitMatrix& w, const float* x, int64_t m, DType w_round,
                   const float* bias, void* y, DType y_dtype, SimdLevel level = simd_level());

// The levels' part: the sums before the bias of W's rows [n0, n1) for all m input rows,
// sums[i * ld + (j - n0)]. In this file's order, so all three give the same bits.
void four_bit_gemv_rows_scalar(const FourBitMatrix& w, const float* x, int64_t m, DType w_round,
                               int64_t n0, int64_t n1, float* sums, int64_t ld);
void four_bit_gemv_rows_avx2(const FourBitMatrix& w, const float* x, int64_t m, DType w_round,
                             int64_t n0, int64_t n1, float* sums, int64_t ld);
void four_bit_gemv_rows_avx512(const FourBitMatrix& w, const float* x, int64_t m, DType w_round,
                               int64_t n0, int64_t n1, float* sums, int64_t ld);

}  // namespace mantissa::kernels::quant
