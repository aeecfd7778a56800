#pragma once
// Small dense products on cache-resident tiles, for kernels that keep their operands in
// per-thread scratch (the fused attention): C (m x n) = [C +] A (m x k) B (k x n).
//
// A is read one element at a time and broadcast, so it may have any strides (a_rs = 1,
// a_cs = lda reads a transposed tile); B and C are row-major with unit stride along n, the
// vector direction. Every element of C is one sum over p = 0 .. k-1 in that order, started
// from C (accumulate) or 0, so the result does not depend on how a level blocks rows and
// columns, nor on which thread runs it. The float product uses AVX-512F FMA when the CPU has it,
// else AVX2 FMA, else a portable loop; double always the portable loop.
#include <cstdint>

namespace mantissa::kernels {

void tile_gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
               const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);
void tile_gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t a_rs, int64_t a_cs,
               const double* b, int64_t ldb, double* c, int64_t ldc, bool accumulate);

// The AVX-512F level of the float product (tile_gemm_avx512.cpp); call only when
// cpu_features().avx512f.
void tile_gemm_f32_avx512(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs,
                          int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                          bool accumulate);
// The AVX2 + FMA level (tile_gemm_avx2.cpp); call only when simd_level() >= SimdLevel::kAvx2.
void tile_gemm_f32_avx2(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                        const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

}  // namespace mantissa::kernels
