// The block recipe's 128x1 tiles of bfloat16 cast to E4M3 on AVX-512 (fp8_block.h,
// detail::column_tiles_bf16_e4m3_avx512): a band of rows cast in x's layout, 32 columns a
// vector. Each column's largest magnitude bits are an elementwise maximum over the band's rows
// (vpmaxuw; a NaN's lie above infinity's), read in memory order; the columns' scales come 16 at
// a time in float32 lanes (block_scale, f32(1 / f64(scale)) and amax * scale in double lanes);
// then the codes row by row from cache in 16-bit lanes under per-column constants
// (codes16_pow2_in_range's arithmetic: |h| less a rebias with unsigned saturation, rounded to
// nearest even on the 4 dropped bits), 32 to bytes by one vpmovwb. 32 columns holding a NaN or
// an inf, under a scale that is not a power of 2 or lies above 2^120, or a row's 32 values among
// which one's code is subnormal or flushed (an unsigned compare against the columns'
// normal_from), take the float32 lanes of the AVX2 body (column_codes32_bf16_f32_lanes), which
// give the scalar cast's codes and counts. The same amax, scale, codes and counts as
// quantize_128x1 at the scalar level.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// (GCC 12 reports the AVX-512 intrinsics' _mm512_undefined_* operands as uninitialized.)
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fp8/fp8_block.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/float8.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace mantissa::kernels::fp8::detail {
namespace {

constexpr float kE4m3Max = Float8E4M3::kMax;

// The low (h = 0) or high 256 bits of v.
MANTISSA_AVX512 inline __m256i half_of(__m512i v, int h) {
  return h ? _mm512_extracti64x4_epi64(v, 1) : _mm512_castsi512_si256(v);
}

// The scales of 16 columns from their amax (a NaN's lanes, `nan`, give nothing the caller keeps:
// that column's amax is found again): block_scale's scale into scale_of, f32(1 / f64(scale)) into
// inv, amax into amax_acc and amax * scale (in double; an inf's product measures nothing) into
// top_acc as maxima over the lanes without a NaN. Returns the lanes' exponents e of scale = 2^e
// and, in `fast`, the lanes the integer codes take: scale a normal 2^e with e <= 120, amax *
// scale at most E4M3's largest value, no NaN.
MANTISSA_AVX512 inline __m512i block_scales16(__m512 amax, __mmask16 nan, float for_inf,
                                              bool power_2, float epsilon, float* scale_of,
                                              float* inv, __m512& amax_acc, __m512d& top_acc,
                                              __mmask16& fast) {
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
  _mm512_storeu_ps(scale_of, scale);
  // f32(1 / f64(scale)) and amax * scale in double, eight lanes at a time.
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

// The codes of 32 bfloat16 values at p (32 readable) into d (32 bytes) in 16-bit lanes under the
// columns' rebias. Returns false where the columns do not take the 16-bit lanes (slow) or a
// value's code is subnormal or flushed (0 < |h| < normal_from = rebias + 128): the caller makes
// those 32 codes again through the float32 lanes.
MANTISSA_AVX512 inline bool column_codes32(const uint16_t* p, bool slow, const uint16_t* rebias,
                                           uint8_t* d) {
  const __m512i h = _mm512_loadu_si512(p);
  const __m512i rb = _mm512_load_si512(rebias);
  const __m512i a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
  // |h| - 1 below normal_from - 1 = rebias + 127 (0 wraps to 0xFFFF).
  const __mmask32 below = _mm512_cmplt_epu16_mask(_mm512_sub_epi16(a, _mm512_set1_epi16(1)),
                                                  _mm512_add_epi16(rb, _mm512_set1_epi16(127)));
  const __m512i y = _mm512_subs_epu16(a, rb);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(y, 4), _mm512_set1_epi16(1));
  const __m512i r = _mm512_add_epi16(_mm512_add_epi16(y, _mm512_set1_epi16(7)), lsb);
  // (r >> 4) | ((h >> 8) & 0x80)
  const __m512i code = _mm512_ternarylogic_epi32(_mm512_srli_epi16(r, 4), _mm512_srli_epi16(h, 8),
                                                 _mm512_set1_epi16(0x80), 0xF8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm512_cvtepi16_epi8(code));
  return below == 0 && !slow;
}

}  // namespace

MANTISSA_AVX512 void column_tiles_bf16_e4m3_avx512(const uint16_t* src, int64_t ld, int64_t rows,
                                                   int64_t cols, uint8_t* dst, int64_t ldd,
                                                   float* scale_inv, float for_inf, bool power_2,
                                                   float epsilon, const uint16_t* next,
                                                   int64_t next_bytes, BlockCastStats& st) {
  // Columns past the last multiple of 32 (`tail` of them) are read with masked loads, and their
  // codes made through a row buffer padded with zeros (whose code is 0 under scale 1: nothing
  // counted or measured).
  constexpr int64_t kMaxCols = kBlockGroupBytes / 2 + 32;
  const int64_t full = cols / 32 * 32, tail = cols - full, padded = full + (tail ? 32 : 0);
  const __mmask32 tail_mask = (__mmask32{1} << tail) - 1;
  const __m512i abs = _mm512_set1_epi16(0x7FFF);
  // Each column's largest magnitude bits (a NaN's above 0x7F80): an elementwise maximum over
  // the rows, read in memory order, two rows at a time.
  alignas(64) uint16_t top_buffer[kMaxCols + 2048];
  uint16_t* top = half_a_page_from(top_buffer, src);
  for (int64_t c = 0; c < padded; c += 32) _mm512_store_si512(top + c, _mm512_setzero_si512());
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    const uint16_t* p = src + r * ld;
    for (int64_t c = 0; c < full; c += 32) {
      const __m512i m = _mm512_max_epu16(_mm512_and_si512(_mm512_loadu_si512(p + c), abs),
                                         _mm512_and_si512(_mm512_loadu_si512(p + ld + c), abs));
      _mm512_store_si512(top + c, _mm512_max_epu16(_mm512_load_si512(top + c), m));
    }
  }
  for (; r < rows; ++r)
    for (int64_t c = 0; c < full; c += 32)
      _mm512_store_si512(
          top + c, _mm512_max_epu16(_mm512_load_si512(top + c),
                                    _mm512_and_si512(_mm512_loadu_si512(src + r * ld + c), abs)));
  if (tail)
    for (r = 0; r < rows; ++r)
      _mm512_store_si512(
          top + full,
          _mm512_max_epu16(
              _mm512_load_si512(top + full),
              _mm512_and_si512(_mm512_maskz_loadu_epi16(tail_mask, src + r * ld + full), abs)));
  // The columns' scales 16 at a time, codes16_pow2_in_range's rebias for each, and for each 32
  // columns whether all of them take the 16-bit lanes. A column holding a NaN has its amax found
  // again, each NaN passed over, by a walk down the column.
  alignas(64) uint16_t rebias[kMaxCols];
  alignas(64) float scale_of[kMaxCols];
  alignas(64) float inv[kMaxCols];
  bool slow[kMaxCols / 32];
  __m512 amax_acc = _mm512_setzero_ps();
  __m512d top_acc = _mm512_setzero_pd();
  float amax_max = st.amax;
  double top_max = 0.0;
  for (int64_t c = 0; c < padded; c += 32) {
    const __m512i t = _mm512_load_si512(top + c);
    const __mmask32 nan = _mm512_cmpgt_epu16_mask(t, _mm512_set1_epi16(0x7F80));
    __m512i rb[2];
    __mmask16 fast[2];
    for (int h = 0; h < 2; ++h) {
      const __m512i b32 = _mm512_cvtepu16_epi32(half_of(t, h));
      const __m512 amax = _mm512_castsi512_ps(_mm512_slli_epi32(b32, 16));
      const __m512i e =
          block_scales16(amax, static_cast<__mmask16>(nan >> (16 * h)), for_inf, power_2, epsilon,
                         scale_of + c + 16 * h, inv + c + 16 * h, amax_acc, top_acc, fast[h]);
      rb[h] = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(120), e), 7);
    }
    // (The lanes of a column outside the 16-bit lanes may hold any value: their step is slow.)
    _mm512_store_si512(rebias + c,
                       _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(rb[0])),
                                          _mm512_cvtepi32_epi16(rb[1]), 1));
    for (__mmask32 n = nan; n; n &= n - 1) {
      const int64_t j = c + __builtin_ctz(n);
      uint16_t bits = 0;
      for (int64_t k = 0; k < rows; ++k) {
        const auto a = static_cast<uint16_t>(src[k * ld + j] & 0x7FFF);
        if (a <= 0x7F80) bits = std::max(bits, a);
      }
      const float amax = bf16_bits_to_float(bits);
      const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
      scale_of[j] = scale;
      inv[j] = block_scale_inverse(scale);
      amax_max = std::max(amax_max, amax);
      const double top_of = static_cast<double>(amax) * scale;
      if (top_of <= std::numeric_limits<double>::max()) top_max = std::max(top_max, top_of);
    }
    slow[c / 32] = (fast[0] & fast[1]) != 0xFFFF;
  }
  std::copy_n(inv, cols, scale_inv);
  // The codes row by row, 32 columns a step, while the rows are in cache. The next band's or
  // group's rows are fetched into L2 meanwhile, at the pace of the codes (a demand load every
  // 4 KiB of a row first, as the group casts do).
  const int64_t ahead = next != nullptr ? next_bytes : 0;
  alignas(64) uint16_t rest[32] = {};
  alignas(32) uint8_t rest_codes[32];
  // The steps of a row the float32 lanes make again, after the row (a call in the loop would keep
  // its constants out of registers).
  int32_t again[kMaxCols / 32];
  for (r = 0; r < rows; ++r) {
    const uint16_t* p = src + r * ld;
    uint8_t* d = dst + r * ldd;
    const auto* line = reinterpret_cast<const char*>(next + r * ld);
    for (int64_t b = 0; b < ahead; b += 4096)
      (void)*reinterpret_cast<const volatile char*>(line + b);
    int n = 0;
    for (int64_t c = 0; c < full; c += 32) {
      if (2 * c < ahead) _mm_prefetch(line + 2 * c, _MM_HINT_T1);
      again[n] = static_cast<int32_t>(c);
      n += column_codes32(p + c, slow[c / 32], rebias + c, d + c) ? 0 : 1;
    }
    for (int i = 0; i < n; ++i)
      column_codes32_bf16_f32_lanes(p + again[i], scale_of + again[i], d + again[i], st);
    if (tail) {
      _mm512_store_si512(rest, _mm512_maskz_loadu_epi16(tail_mask, p + full));
      if (!column_codes32(rest, slow[full / 32], rebias + full, rest_codes))
        column_codes32_bf16_f32_lanes(rest, scale_of + full, rest_codes, st);
      std::copy_n(rest_codes, tail, d + full);
    }
  }
  alignas(64) float amaxes[16];
  alignas(64) double tops[8];
  _mm512_store_ps(amaxes, amax_acc);
  _mm512_store_pd(tops, top_acc);
  for (const float a : amaxes) amax_max = std::max(amax_max, a);
  for (const double t : tops) top_max = std::max(top_max, t);
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / kE4m3Max);
}

}  // namespace mantissa::kernels::fp8::detail
