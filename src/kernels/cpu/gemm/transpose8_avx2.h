#pragma once
// An 8 x 8 fp32 transpose in ymm registers, shared by the AVX2 GEMM's packers
// (gemm_pack_avx2.cpp, gemm_narrow_avx2.cpp) and the convolutions' blocked-layout conversions
// (onednn/blocked_convert.cpp). Include only from files whose functions are
// compiled for AVX2 (a per-function target attribute).
#include <immintrin.h>

namespace mantissa::kernels::gemm_avx2 {

// r[i] holds row i on entry and column i on return.
__attribute__((target("avx2"), always_inline)) inline void transpose8(__m256 r[8]) {
  // (Unrolled: as loops, GCC 12 kept r, t and u in memory, a store and a load per value.)
  __m256 t[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m256 u[8];
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

}  // namespace mantissa::kernels::gemm_avx2
