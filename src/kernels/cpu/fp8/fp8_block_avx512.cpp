// The block recipe's x^T tiles of bfloat16 cast to E4M3 on AVX-512 (fp8_block.h,
// detail::block_columns_bf16_e4m3_avx512): a band of 128 rows of x cast as 1x128 tiles of its
// columns, 32 columns a vector. A chunk of 64 columns (one 128-byte run of each row) is copied
// into a contiguous buffer as each column's largest magnitude bits (vpmaxuw; a NaN's lie above
// infinity's) and smallest nonzero magnitude are taken; then for each 32 columns their 32 scales
// at once in float32 lanes (block_scale, f32(1 / f64(scale)) and amax * scale in double lanes),
// and their codes row by row in 16-bit lanes under per-column constants (codes16_pow2_in_range's
// arithmetic: |h| less a rebias with unsigned saturation, rounded to nearest even on the dropped
// bits), four rows' codes packed to bytes and spread over the four 128-bit lanes, and 16 x 16
// byte transposes in each lane, which leave each column's 64 codes of 64 rows in one vector: a
// cache line of x^T, streamed out. A column holding a NaN or an inf, under a scale that is not a
// power of 2 or lies above 2^120, or holding a value whose code is subnormal or flushed is cast
// from a copy of its tile by the row tiles' body (block_tiles_bf16_e4m3_avx2), which gives the
// same codes, scale and counts as the scalar cast. The same amax, scale, codes and counts as
// quantize_1x128 of x^T.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// (GCC 12 reports the AVX-512 intrinsics' _mm512_undefined_* operands as uninitialized.)
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/common/byte_transpose_avx512.h"
#include "kernels/cpu/fp8/fp8_block.h"
#include "mantissa/core/float8.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace mantissa::kernels::fp8::detail {
namespace {

constexpr float kE4m3Max = Float8E4M3::kMax;
// Columns taken at a time: 128 bytes of each of the band's 128 rows, a 16 KiB copy in L1.
constexpr int64_t kChunk = 64;
// The rows' bytes this many chunks ahead are fetched into L2 as a chunk is copied.
constexpr int64_t kAhead = 8;

// The low (h = 0) or high 256 bits of v.
MANTISSA_AVX512 inline __m256i half_of(__m512i v, int h) {
  return h ? _mm512_extracti64x4_epi64(v, 1) : _mm512_castsi512_si256(v);
}

// The scales of 16 columns from their amax (a NaN's lanes, `nan`, give nothing the caller keeps:
// that column is cast again by the tile body): block_scale's scale, f32(1 / f64(scale)) into inv,
// amax into amax_acc and amax * scale (in double; an inf's product measures nothing) into top_acc
// as maxima over the lanes without a NaN. Returns the lanes' exponents e of scale = 2^e and, in
// `fast`, the lanes the integer codes take: scale a normal 2^e with e <= 120, amax * scale at most
// E4M3's largest value, no NaN.
MANTISSA_AVX512 inline __m512i block_scales16(__m512 amax, __mmask16 nan, float for_inf,
                                              bool power_2, float epsilon, float* inv,
                                              __m512& amax_acc, __m512d& top_acc, __mmask16& fast) {
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  const __m512 eps = _mm512_set1_ps(epsilon);
  // block_scale, lane by lane (a NaN amax fails the comparison and is caught as special).
  const __m512 a = _mm512_mask_mov_ps(amax, _mm512_cmp_ps_mask(amax, eps, _CMP_LT_OQ), eps);
  const __mmask16 special = _mm512_cmp_ps_mask(a, inf, _CMP_EQ_OQ) |
                            _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_EQ_OQ) |
                            _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  __m512 scale = _mm512_div_ps(_mm512_set1_ps(kE4m3Max), a);
  scale = _mm512_mask_mov_ps(scale, _mm512_cmp_ps_mask(scale, inf, _CMP_EQ_OQ),
                             _mm512_set1_ps(for_inf));
  __m512i sb = _mm512_castps_si512(scale);
  if (power_2) sb = _mm512_and_si512(sb, _mm512_set1_epi32(static_cast<int>(0xFF800000u)));
  sb = _mm512_mask_mov_epi32(sb, special, _mm512_castps_si512(_mm512_set1_ps(1.0f)));
  scale = _mm512_castsi512_ps(sb);
// f32(1 / f64(scale)) and amax * scale in double, eight lanes at a time.
#pragma GCC unroll 16
  for (int q = 0; q < 2; ++q) {
    const __m256 s8 = _mm256_castsi256_ps(half_of(sb, q));
    const __m256 a8 = _mm256_castsi256_ps(half_of(_mm512_castps_si512(amax), q));
    const __m512d sd = _mm512_cvtps_pd(s8);
    _mm256_storeu_ps(inv + 8 * q, _mm512_cvtpd_ps(_mm512_div_pd(_mm512_set1_pd(1.0), sd)));
    // A NaN's or an inf's product fails the comparison.
    const __m512d t = _mm512_mul_pd(_mm512_cvtps_pd(a8), sd);
    const __mmask8 finite =
        _mm512_cmp_pd_mask(t, _mm512_set1_pd(std::numeric_limits<double>::max()), _CMP_LE_OQ);
    top_acc = _mm512_mask_max_pd(top_acc, finite, top_acc, t);
  }
  // max_ps returns its second operand where the first is NaN.
  amax_acc = _mm512_max_ps(amax, amax_acc);
  const __m512i field = _mm512_srli_epi32(sb, 23);
  const __m512i e = _mm512_sub_epi32(field, _mm512_set1_epi32(127));
  fast = _mm512_testn_epi32_mask(sb, _mm512_set1_epi32(0x007FFFFF)) &
         _mm512_cmpgt_epi32_mask(field, _mm512_setzero_si512()) &
         _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(121), e) &
         _mm512_cmp_ps_mask(_mm512_mul_ps(amax, scale), _mm512_set1_ps(kE4m3Max), _CMP_LE_OQ) &
         static_cast<__mmask16>(~nan);
  return e;
}

