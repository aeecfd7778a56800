// AVX2 int8 x int8 -> int32 product and the AVX2 row of the row-wise quantization. The product
// packs both operands once per call, sign-extended to int16 pairs along k: b into panels of 16
// columns (per k pair, 16 columns x 2 values: two vectors), a into panels of 6 rows (per k pair,
// 6 rows x 2 values). A 6 x 16 register tile (twelve 8-lane int32 accumulators) then broadcasts
// one row's pair, multiplies it by both column vectors with _mm256_madd_epi16 and adds: the inner
// loop is two loads, six broadcasts and twelve multiply-adds per k pair, with nothing reduced
// across lanes. Products of int8 values and their pair sums fit int32 exactly ((-128)^2 * 2 =
// 32768), so every sum is exact and equals the scalar one. k runs in blocks of kKc values (a
// 16-column panel's block, 8 KiB, stays in L1 while the 6-row panels of a block of kMc rows pass),
// the blocks of rows and columns shared between threads.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/quant/int8_rowwise.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma")))

namespace mantissa::kernels::quant {
namespace {

constexpr int kMr = 6, kNr = 16;                  // register tile: rows x int32 columns
constexpr int64_t kKc = 256;                      // k values per block (kKc / 2 pairs)
constexpr int64_t kMc = 16 * kMr, kNc = 8 * kNr;  // rows and columns per thread task

// Rows [r0, r0 + kMr) of src (rows x k int8) as a panel of int32 pair words: word (p, r) holds
// src[r0 + r][2p] in its low half and src[r0 + r][2p + 1] in its high half, kp pairs, rows past
// `rows` and values past k zero. Columns of b are packed by the same routine with 16 lanes.
template <int Lanes>
MANTISSA_AVX2 void pack_pairs(const int8_t* src, int64_t rows, int64_t k, int64_t r0, int64_t kp,
                              int32_t* dst) {
  const int valid = static_cast<int>(std::min<int64_t>(Lanes, rows - r0));
  for (int r = 0; r < Lanes; ++r) {
    int32_t* d = dst + r;
    if (r >= valid) {
      for (int64_t p = 0; p < kp; ++p) d[p * Lanes] = 0;
      continue;
    }
    const int8_t* s = src + (r0 + r) * k;
    int64_t p = 0;
    // 16 values -> 8 pair words, written Lanes apart.
    for (; 2 * p + 16 <= k; p += 8) {
      alignas(32) int32_t w[8];
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(w),
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * p))));
      for (int q = 0; q < 8; ++q) d[(p + q) * Lanes] = w[q];
    }
    for (; p < kp; ++p) {
      const int16_t lo = s[2 * p], hi = 2 * p + 1 < k ? s[2 * p + 1] : int16_t{0};
      d[p * Lanes] = static_cast<int32_t>(static_cast<uint16_t>(lo) |
                                          (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
    }
  }
}

// All panels of src: panel t holds rows [t * Lanes, t * Lanes + Lanes), kp * Lanes words. An
// orphaned worksharing loop: inside the product's parallel region the panels are shared among
// its threads (one region per product: on a busy machine each region's fork and join can wait a
// time slice for a descheduled thread).
template <int Lanes>
MANTISSA_AVX2 void pack_panels(const int8_t* src, int64_t rows, int64_t k, int64_t kp,
                               int32_t* dst) {
  const int64_t panels = (rows + Lanes - 1) / Lanes;
#pragma omp for schedule(static)
  for (int64_t t = 0; t < panels; ++t)
    pack_pairs<Lanes>(src, rows, k, t * Lanes, kp, dst + t * kp * Lanes);
}

