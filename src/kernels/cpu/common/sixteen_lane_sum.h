#pragma once
// Internal: the sum of an output's sixteen fp32 lanes in the few-rows products (dense_gemv.h,
// quant/four_bit_gemv.h), at each SIMD level, in one order so every level gives the same bits:
// lane i + 8 is added to lane i, then i + 4, then i + 2, then lane 1 to lane 0.
// The AVX2 and AVX-512 forms carry their target attributes and are always inlined, so they are
// compiled only into the per-level files that call them (a caller without those targets does
// not compile); the scalar form serves the scalar levels.
#include <immintrin.h>

namespace mantissa::kernels {

inline float sixteen_lane_sum(const float* lanes) {
  float s[8], t[4];
  for (int i = 0; i < 8; ++i) s[i] = lanes[i] + lanes[i + 8];
  for (int i = 0; i < 4; ++i) t[i] = s[i] + s[i + 4];
  const float u0 = t[0] + t[2], u1 = t[1] + t[3];
  return u0 + u1;
}

// Lanes 0-7 in `lo`, 8-15 in `hi`.
__attribute__((target("avx2"), always_inline)) inline float sixteen_lane_sum_avx2(__m256 lo,
                                                                                  __m256 hi) {
  const __m256 s = _mm256_add_ps(lo, hi);
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 u = _mm_add_ps(t, _mm_movehl_ps(t, t));
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

__attribute__((target("avx512f"), always_inline)) inline float sixteen_lane_sum_avx512(__m512 a) {
  return sixteen_lane_sum_avx2(_mm512_castps512_ps256(a),
                               _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

}  // namespace mantissa::kernels