// 32 lanes of 16 bits from two vectors of 16 32-bit lanes each below 2^15.
MANTISSA_AVX512 inline __m512i words_of(__m512i lo, __m512i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(lo)),
                            _mm512_cvtepi32_epi16(hi), 1);
}

// The E4M3 codes (sign included) of 32 bfloat16 values h under per-lane power-of-2 scales within
// range (codes16_pow2_in_range): rebias, (120 - e) << 7, subtracted from |h| with unsigned
// saturation, rounded to nearest even on the 4 dropped bits. Right for every lane whose product
// is a normal E4M3 value or zero.
MANTISSA_AVX512 inline __m512i codes32(__m512i h, __m512i rebias) {
  const __m512i y = _mm512_subs_epu16(_mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)), rebias);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(y, 4), _mm512_set1_epi16(1));
  const __m512i r = _mm512_add_epi16(_mm512_add_epi16(y, _mm512_set1_epi16(7)), lsb);
  // (r >> 4) | ((h >> 8) & 0x80)
  return _mm512_ternarylogic_epi32(_mm512_srli_epi16(r, 4), _mm512_srli_epi16(h, 8),
                                   _mm512_set1_epi16(0x80), 0xF8);
}

// A chunk's G groups of 32 columns over the band's 128 rows from p (ld elements apart; group 1
// holds `mask1`'s columns, group 0 `mask0`'s): group g's rows copied to tile[g] (row k at
// tile[g] + 32 k; the rows themselves, often a multiple of 4 KiB apart, would fall in one L1 set),
// each column's largest magnitude bits (a NaN's above 0x7F80) into top[g] and its smallest
// magnitude less 1 (0 wraps to 0xFFFF) into low[g].
template <int G>
MANTISSA_AVX512 inline void copy_chunk(const uint16_t* p, int64_t ld, __mmask32 mask0,
                                       __mmask32 mask1, uint16_t (*tile)[kBlockLen * 32],
                                       __m512i* top, __m512i* low) {
  const __m512i abs = _mm512_set1_epi16(0x7FFF), one = _mm512_set1_epi16(1);
  __m512i m[G], l[G];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) {
    m[g] = _mm512_setzero_si512();
    l[g] = _mm512_set1_epi16(-1);
  }
  for (int64_t k = 0; k < kBlockLen; ++k) {
    const uint16_t* row = p + k * ld;
    _mm_prefetch(reinterpret_cast<const char*>(row + kAhead * kChunk), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(row + kAhead * kChunk + 32), _MM_HINT_T1);
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const __m512i h = _mm512_maskz_loadu_epi16(g ? mask1 : mask0, row + 32 * g);
      _mm512_store_si512(tile[g] + 32 * k, h);
      const __m512i a = _mm512_and_si512(h, abs);
      m[g] = _mm512_max_epu16(m[g], a);
      l[g] = _mm512_min_epu16(l[g], _mm512_sub_epi16(a, one));
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) {
    top[g] = m[g];
    low[g] = l[g];
  }
}

}  // namespace

