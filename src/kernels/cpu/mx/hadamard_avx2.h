#pragma once
// Internal: the AVX2 body of the random Hadamard transform of a transposed source (hadamard.h):
// 16 rows x 8 columns of src in 16 registers, register i holding element i of 8 blocks (one per
// column), with the sign products and four butterfly stages of the transform applied lane by
// lane. The transform's own tiles (hadamard.cpp) and the NVFP4 cast that encodes the blocks
// straight from these registers (nvfp4_rht_columns_avx2.cpp) share it. Carries
// its target and is always inlined, so only AVX2 code compiles it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/mx/hadamard.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::mx::rht_avx2 {

__attribute__((target("avx2"), always_inline)) inline __m256 load8(const void* src, DType dtype,
                                                                   int64_t i) {
  if (dtype == kFloat32) return _mm256_loadu_ps(static_cast<const float*>(src) + i);
  const __m128i h =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(src) + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Rows [m0, m0 + 16) x columns [c0, c0 + 8) of src (rows x cols, all inside it), the 1/4 not
// yet applied. The loops are unrolled so that the 16 vectors stay in registers (left to
// itself the compiler keeps them in memory and tests the dtype at every load).
__attribute__((target("avx2"), always_inline)) inline void butterflies8(const void* src, DType d,
                                                                        int64_t cols, int64_t m0,
                                                                        int64_t c0, __m256* v) {
  const int64_t first = m0 * cols + c0;
  if (d == kFloat32) {
#pragma GCC unroll 16
    for (int64_t i = 0; i < kRhtSize; ++i)
      v[i] = _mm256_loadu_ps(static_cast<const float*>(src) + first + i * cols);
  } else {
#pragma GCC unroll 16
    for (int64_t i = 0; i < kRhtSize; ++i) v[i] = load8(src, kBFloat16, first + i * cols);
  }
  // The signs as products (a NaN keeps its sign, which its E2M1 code carries), -1 hidden from
  // the compiler, which would otherwise flip the sign bit; +1 changes no value that reaches an
  // output (the butterflies quiet a signalling NaN as the product would).
  __m256 minus_one = _mm256_set1_ps(-1.0f);
  asm("" : "+x"(minus_one));
#pragma GCC unroll 16
  for (int64_t i = 0; i < kRhtSize; ++i)
    if (kRhtSigns[i] < 0.0f) v[i] = _mm256_mul_ps(v[i], minus_one);
#pragma GCC unroll 4
  for (int stage = 0; stage < 4; ++stage)  // h = 2^stage
#pragma GCC unroll 8
    for (int p = 0; p < kRhtSize / 2; ++p) {  // the pairs (j, j + h), j's bit `stage` clear
      const int h = 1 << stage, j = (p >> stage << (stage + 1)) | (p & (h - 1));
      const __m256 a = v[j], b = v[j + h];
      v[j] = _mm256_add_ps(a, b);
      v[j + h] = _mm256_sub_ps(a, b);
    }
}

// r[0..7] := its transpose (r[k] lane i becomes r[i] lane k).
__attribute__((target("avx2"), always_inline)) inline void transpose8(__m256* r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

}  // namespace mantissa::kernels::mx::rht_avx2
