// AVX2 int8 x int8 -> int32 product. Both operands are first sign-extended to int16 once, into
// rows padded with zeros to a multiple of 16 values; a 4 x 3 register tile then multiplies them
// pairwise with _mm256_madd_epi16. Products of int8 values and their pair sums fit int32
// exactly, so every sum is exact and equals the scalar one. The product runs over blocks of
// 64 rows of `a` and 96 rows of `b` (about 200 KiB of b at K = 1024, which stays in L2), the
// blocks shared between threads.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "kernels/cpu/quant/int8_rowwise.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma")))

namespace mantissa::kernels::quant {
namespace {

constexpr int64_t kRowBlock = 64, kColBlock = 96;
constexpr int kTileRows = 4, kTileCols = 3;

MANTISSA_AVX2 inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// rows x k int8 -> rows x kp int16, the tail of each row zero.
MANTISSA_AVX2 void widen_rows(const int8_t* src, int64_t rows, int64_t k, int64_t kp,
                              int16_t* dst) {
#pragma omp parallel for schedule(static) if (rows * k > (1 << 18))
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* s = src + r * k;
    int16_t* d = dst + r * kp;
    int64_t p = 0;
    for (; p + 16 <= k; p += 16)
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(d + p),
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + p))));
    for (; p < k; ++p) d[p] = s[p];
    for (; p < kp; ++p) d[p] = 0;
  }
}

// c[R x C tile] = a rows . b rows over kp int16 values (a multiple of 16); the tile loops are
// unrolled so that the accumulators stay in registers.
template <int R, int C>
MANTISSA_AVX2 void tile(const int16_t* a, const int16_t* b, int64_t kp, int32_t* c, int64_t ldc) {
  __m256i acc[R][C];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
    for (int q = 0; q < C; ++q) acc[r][q] = _mm256_setzero_si256();
  for (int64_t p = 0; p < kp; p += 16) {
    __m256i vb[C];
#pragma GCC unroll 3
    for (int q = 0; q < C; ++q)
      vb[q] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + q * kp + p));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * kp + p));
#pragma GCC unroll 3
      for (int q = 0; q < C; ++q)
        acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(va, vb[q]));
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
    for (int q = 0; q < C; ++q) c[r * ldc + q] = hsum(acc[r][q]);
}

template <int R>
MANTISSA_AVX2 void tile_rows(const int16_t* a, const int16_t* b, int64_t cols, int64_t kp,
                             int32_t* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + kTileCols <= cols; j += kTileCols) tile<R, kTileCols>(a, b + j * kp, kp, c + j, ldc);
  if (cols - j == 2) tile<R, 2>(a, b + j * kp, kp, c + j, ldc);
  if (cols - j == 1) tile<R, 1>(a, b + j * kp, kp, c + j, ldc);
}

// Lanes that count: with a threshold, those that are not outliers (|v| >= threshold).
MANTISSA_AVX2 inline __m256 inliers(__m256 av, bool split, __m256 thr, __m256 all) {
  return split ? _mm256_cmp_ps(av, thr, _CMP_NGE_UQ) : all;
}

}  // namespace

MANTISSA_AVX2 float int8_quantize_row_avx2(const float* r, int64_t cols, float threshold,
                                           const uint8_t* zero_cols, int8_t* o) {
  // The scalar row's steps on eight lanes; the last cols % 8 values take the scalar loops'
  // operations one by one. The absmax skips outliers (|v| >= threshold); a NaN among the rest
  // makes it NaN (MAXPS would drop it, so NaN lanes are flagged apart). Codes round with
  // VCVTPS2DQ in the default rounding mode: to nearest, ties to even, as the scalar row.
  const bool split = threshold > 0.0f;
  const __m256 thr = _mm256_set1_ps(threshold);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  const int64_t c8 = cols / 8 * 8;
  __m256 vmax = _mm256_setzero_ps();
  __m256 nan = _mm256_setzero_ps();
  for (int64_t j = 0; j < c8; j += 8) {
    const __m256 av = _mm256_and_ps(_mm256_loadu_ps(r + j), abs_mask);
    const __m256 in = inliers(av, split, thr, all);
    nan = _mm256_or_ps(nan, _mm256_and_ps(in, _mm256_cmp_ps(av, av, _CMP_UNORD_Q)));
    vmax = _mm256_max_ps(vmax, _mm256_and_ps(in, av));  // a NaN lane may drop: flagged above
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, vmax);
  float mx = 0.0f;
  for (float v : lanes) mx = std::max(mx, v);
  bool has_nan = _mm256_movemask_ps(nan) != 0;
  for (int64_t j = c8; j < cols; ++j) {
    const float a = std::fabs(r[j]);
    if (split && a >= threshold) continue;
    has_nan |= std::isnan(a);
    mx = std::max(mx, a);
  }
  if (has_nan) mx = std::numeric_limits<float>::quiet_NaN();
  if (mx == 0.0f || !std::isfinite(mx)) {
    std::fill(o, o + cols, int8_t{0});
    return mx;
  }
  const float scale = int8_row_scale(mx);
  const __m256 vs = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < c8; j += 8) {
    const __m256 v = _mm256_loadu_ps(r + j);
    __m256i keep = _mm256_castps_si256(inliers(_mm256_and_ps(v, abs_mask), split, thr, all));
    if (zero_cols) {
      const __m256i z =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zero_cols + j)));
      keep = _mm256_andnot_si256(_mm256_cmpgt_epi32(z, _mm256_setzero_si256()), keep);
    }
    const __m256i q = _mm256_and_si256(keep, _mm256_cvtps_epi32(_mm256_mul_ps(v, vs)));
    const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + j), _mm_packs_epi16(p16, p16));
  }
  for (int64_t j = c8; j < cols; ++j) {
    const bool outlier = split && std::fabs(r[j]) >= threshold;
    o[j] = outlier || (zero_cols && zero_cols[j])
               ? int8_t{0}
               : static_cast<int8_t>(std::nearbyint(r[j] * scale));
  }
  return mx;
}

MANTISSA_AVX2 void int8_gemm_nt_avx2(const int8_t* a, const int8_t* b, int64_t m, int64_t n,
                                     int64_t k, int32_t* c) {
  if (m <= 0 || n <= 0) return;
  const int64_t kp = (k + 15) / 16 * 16;
  // Uninitialized: widen_rows writes every element, padding included.
  const std::unique_ptr<int16_t[]> aw(new int16_t[m * kp]), bw(new int16_t[n * kp]);
  widen_rows(a, m, k, kp, aw.get());
  widen_rows(b, n, k, kp, bw.get());
  const int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
  const int64_t col_blocks = (n + kColBlock - 1) / kColBlock;
#pragma omp parallel for collapse(2) schedule(static) if (m * n * k > (1 << 20))
  for (int64_t jb = 0; jb < col_blocks; ++jb)
    for (int64_t ib = 0; ib < row_blocks; ++ib) {
      const int64_t j0 = jb * kColBlock, cols = std::min(kColBlock, n - j0);
      const int64_t i_end = std::min(m, (ib + 1) * kRowBlock);
      const int16_t* bj = bw.get() + j0 * kp;
      int64_t i = ib * kRowBlock;
      for (; i + kTileRows <= i_end; i += kTileRows)
        tile_rows<kTileRows>(aw.get() + i * kp, bj, cols, kp, c + i * n + j0, n);
      for (; i < i_end; ++i) tile_rows<1>(aw.get() + i * kp, bj, cols, kp, c + i * n + j0, n);
    }
}

}  // namespace mantissa::kernels::quant