MANTISSA_AVX512 void block_columns_bf16_e4m3_avx512(const uint16_t* src, int64_t ld, int64_t cols,
                                                    uint8_t* dst, int64_t dst_step,
                                                    float* scale_inv, int64_t inv_step,
                                                    float for_inf, bool power_2, float epsilon,
                                                    BlockCastStats& st) {
  // Each column's codes of 64 rows are one vector: streamed past the caches (they are not read
  // back here) where every column's codes start on a 64-byte boundary.
  const bool stream = reinterpret_cast<uintptr_t>(dst) % 64 == 0 && dst_step % 64 == 0;
  alignas(64) uint16_t tile[2][kBlockLen * 32];
  alignas(64) uint8_t high[16][64];  // the codes of columns 16-31 of 64 rows, before transposing
  alignas(64) float inv[32];
  alignas(64) uint16_t column[kBlockLen];
  __m512 amax_acc = _mm512_setzero_ps();
  __m512d top_acc = _mm512_setzero_pd();
  // The qwords of packus(row k, row k + 16) and packus(row k + 32, row k + 48) that hold
  // columns 0-15 (low) and 16-31 (high) of the four rows, one row per 128-bit lane.
  const __m512i take_low = _mm512_setr_epi64(0, 2, 1, 3, 8, 10, 9, 11);
  const __m512i take_high = _mm512_setr_epi64(4, 6, 5, 7, 12, 14, 13, 15);
  for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
    const int64_t width = std::min(kChunk, cols - c0);  // 16, 32, 48 or 64
    const auto lanes = [](int64_t n) {
      return n >= 32 ? ~__mmask32{0} : n >= 16 ? __mmask32{0xFFFF} : __mmask32{0};
    };
    const __mmask32 mask0 = lanes(width), mask1 = lanes(width - 32);
    __m512i top[2], low[2];
    if (width > 32)
      copy_chunk<2>(src + c0, ld, mask0, mask1, tile, top, low);
    else
      copy_chunk<1>(src + c0, ld, mask0, mask1, tile, top, low);
    for (int g = 0; g < (width > 32 ? 2 : 1); ++g) {
      const int64_t c = c0 + 32 * g;
      const int n = static_cast<int>(std::min<int64_t>(32, width - 32 * g));  // 16 or 32
      const uint16_t* t = tile[g];
      // The 32 columns' scales and codes16_pow2_in_range's constants.
      const __mmask32 nan = _mm512_cmpgt_epu16_mask(top[g], _mm512_set1_epi16(0x7F80));
      __m512i e[2];
      __mmask16 fast[2];
#pragma GCC unroll 16
      for (int h = 0; h < 2; ++h) {
        const __m512i b32 = _mm512_cvtepu16_epi32(half_of(top[g], h));
        const __m512 amax = _mm512_castsi512_ps(_mm512_slli_epi32(b32, 16));
        e[h] = block_scales16(amax, static_cast<__mmask16>(nan >> (16 * h)), for_inf, power_2,
                              epsilon, inv + 16 * h, amax_acc, top_acc, fast[h]);
      }
      const __m512i rebias =
          words_of(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(120), e[0]), 7),
                   _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(120), e[1]), 7));
      // Columns with a value whose code is subnormal or flushed: 0 < |h| < (121 - e) << 7, that
      // is low < ((121 - e) << 7) - 1, the lanes of a fast column.
      const __m512i normal_less_1 =
          _mm512_sub_epi16(_mm512_add_epi16(rebias, _mm512_set1_epi16(128)), _mm512_set1_epi16(1));
      const __mmask32 fast32 =
          static_cast<__mmask32>(fast[0]) | (static_cast<__mmask32>(fast[1]) << 16);
      const __mmask32 in = n == 32 ? ~__mmask32{0} : __mmask32{0xFFFF};
      const __mmask32 fallback = (~fast32 | _mm512_cmplt_epu16_mask(low[g], normal_less_1)) & in;
      for (int j = 0; j < n; ++j) scale_inv[(c + j) * inv_step] = inv[j];
