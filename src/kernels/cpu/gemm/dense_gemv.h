#pragma once
// The float32 product for few input rows, y = x W^T + bias, with W (n, k) stored row-major (a
// Linear's weight): generation runs one row per token, where a GEMM's packing of W costs as
// much as the product and the product is bound by reading W. Each of W's rows is read once per
// input row straight from memory, four rows at a time, split over the threads.
//
// Summation order, the same on every level (so every level gives the same bits): the terms of
// an output go to sixteen fp32 lanes, x[k] * w[k] to lane k % 16 by fused multiply-add in
// increasing k; lane i and lane i + 8 are then added, then i and i + 4, i and i + 2, 0 and 1
// (common/sixteen_lane_sum.h); the bias is added to that in fp32.
#include <cstdint>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels {

// Input rows up to which a float32 Linear's forward takes this kernel.
inline constexpr int64_t kDenseGemvMaxRows = 4;

// y[i * ldy + j] = sum_k x[i * ldx + k] * w[j * ldw + k] (+ bias[j]) for i < m, j < n, in the
// order above; bias may be null. Rows of W run in parallel (OpenMP) when the product is large.
void dense_gemv_f32(const float* w, int64_t ldw, int64_t n, int64_t k, const float* x, int64_t ldx,
                    int64_t m, const float* bias, float* y, int64_t ldy,
                    SimdLevel level = simd_level());

// The sums before the bias of W's rows [n0, n1) against input row x, on this thread, at the
// highest of `level` and the CPU's levels; the per-level functions below do the work.
void dense_gemv_rows(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n0, int64_t n1,
                     float* sums, SimdLevel level = simd_level());
void dense_gemv_rows_scalar(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n0,
                            int64_t n1, float* sums);
void dense_gemv_rows_avx2(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n0,
                          int64_t n1, float* sums);
void dense_gemv_rows_avx512(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n0,
                            int64_t n1, float* sums);

}  // namespace mantissa::kernels
