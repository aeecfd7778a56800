// The block recipe's 128x1 tiles of bfloat16 cast to E4M3 on AVX-512 (fp8_block.h,
// detail::column_tiles_bf16_e4m3_avx512, the column walk of fp8_block_columns.h over this file's
// lanes): a band of rows cast in x's layout, 32 columns a vector. Each column's largest magnitude
// bits are an elementwise maximum over the band's rows (vpmaxuw; a NaN's lie above infinity's),
// read in memory order; the columns' scales come 16 at a time in float32 lanes (block_scale, f32(1
// / f64(scale)) and amax * scale in double lanes); then the codes row by row from cache in 16-bit
// lanes under per-column constants (the AVX2 body's fast codes: |h| less a rebias with unsigned
// saturation, rounded to nearest even on the 4 dropped bits by one vpavgw), 32 to bytes by one
// vpmovwb. 32 columns holding a NaN or an inf, under a scale that is not a power of 2 or lies at
// or above 2^120, or a row's 32 values among which a nonzero one's code lies below 8 (subnormal
// or flushed), take the float32 lanes of the AVX2 body
// (column_codes32_bf16_f32_lanes), which give the scalar cast's codes and counts. The same amax,
// scale, codes and counts as quantize_128x1 at the scalar level. (float32 takes the AVX2 body at
// this level too: its integer codes in 256-bit lanes cost fewer operations than in 512-bit ones,
// which Zen 4 splits in two.)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// (GCC 12 reports the AVX-512 intrinsics' _mm512_undefined_* operands as uninitialized.)
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_block_scales_avx2.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/float8.h"

// The column walk takes this file's target (fp8_block_columns.h).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")
#include "kernels/cpu/fp8/fp8_block_columns.h"

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

// The column walk's lanes (fp8_block_columns.h) for bfloat16 on AVX-512: 32 columns a vector;
// the fast codes are codes16_pow2_in_range's arithmetic (|h| less the column's rebias with
// unsigned saturation, rounded to nearest even on the 4 dropped bits), 32 to bytes by one
// vpmovwb; the float32 lanes are the AVX2 body's (column_codes32_bf16_f32_lanes).
struct Bf16Avx512 {
  using Src = uint16_t;
  using Bits = uint16_t;
  using Rebias = uint16_t;
  static constexpr Bits kAbs = 0x7FFF, kInfBits = 0x7F80;
  static constexpr int64_t kVec = 32;
  struct Acc {
    __m512 amax;
    __m512d top;
  };
  // Only the counts are kept.
  using Counts = BlockCastStats;

  static float amax_of(Bits bits) { return bf16_bits_to_float(bits); }
  using Vec = __m512i;
  [[gnu::always_inline]] static Vec magnitude(const uint16_t* p) {
    return _mm512_and_si512(_mm512_loadu_si512(p), _mm512_set1_epi16(kAbs));
  }
  [[gnu::always_inline]] static Vec max(Vec a, Vec b) { return _mm512_max_epu16(a, b); }
  [[gnu::always_inline]] static void max_into(uint16_t* top, Vec m) {
    _mm512_store_si512(top, _mm512_max_epu16(_mm512_load_si512(top), m));
  }
  // The scales 16 at a time (block_scales16). A column's rebias is ((120 - e) << 7) - 6 where
  // the fast codes apply and e < 120, else 0xFFFF, which makes every nonzero value of the column
  // take the float32 lanes (codes32).
  [[gnu::always_inline]] static void scales32(const uint16_t* top, float for_inf, bool power_2,
                                              float epsilon, float* scale_of, float* inv,
                                              uint16_t* rebias, Acc& acc, uint32_t& nan) {
    const __m512i t = _mm512_load_si512(top);
    const __mmask32 nan_lanes = _mm512_cmpgt_epu16_mask(t, _mm512_set1_epi16(kInfBits));
    __m512i rb[2];
    for (int h = 0; h < 2; ++h) {
      const __m512i b32 = _mm512_cvtepu16_epi32(half_of(t, h));
      const __m512 amax = _mm512_castsi512_ps(_mm512_slli_epi32(b32, 16));
      __mmask16 fast;
      const __m512i e =
          block_scales16(amax, static_cast<__mmask16>(nan_lanes >> (16 * h)), for_inf, power_2,
                         epsilon, scale_of + 16 * h, inv + 16 * h, acc.amax, acc.top, fast);
      fast &= _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(120));
      const __m512i r = _mm512_sub_epi32(
          _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(120), e), 7), _mm512_set1_epi32(6));
      rb[h] = _mm512_mask_mov_epi32(_mm512_set1_epi32(0xFFFF), fast, r);
    }
    _mm512_store_si512(rebias,
                       _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(rb[0])),
                                          _mm512_cvtepi32_epi16(rb[1]), 1));
    nan = nan_lanes;
  }
  // The AVX2 body's codes (Bf16Avx2::codes32: y = |h| less the column's rebias with unsigned
  // saturation, avg(y, bit 4 of |h|) >> 3), 32 to bytes by one vpmovwb; a step takes the float32
  // lanes where a nonzero |h| has a code below 8 (avg below 64).
  template <bool kStream>
  [[gnu::always_inline]] static bool codes32(const uint16_t* p, const uint16_t* rebias,
                                             uint8_t* d) {
    const __m512i h = _mm512_loadu_si512(p);
    const __m512i a = _mm512_and_si512(h, _mm512_set1_epi16(kAbs));
    const __m512i y = _mm512_subs_epu16(a, _mm512_load_si512(rebias));
    const __m512i r =
        _mm512_avg_epu16(y, _mm512_and_si512(_mm512_srli_epi16(a, 4), _mm512_set1_epi16(1)));
    const __mmask32 low =
        _mm512_mask_cmplt_epu16_mask(_mm512_test_epi16_mask(a, a), r, _mm512_set1_epi16(64));
    // (r >> 3) | ((h >> 8) & 0x80)
    const __m512i code = _mm512_ternarylogic_epi32(_mm512_srli_epi16(r, 3), _mm512_srli_epi16(h, 8),
                                                   _mm512_set1_epi16(0x80), 0xF8);
    columns::put32<kStream>(d, _mm512_cvtepi16_epi8(code));
    return low == 0;
  }
  static void codes32_f32(const uint16_t* p, const float* scale_of, uint8_t* d,
                          BlockCastStats& counts) {
    column_codes32_bf16_f32_lanes(p, scale_of, d, counts);
  }
  static void finish(const Acc& acc, const BlockCastStats& counts, float amax_max, double top_max,
                     BlockCastStats& st) {
    alignas(64) float amaxes[16];
    alignas(64) double tops[8];
    _mm512_store_ps(amaxes, acc.amax);
    _mm512_store_pd(tops, acc.top);
    for (const float a : amaxes) amax_max = std::max(amax_max, a);
    for (const double t : tops) top_max = std::max(top_max, t);
    st.amax = amax_max;
    st.peak = std::max(st.peak, top_max / kE4m3Max);
    st.saturated += counts.saturated;
    st.flushed += counts.flushed;
  }
};

}  // namespace

void column_tiles_bf16_e4m3_avx512(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols,
                                   uint8_t* dst, int64_t ldd, float* scale_inv, float for_inf,
                                   bool power_2, float epsilon, const uint16_t* next,
                                   int64_t next_bytes, bool stream, BlockCastStats& st) {
  columns::column_tiles<Bf16Avx512>(src, ld, rows, cols, dst, ldd, scale_inv, for_inf, power_2,
                                    epsilon, next, next_bytes, stream, st);
}

}  // namespace mantissa::kernels::fp8::detail

#pragma GCC pop_options