#pragma GCC unroll 16
      for (int sub = 0; sub < 2; ++sub) {
        // Rows 64 sub + k + 16 L (lane L), columns 0-15, then 16-31.
        __m512i x[16];
        const uint16_t* q = t + 32 * 64 * sub;
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) {
          const __m512i r0 = codes32(_mm512_load_si512(q + 32 * k), rebias);
          const __m512i r1 = codes32(_mm512_load_si512(q + 32 * (k + 16)), rebias);
          const __m512i r2 = codes32(_mm512_load_si512(q + 32 * (k + 32)), rebias);
          const __m512i r3 = codes32(_mm512_load_si512(q + 32 * (k + 48)), rebias);
          const __m512i p01 = _mm512_packus_epi16(r0, r1), p23 = _mm512_packus_epi16(r2, r3);
          x[k] = _mm512_permutex2var_epi64(p01, take_low, p23);
          if (n == 32) _mm512_store_si512(high[k], _mm512_permutex2var_epi64(p01, take_high, p23));
        }
        for (int half = 0; half < n / 16; ++half) {
          if (half == 1)
#pragma GCC unroll 16
            for (int k = 0; k < 16; ++k) x[k] = _mm512_load_si512(high[k]);
          transpose16x16_bytes(x);
#pragma GCC unroll 16
          for (int j = 0; j < 16; ++j) {
            const int col = 16 * half + j;
            if ((fallback >> col) & 1u) continue;
            uint8_t* d = dst + (c + col) * dst_step + 64 * sub;
            if (stream)
              _mm512_stream_si512(reinterpret_cast<__m512i*>(d), x[j]);
            else
              _mm512_storeu_si512(d, x[j]);
          }
        }
      }
      // The columns outside the integer codes, from a copy of their tile.
      for (__mmask32 f = fallback; f; f &= f - 1) {
        const int j = __builtin_ctz(f);
        for (int k = 0; k < kBlockLen; ++k) column[k] = t[32 * k + j];
        block_tiles_bf16_e4m3_avx2(column, kBlockLen, 1, dst + (c + j) * dst_step, kBlockLen,
                                   scale_inv + (c + j) * inv_step, 1, for_inf, power_2, epsilon,
                                   st);
      }
    }
  }
  if (stream) _mm_sfence();
  alignas(64) float amaxes[16];
  alignas(64) double tops[8];
  _mm512_store_ps(amaxes, amax_acc);
  _mm512_store_pd(tops, top_acc);
  float amax_max = st.amax;
  double top_max = 0.0;
  for (const float a : amaxes) amax_max = std::max(amax_max, a);
  for (const double t : tops) top_max = std::max(top_max, t);
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / kE4m3Max);
}

}  // namespace mantissa::kernels::fp8::detail
