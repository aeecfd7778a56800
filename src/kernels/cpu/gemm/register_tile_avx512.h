#pragma once
// The accumulator of the AVX-512 register tiles (fp32_register_tile.cpp, bf16_pair_tile.cpp):
// R rows of 32 fp32 columns, two vectors a row. Loaded from acc (or 0), stored back, or
// promoted into out as out = fma(c, f32(sa[r] * sb[col]), out) (with `first`, from 0).
#include <immintrin.h>

#include <cstdint>

namespace mantissa::kernels::register_tile {

template <int R>
[[gnu::always_inline]] __attribute__((target("avx512f,fma"))) inline void load(__m512 (&c)[R][2],
                                                                               const float* acc,
                                                                               int64_t ldc,
                                                                               bool zero) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    c[r][0] = zero ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + r * ldc);
    c[r][1] = zero ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + r * ldc + 16);
  }
}

template <int R>
[[gnu::always_inline]] __attribute__((target("avx512f,fma"))) inline void store(
    const __m512 (&c)[R][2], float* acc, int64_t ldc) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(acc + r * ldc, c[r][0]);
    _mm512_storeu_ps(acc + r * ldc + 16, c[r][1]);
  }
}

template <int R>
[[gnu::always_inline]] __attribute__((target("avx512f,fma"))) inline void promote(
    const __m512 (&c)[R][2], const float* sa, const float* sb, float* out, int64_t ldo,
    bool first) {
  const __m512 s0 = _mm512_loadu_ps(sb), s1 = _mm512_loadu_ps(sb + 16);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 sr = _mm512_set1_ps(sa[r]);
    float* o = out + r * ldo;
    const __m512 o0 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
    const __m512 o1 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o + 16);
    _mm512_storeu_ps(o, _mm512_fmadd_ps(c[r][0], _mm512_mul_ps(sr, s0), o0));
    _mm512_storeu_ps(o + 16, _mm512_fmadd_ps(c[r][1], _mm512_mul_ps(sr, s1), o1));
  }
}

}  // namespace mantissa::kernels::register_tile