// c[kMr x kNr] (+)= a panel . b panel over `pairs` k pairs; `rows` x `cols` of the tile are
// stored (the rest are padding), added to c when `accumulate` (a later k block).
MANTISSA_AVX2 void micro_tile(const int32_t* a, const int32_t* b, int64_t pairs, int32_t* c,
                              int64_t ldc, int rows, int cols, bool accumulate) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < pairs; ++p) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8));
    __m256i v = _mm256_set1_epi32(a[0]);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(v, b0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(v, b1));
    v = _mm256_set1_epi32(a[1]);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(v, b0));
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(v, b1));
    v = _mm256_set1_epi32(a[2]);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(v, b0));
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(v, b1));
    v = _mm256_set1_epi32(a[3]);
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(v, b0));
    c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(v, b1));
    v = _mm256_set1_epi32(a[4]);
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(v, b0));
    c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(v, b1));
    v = _mm256_set1_epi32(a[5]);
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(v, b0));
    c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(v, b1));
    a += kMr;
    b += kNr;
  }
  const __m256i acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                               {c30, c31}, {c40, c41}, {c50, c51}};
  if (cols == kNr) {
    for (int r = 0; r < rows; ++r) {
      auto* d = reinterpret_cast<__m256i*>(c + r * ldc);
      __m256i lo = acc[r][0], hi = acc[r][1];
      if (accumulate) {
        lo = _mm256_add_epi32(lo, _mm256_loadu_si256(d));
        hi = _mm256_add_epi32(hi, _mm256_loadu_si256(d + 1));
      }
      _mm256_storeu_si256(d, lo);
      _mm256_storeu_si256(d + 1, hi);
    }
    return;
  }
  alignas(32) int32_t buf[kNr];
  for (int r = 0; r < rows; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(buf), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(buf + 8), acc[r][1]);
    for (int q = 0; q < cols; ++q) c[r * ldc + q] = (accumulate ? c[r * ldc + q] : 0) + buf[q];
  }
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
  if (k <= 0) {
    std::fill(c, c + m * n, 0);
    return;
  }
  const int64_t kp = (k + 1) / 2;  // k pairs
  const int64_t a_panels = (m + kMr - 1) / kMr, b_panels = (n + kNr - 1) / kNr;
  // The calling thread's buffers, kept between calls (a step makes the same products again);
  // pack_panels writes every word, padding included.
  thread_local std::vector<int32_t> ap, bp;
  ap.resize(static_cast<size_t>(a_panels * kMr * kp));
  bp.resize(static_cast<size_t>(b_panels * kNr * kp));
  // (Pointers, not the thread_local vectors, inside the parallel region: a worker's own
  // instances are other, empty vectors.)
  int32_t* const a_pack = ap.data();
  int32_t* const b_pack = bp.data();
  const int64_t row_blocks = (m + kMc - 1) / kMc, col_blocks = (n + kNc - 1) / kNc;
  constexpr int64_t kPairsPerBlock = kKc / 2;
#pragma omp parallel if (m * n * k > (1 << 20))
  {
    pack_panels<kMr>(a, m, k, kp, a_pack);
    pack_panels<kNr>(b, n, k, kp, b_pack);  // (its loop's barrier: both packs are complete)
#pragma omp for collapse(2) schedule(static)
    for (int64_t jb = 0; jb < col_blocks; ++jb)
      for (int64_t ib = 0; ib < row_blocks; ++ib) {
        const int64_t j_end = std::min(n, (jb + 1) * kNc), i_end = std::min(m, (ib + 1) * kMc);
        for (int64_t p0 = 0; p0 < kp; p0 += kPairsPerBlock) {
          const int64_t pairs = std::min(kPairsPerBlock, kp - p0);
          for (int64_t j = jb * kNc; j < j_end; j += kNr) {
            const int32_t* bj = b_pack + (j / kNr) * kNr * kp + p0 * kNr;
            const int cols = static_cast<int>(std::min<int64_t>(kNr, j_end - j));
            for (int64_t i = ib * kMc; i < i_end; i += kMr) {
              const int32_t* ai = a_pack + (i / kMr) * kMr * kp + p0 * kMr;
              const int rows = static_cast<int>(std::min<int64_t>(kMr, i_end - i));
              micro_tile(ai, bj, pairs, c + i * n + j, n, rows, cols, p0 > 0);
            }
          }
        }
      }
  }
}

}  // namespace mantissa::kernels::quant
