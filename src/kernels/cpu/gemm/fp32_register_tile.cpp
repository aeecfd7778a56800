// The fp32 register tiles (fp32_register_tile.h).
#include "kernels/cpu/gemm/fp32_register_tile.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/gemm/register_tile_avx512.h"

namespace mantissa::kernels {
namespace {

// With kPromote the partial sums start at 0 and are promoted into acc by sa[r] * sb[c] at the end
// (into 0, acc not read, with `first`).
template <int R, bool kPromote = false>
__attribute__((target("avx512f,fma"))) void body_avx512(
    const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kl, float* acc, int64_t ldc,
    bool zero, const float* sa = nullptr, const float* sb = nullptr, bool first = false) {
  __m512 c[R][2];
  register_tile::load<R>(c, acc, ldc, zero);
  for (int64_t k = 0; k < kl; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b + k * ldb), b1 = _mm512_loadu_ps(b + k * ldb + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + k]);
      c[r][0] = _mm512_fmadd_ps(av, b0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(av, b1, c[r][1]);
    }
  }
  if constexpr (kPromote)
    register_tile::promote<R>(c, sa, sb, acc, ldc, first);
  else
    register_tile::store<R>(c, acc, ldc);
}

template <int R, bool kPromote = false>
__attribute__((target("avx2,fma"))) void body_avx2(const float* a, int64_t lda, const float* b,
                                                   int64_t ldb, int64_t kl, float* acc, int64_t ldc,
                                                   bool zero, const float* sa = nullptr,
                                                   const float* sb = nullptr, bool first = false) {
  __m256 c[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    c[r][0] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + r * ldc);
    c[r][1] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + r * ldc + 8);
  }
  for (int64_t k = 0; k < kl; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * ldb), b1 = _mm256_loadu_ps(b + k * ldb + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + k);
      c[r][0] = _mm256_fmadd_ps(av, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(av, b1, c[r][1]);
    }
  }
  if constexpr (kPromote) {
    const __m256 s0 = _mm256_loadu_ps(sb), s1 = _mm256_loadu_ps(sb + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 sr = _mm256_set1_ps(sa[r]);
      float* o = acc + r * ldc;
      const __m256 o0 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(o);
      const __m256 o1 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(o + 8);
      _mm256_storeu_ps(o, _mm256_fmadd_ps(c[r][0], _mm256_mul_ps(sr, s0), o0));
      _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(c[r][1], _mm256_mul_ps(sr, s1), o1));
    }
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(acc + r * ldc, c[r][0]);
    _mm256_storeu_ps(acc + r * ldc + 8, c[r][1]);
  }
}

template <bool kPromote = false>
void body_scalar(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kl, float* acc,
                 int64_t ldc, bool zero, const float* sa = nullptr, const float* sb = nullptr,
                 bool first = false) {
  constexpr int R = 4, C = 8;
  float c[R][C];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) c[r][j] = zero ? 0.0f : acc[r * ldc + j];
  for (int64_t k = 0; k < kl; ++k)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j) c[r][j] = std::fma(a[r * lda + k], b[k * ldb + j], c[r][j]);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j)
      acc[r * ldc + j] =
          kPromote ? std::fma(c[r][j], sa[r] * sb[j], first ? 0.0f : acc[r * ldc + j]) : c[r][j];
}

template <int R>
__attribute__((target("avx512f,fma"))) void tile_avx512(const float* a, int64_t lda, const float* b,
                                                        int64_t ldb, int64_t kl, float* acc,
                                                        int64_t ldc, bool zero) {
  body_avx512<R>(a, lda, b, ldb, kl, acc, ldc, zero);
}
template <int R>
__attribute__((target("avx2,fma"))) void tile_avx2(const float* a, int64_t lda, const float* b,
                                                   int64_t ldb, int64_t kl, float* acc, int64_t ldc,
                                                   bool zero) {
  body_avx2<R>(a, lda, b, ldb, kl, acc, ldc, zero);
}
void tile_scalar(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kl, float* acc,
                 int64_t ldc, bool zero) {
  body_scalar(a, lda, b, ldb, kl, acc, ldc, zero);
}

template <int R>
__attribute__((target("avx512f,fma"))) void promote_avx512(const float* a, int64_t lda,
                                                           const float* b, int64_t ldb, int64_t kl,
                                                           const float* sa, const float* sb,
                                                           float* out, int64_t ldo, bool first) {
  body_avx512<R, true>(a, lda, b, ldb, kl, out, ldo, true, sa, sb, first);
}
template <int R>
__attribute__((target("avx2,fma"))) void promote_avx2(const float* a, int64_t lda, const float* b,
                                                      int64_t ldb, int64_t kl, const float* sa,
                                                      const float* sb, float* out, int64_t ldo,
                                                      bool first) {
  body_avx2<R, true>(a, lda, b, ldb, kl, out, ldo, true, sa, sb, first);
}
void promote_scalar(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kl,
                    const float* sa, const float* sb, float* out, int64_t ldo, bool first) {
  body_scalar<true>(a, lda, b, ldb, kl, out, ldo, true, sa, sb, first);
}

}  // namespace

Fp32RegisterTile fp32_register_tile(SimdLevel level) {
  const SimdLevel l = std::min(level, simd_level());
  if (l >= SimdLevel::kAvx512) return {8, 32, tile_avx512<8>, promote_avx512<8>};
  if (l >= SimdLevel::kAvx2) return {6, 16, tile_avx2<6>, promote_avx2<6>};
  return {4, 8, tile_scalar, promote_scalar};
}

}  // namespace mantissa::kernels
