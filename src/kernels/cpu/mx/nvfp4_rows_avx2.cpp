// AVX2 (+FMA, F16C) bodies of the NVFP4 row casts and of MXFP4 with stochastic rounding, 8 lanes
// at a time: one NVFP4 block is two vectors. The per-tensor amax pass; the cast of a row's 1x16
// blocks (8 blocks' amax, E4M3 scales and factors as one vector, then each block's codes, rounded
// to nearest or stochastically, with the statistics counted from the vectors when asked; a
// bfloat16 source rounded to nearest by 16-bit compares against per-scale thresholds, 16 blocks'
// scale codes at once by 16-bit compares of the amax's bits against per-tensor-scale thresholds),
// which casts the 16x16 tiles' rows too from the tiles' amax (nvfp4_tiles.cpp); the decode.
// Blocks whose factor is NaN or infinite, and a row's short last block, run the scalar body
// (mx_cast.cpp).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"
#include "kernels/cpu/mx/nvfp4_lanes_avx2.h"
#include "kernels/cpu/mx/nvfp4_scale_codes.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;
using namespace nvfp4_avx2;

// The E4M3 scale codes of 8 blocks' amax bits (numbers >= 0, t.ok) by t's compares
// (nvfp4_scale_codes.h): 9 + 8 octaves + the steps the low 23 bits reach, clamped to 8..126.
inline __m256i scale_codes8(const Nvfp4ScaleCodeThresholds& t, __m256i bits) {
  const __m256i d = _mm256_sub_epi32(bits, _mm256_set1_epi32(t.base));
  __m256i c =
      _mm256_add_epi32(_mm256_slli_epi32(_mm256_srai_epi32(d, 23), 3), _mm256_set1_epi32(9));
  const __m256i low = _mm256_and_si256(d, _mm256_set1_epi32(0x7FFFFF));
#pragma GCC unroll 7
  for (int j = 0; j < 7; ++j)
    c = _mm256_sub_epi32(c, _mm256_cmpgt_epi32(low, _mm256_set1_epi32(t.step[j])));
  return _mm256_min_epi32(_mm256_max_epi32(c, _mm256_set1_epi32(8)), _mm256_set1_epi32(126));
}

// Whether 8 amax (as bits) are all numbers >= 0, which scale_codes8 takes (a NaN's or a
// negative's sign bit is set in `unusual`).
inline bool scale_codes8_serve(const Nvfp4ScaleCodeThresholds& t, __m256i bits) {
  const __m256i unusual =
      _mm256_or_si256(bits, _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(0x7F800000)));
  return t.ok && _mm256_testz_si256(unusual, _mm256_set1_epi32(INT32_MIN));
}

// The factors of 8 scale codes (8..126) by t's table (t.factors_ok): nvfp4_block_scale's
// (1 / tensor scale) / value(code) without the division.
inline __m256 scale_factors8(const Nvfp4ScaleCodeThresholds& t, __m256i code) {
  const __m256i top = _mm256_permutevar8x32_epi32(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.factor_top)), code);
  return _mm256_castsi256_ps(
      _mm256_sub_epi32(top, _mm256_slli_epi32(_mm256_srli_epi32(code, 3), 23)));
}

// Round to nearest of a bfloat16 source by compares of the magnitude bits. The factor of an
// E4M3 scale code c is f = (1 / tensor scale) / value(c), so under one tensor scale a block's
// codes are a function of c and of |x|'s 15 bits: e2m1_code(|x| * f) (the float32 product, as the
// scalar body rounds it) never falls as |x| grows, so the code is the number of thresholds
// T1 <= .. <= T7 that |x|'s bits reach, T_i the least bits whose code is i or more, and
// |x * f| > 6 (the saturated count) holds from a threshold T8 on. Each row holds T_i - 1 in 16
// lanes, the right side of a signed 16-bit compare (T_i is 1 to 0x7F80: 0 gives code 0, infinity
// code 7). The rows are made per thread as the cast meets the codes, for one tensor scale at a
// time; a code whose factor is 0, infinite or NaN gets no row (its group takes the float path).
struct Bf16Thresholds {
  alignas(32) int16_t row[128][8][16];
  float inverse_scale = 1.0f;  // 1 / tensor scale, as nvfp4_block_scale rounds it
  uint32_t tensor_scale_bits = 0;
  int lo = 1, hi = 0;  // rows lo..hi are made (none when lo > hi)

  // The least m in [0, 0x7F80] for which reached(m) holds, from a guess near it.
  template <class Reached>
  static int least(Reached reached, float guess) {
    int m = static_cast<int>(std::min<uint32_t>(bits_of(guess) >> 16, 0x7F80u));
    while (m > 0 && reached(m - 1)) --m;
    while (!reached(m)) ++m;
    return m;
  }

  bool make(int c, float tensor_scale) {
    const float f = (1.0f / tensor_scale) / e4m3_value(static_cast<uint8_t>(c));
    if (!(f > 0.0f && f < std::numeric_limits<float>::infinity())) return false;
    // The code steps up at y = 0.25, 0.75, .., 5 (ties to even decide which side), and |y| > 6.
    static constexpr float kSteps[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
    for (int i = 0; i < 8; ++i) {
      const float guess = kSteps[i] / f;
      const int t =
          i < 7
              ? least(
                    [&](int m) {
                      const float y = float_of(static_cast<uint32_t>(m) << 16) * f;
                      return (e2m1_code(y) & 7) > i;
                    },
                    guess)
              : least(
                    [&](int m) { return float_of(static_cast<uint32_t>(m) << 16) * f > kE2m1Max; },
                    guess);
      for (int l = 0; l < 16; ++l) row[c][i][l] = static_cast<int16_t>(t - 1);
    }
    return true;
  }

  // Whether rows a..b (codes 0-126) are made or could be made now (out of line: the cast's
  // loop calls it only when a group meets new codes).
  __attribute__((noinline)) bool cover(int a, int b, float tensor_scale) {
    if (a > b || a < 0 || b > 126) return false;
    if (lo > hi) {
      if (!make(a, tensor_scale)) return false;
      lo = hi = a;
    }
    for (; a < lo; --lo)
      if (!make(lo - 1, tensor_scale)) return false;
    for (; b > hi; ++hi)
      if (!make(hi + 1, tensor_scale)) return false;
    return true;
  }
};

// This thread's rows, for tensor_scale.
inline Bf16Thresholds& bf16_thresholds(float tensor_scale) {
  thread_local std::unique_ptr<Bf16Thresholds> table;
  if (!table) table = std::make_unique<Bf16Thresholds>();
  if (table->tensor_scale_bits != bits_of(tensor_scale) || table->lo > table->hi) {
    table->tensor_scale_bits = bits_of(tensor_scale);
    table->inverse_scale = 1.0f / tensor_scale;
    table->lo = 1;
    table->hi = 0;
  }
  return *table;
}

// One block's 16 magnitude codes, negated, in 16-bit lanes in element order, from its row: the
// thresholds its magnitudes reach (each compare is -1 where reached), with its elements v, their
// magnitudes m and (kStats) the mask of those past T8 (saturated).
struct Bf16BlockCodes {
  __m256i neg, v, m, over;
};

template <bool kStats>
inline Bf16BlockCodes bf16_threshold_codes(__m256i v, const int16_t (*row)[16]) {
  const __m256i m = _mm256_and_si256(v, _mm256_set1_epi16(0x7FFF));
  __m256i r[8];
#pragma GCC unroll 8
  for (int i = 0; i < (kStats ? 8 : 7); ++i)
    r[i] = _mm256_cmpgt_epi16(m, _mm256_load_si256(reinterpret_cast<const __m256i*>(row[i])));
  return {
      _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(r[0], r[1]), _mm256_add_epi16(r[2], r[3])),
                       _mm256_add_epi16(_mm256_add_epi16(r[4], r[5]), r[6])),
      v, m, kStats ? r[7] : m};
}

// The codes of two blocks as 32 bytes in the order of _mm256_packs_epi16(a, b): their negated
// magnitude codes, with bit 3 set from their elements' sign bits (the packs keep each element's
// sign in its byte's top bit). With kStats it counts in bytes the saturated elements and the
// flushed ones: code 0 from a nonzero magnitude (the packs saturate magnitudes to 0..127, so
// they stay nonzero), _mm256_sign_epi8 keeping the zero code's mask only there.
template <bool kStats>
inline __m256i bf16_code_bytes(const Bf16BlockCodes& a, const Bf16BlockCodes& b, __m256i& saturated,
                               __m256i& flushed) {
  const __m256i neg = _mm256_packs_epi16(a.neg, b.neg);
  if constexpr (kStats) {
    saturated = _mm256_sub_epi8(saturated, _mm256_packs_epi16(a.over, b.over));
    flushed =
        _mm256_sub_epi8(flushed, _mm256_sign_epi8(_mm256_cmpeq_epi8(neg, _mm256_setzero_si256()),
                                                  _mm256_packs_epi16(a.m, b.m)));
  }
  const __m256i sign =
      _mm256_blendv_epi8(_mm256_setzero_si256(), _mm256_set1_epi8(8), _mm256_packs_epi16(a.v, b.v));
  return _mm256_sub_epi8(sign, neg);
}

// A group's byte counts (at most 255 a byte) added to a segment's 32-bit lanes.
inline __m256i add_byte_counts(__m256i lanes, __m256i counts) {
  return _mm256_add_epi32(lanes, _mm256_sad_epu8(counts, _mm256_setzero_si256()));
}

// Four blocks' codes as bytes (bf16_code_bytes of a and b, of c and d) stored as 32 bytes, the
// even element in the low nibble.
inline void store_e2m1_blocks4_bytes(uint8_t* dst, __m256i ab, __m256i cd) {
  // Per 128-bit half h: 16-bit units even + 16 * odd of a's pairs 4h..4h+3, then b's (c's, d's).
  const __m256i pab = _mm256_maddubs_epi16(ab, _mm256_set1_epi16(0x1001));
  const __m256i pcd = _mm256_maddubs_epi16(cd, _mm256_set1_epi16(0x1001));
  // Dwords: a's pairs 0-3, b's, c's, d's, then a's pairs 4-7, b's, c's, d's.
  const __m256i p = _mm256_packus_epi16(pab, pcd);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// The codes of two blocks (c0, c1: the first's elements 0-7 and 8-15; c2, c3: the second's),
// each at most 15, as 16 bytes, the even element in the low nibble.
inline void store_e2m1_blocks2(uint8_t* dst, __m256i c0, __m256i c1, __m256i c2, __m256i c3) {
  // Per 128-bit half h: bytes c0[4h..4h+3], c1[4h..], c2[4h..], c3[4h..].
  const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
  // even + 16 * odd: per half, the pairs (2h, 2h + 1) of c0, c1, c2, c3 as 16-bit units.
  const __m256i pairs = _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x1001));
  const __m256i p = _mm256_packus_epi16(pairs, pairs);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm_unpacklo_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
}

// A segment's statistics from its vector blocks: saturated and flushed elements counted in
// lanes (a compare mask is -1 where true, so subtracting it counts), and the largest block amax
// and amax * factor as lane maxima.
struct Nvfp4LaneStats8 {
  __m256i saturated;
  __m256i flushed;
  __m256 best;
  __m256 peak;

  static Nvfp4LaneStats8 zero() {
    return {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_set1_ps(-1.0f),
            _mm256_setzero_ps()};
  }
};

// 8 blocks' amax: block_amax_in's where the caller has them, else their own maxima of the magnitude
// bits (own), a NaN's bits (above infinity's) made the quiet NaN.
__attribute__((always_inline)) inline __m256 group_amax(__m256i own, const float* block_amax_in) {
  if (block_amax_in) return _mm256_loadu_ps(block_amax_in);
  return _mm256_castsi256_ps(
      _mm256_blendv_epi8(own, _mm256_set1_epi32(static_cast<int>(kQuietNan)),
                         _mm256_cmpgt_epi32(own, _mm256_set1_epi32(0x7F800000))));
}

// A group of 8 blocks' own amax bits, factors and the blocks the scalar body casts (factor NaN
// or infinite, where x = 0 makes x * factor NaN), taken before their codes (prepare_group8), so
// that a loop can take the next group's while it codes one.
struct FloatGroup {
  __m256i own;  // a NaN's bits above infinity's
  __m256 factor;
  __m256 scalar_lanes;
  unsigned to_scalar;
  alignas(32) float f[8];
};

// encode_group8's first half: the 8 blocks' amax (block_amax_in's 8, or their own by integer
// maxima of the magnitude bits), their scales (written; by sc's compares where they serve) and
// factors.
template <DType::Id kSrc>
[[gnu::always_inline]] inline void prepare_group8(const void* src, const float* block_amax_in,
                                                  float tensor_scale,
                                                  const Nvfp4ScaleCodeThresholds& sc,
                                                  uint8_t* scales, FloatGroup& g) {
  __m256i m[8];
  if constexpr (kSrc == DType::Id::bf16) {
    const auto* p = static_cast<const uint16_t*>(src);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      m[k] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                              _mm256_set1_epi16(0x7FFF));
    g.own = transposed_max8_16(m);
  } else {
    const auto* p = static_cast<const float*>(src);
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      m[k] = _mm256_max_epi32(
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                           magnitude),
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k + 8)),
                           magnitude));
    g.own = transposed_max8(m);
  }
  const __m256 amax = group_amax(g.own, block_amax_in);
  __m256i scale_codes;
  const __m256i bits = _mm256_castps_si256(amax);
  if (scale_codes8_serve(sc, bits)) {
    scale_codes = scale_codes8(sc, bits);
    g.factor = sc.factors_ok
                   ? scale_factors8(sc, scale_codes)
                   : _mm256_div_ps(_mm256_set1_ps(1.0f / tensor_scale), e4m3_values(scale_codes));
  } else {
    g.factor = nvfp4_block_scales(amax, tensor_scale, scale_codes);
  }
  _mm_storel_epi64(reinterpret_cast<__m128i*>(scales), bytes_of(scale_codes));
  // A factor that is NaN or infinite (where x = 0 makes x * factor NaN) is the scalar body's.
  g.scalar_lanes =
      _mm256_cmp_ps(g.factor, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_NLT_UQ);
  g.to_scalar = static_cast<unsigned>(_mm256_movemask_ps(g.scalar_lanes));
  _mm256_store_ps(g.f, g.factor);
}

// encode_group8's second half, from its prepared group g.
template <bool kSr, bool kStats, DType::Id kSrc>
[[gnu::always_inline]] inline unsigned encode_prepared8(const void* src, const FloatGroup& g,
                                                        const PhiloxKeys8* keys, uint64_t offset,
                                                        uint64_t row, int64_t col, uint8_t* codes,
                                                        Nvfp4LaneStats8* st) {
  const DType dtype{kSrc};
  // Block k reads word (d + k) % 4 of 64-column group (d + k) / 4 from col's, lanes 0-7 and
  // 8-15 of its 16 counter blocks: a third group where col is not a multiple of 64.
  const int d = static_cast<int>((col >> 4) & 3);
  __m256i words[3][2][4];
  if constexpr (kSr) {
    for (int g = 0; g < (d ? 3 : 2); ++g)
      philox16(*keys, offset, row, 16 * static_cast<uint64_t>((col >> 6) + g), words[g]);
  }
  const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(kE2m1Max);
#pragma GCC unroll 4
  for (int k = 0; k < 8; k += 2) {
    __m256i c[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int blk = k + j / 2, h = j % 2;
      const __m256 x = load8(src, dtype, 16 * blk + 8 * h);
      const __m256 y = _mm256_mul_ps(x, _mm256_set1_ps(g.f[blk]));
      if constexpr (kSr) {
        c[j] = e2m1_codes_stochastic(y, words[(d + blk) >> 2][h][(d + blk) & 3]);
      } else {
        c[j] = e2m1_codes_of_numbers(y);
      }
      if constexpr (kStats) {
        if (!((g.to_scalar >> blk) & 1)) {
          st->saturated = _mm256_sub_epi32(
              st->saturated, _mm256_castps_si256(_mm256_cmp_ps(abs8(y), six, _CMP_GT_OQ)));
          const __m256i zero_code = _mm256_cmpeq_epi32(_mm256_and_si256(c[j], _mm256_set1_epi32(7)),
                                                       _mm256_setzero_si256());
          const __m256 nonzero = _mm256_cmp_ps(x, zero, _CMP_NEQ_OQ);
          st->flushed = _mm256_sub_epi32(st->flushed,
                                         _mm256_and_si256(zero_code, _mm256_castps_si256(nonzero)));
        }
      }
    }
    store_e2m1_blocks2(codes + 8 * k, c[0], c[1], c[2], c[3]);
  }
  if constexpr (kStats) {
    // The blocks' own amax with NaN passed over is a number where the factor is finite (a
    // block holding a NaN has a NaN factor); the other lanes count 0.
    const __m256 own_f = _mm256_andnot_ps(g.scalar_lanes, _mm256_castsi256_ps(g.own));
    st->best = _mm256_max_ps(own_f, st->best);
    st->peak =
        _mm256_max_ps(_mm256_mul_ps(own_f, _mm256_andnot_ps(g.scalar_lanes, g.factor)), st->peak);
  }
  return g.to_scalar;
}

// 8 blocks of 16 elements from src (128 elements, all inside the segment): their amax
// (block_amax_in's 8, or their own by integer maxima of the magnitude bits), scales and factors
// as vectors, then each block's codes, rounded to nearest or (kSr) stochastically with the
// words of the 64-column groups from column `col` (a multiple of 16; philox.h's sr_word), two
// blocks' codes stored at once. Returns the blocks whose factor is NaN or infinite (their codes
// and scales are left for the scalar body, and they are not counted).
template <bool kSr, bool kStats, DType::Id kSrc>
inline unsigned encode_group8(const void* src, const float* block_amax_in, float tensor_scale,
                              const Nvfp4ScaleCodeThresholds& sc, const PhiloxKeys8* keys,
                              uint64_t offset, uint64_t row, int64_t col, uint8_t* codes,
                              uint8_t* scales, Nvfp4LaneStats8* st) {
  FloatGroup g;
  prepare_group8<kSrc>(src, block_amax_in, tensor_scale, sc, scales, g);
  return encode_prepared8<kSr, kStats, kSrc>(src, g, keys, offset, row, col, codes, st);
}

// A group of 8 bfloat16 blocks made ready for encode_group8_bf16 (prepare_group8_bf16): their
// own amax bits, E4M3 scale codes and the byte offsets of their rows in Bf16Thresholds::row (a
// row is 256 bytes); ok is false where a block's scale code has no row (a factor that is 0,
// infinite or NaN).
struct Bf16Group {
  __m256i own;
  __m256i code;
  alignas(32) int32_t offset[8];
  bool ok;
};

// encode_group8's amax and scale codes of 8 bfloat16 blocks from p, their scales written and
// their rows in t made where missing; nothing is written where g.ok comes back false.
__attribute__((always_inline)) inline void prepare_group8_bf16(
    const uint16_t* p, const float* block_amax_in, float tensor_scale,
    const Nvfp4ScaleCodeThresholds& sc, Bf16Thresholds& t, uint8_t* scales, Bf16Group& g) {
  __m256i m[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    m[k] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                            _mm256_set1_epi16(0x7FFF));
  g.own = transposed_max8_16(m);
  const __m256 amax = group_amax(g.own, block_amax_in);
  // By sc's compares where they serve, else by the divisions.
  const __m256i bits = _mm256_castps_si256(amax);
  g.code =
      scale_codes8_serve(sc, bits) ? scale_codes8(sc, bits) : nvfp4_scale_codes(amax, tensor_scale);
  g.ok = false;
  const __m256i outside = _mm256_or_si256(_mm256_cmpgt_epi32(g.code, _mm256_set1_epi32(t.hi)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(t.lo), g.code));
  if (!_mm256_testz_si256(outside, outside)) {
    alignas(32) int32_t c[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(c), g.code);
    if (!t.cover(*std::min_element(c, c + 8), *std::max_element(c, c + 8), tensor_scale)) return;
  }
  _mm_storel_epi64(reinterpret_cast<__m128i*>(scales), bytes_of(g.code));
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.offset), _mm256_slli_epi32(g.code, 8));
  g.ok = true;
}

// encode_group8 of a bfloat16 source rounded to nearest, from its prepared group g (g.ok): each
// block's codes by compares against its row of t, and with kStats its counts and records.
template <bool kStats>
__attribute__((always_inline)) inline void encode_group8_bf16(const uint16_t* p, const Bf16Group& g,
                                                              const Bf16Thresholds& t,
                                                              const Nvfp4ScaleCodeThresholds& sc,
                                                              uint8_t* codes, Nvfp4LaneStats8* st) {
  const char* rows = reinterpret_cast<const char*>(t.row);
  __m256i saturated = _mm256_setzero_si256(), flushed = saturated, bytes[2];
  Bf16BlockCodes c[2];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    c[k % 2] = bf16_threshold_codes<kStats>(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
        reinterpret_cast<const int16_t(*)[16]>(rows + g.offset[k]));
    if (k % 2 == 1) bytes[(k / 2) % 2] = bf16_code_bytes<kStats>(c[0], c[1], saturated, flushed);
    if (k % 4 == 3) store_e2m1_blocks4_bytes(codes + 8 * (k - 3), bytes[0], bytes[1]);
  }
  if constexpr (kStats) {
    st->saturated = add_byte_counts(st->saturated, saturated);
    st->flushed = add_byte_counts(st->flushed, flushed);
    const __m256 own_f = _mm256_castsi256_ps(g.own);
    st->best = _mm256_max_ps(own_f, st->best);
    // The blocks' factors, as nvfp4_block_scale makes them.
    const __m256 factor = sc.factors_ok
                              ? scale_factors8(sc, g.code)
                              : _mm256_div_ps(_mm256_set1_ps(t.inverse_scale), e4m3_values(g.code));
    st->peak = _mm256_max_ps(_mm256_mul_ps(own_f, factor), st->peak);
  }
}

// --- 16 bfloat16 blocks at a time --------------------------------------------------------------
//
// A group of 16 blocks takes its amax and scale codes in 16-bit lanes, one block a lane: the
// amax as bfloat16 bits (the largest magnitude's, or the high half of the block's float32 amax
// given by the caller, which is a bfloat16 value there), its code by the thresholds' 16-bit form
// (Nvfp4ScaleCodeThresholds::base16, step16). Groups holding a NaN amax, a negative given amax,
// or a code with no row, go 8 blocks at a time as before.

// The constants of the 16-block groups, made once a segment and read from memory (GCC would
// otherwise rebuild each broadcast in registers every group).
struct Bf16Consts16 {
  __m256i magnitude;  // 0x7FFF
  __m256i base;       // B9
  __m256i step[7];    // B(10 + j) - B9 - 1
  __m256i low7;       // 127
  __m256i nine, eight, c126;
  __m256i nan_bits;      // 0x7F80: amax bits above it are NaN
  __m256i below, above;  // the rows made are codes below + 1 .. above - 1
  __m256i unusual;       // 32-bit lanes: float32 amax bits above infinity's, or negative
  __m256i factor_top;    // Nvfp4ScaleCodeThresholds::factor_top
  __m256 inverse_scale;

  Bf16Consts16(const Nvfp4ScaleCodeThresholds& sc, const Bf16Thresholds& t)
      : magnitude(_mm256_set1_epi16(0x7FFF)),
        base(_mm256_set1_epi16(sc.base16)),
        low7(_mm256_set1_epi16(127)),
        nine(_mm256_set1_epi16(9)),
        eight(_mm256_set1_epi16(8)),
        c126(_mm256_set1_epi16(126)),
        nan_bits(_mm256_set1_epi16(0x7F80)),
        unusual(_mm256_set1_epi32(0x7F800000)),
        factor_top(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc.factor_top))),
        inverse_scale(_mm256_set1_ps(t.inverse_scale)) {
    for (int j = 0; j < 7; ++j) step[j] = _mm256_set1_epi16(sc.step16[j]);
    rows(t);
  }
  void rows(const Bf16Thresholds& t) {
    below = _mm256_set1_epi16(static_cast<int16_t>(t.lo - 1));
    above = _mm256_set1_epi16(static_cast<int16_t>(t.hi + 1));
  }
};

// 16 blocks made ready for encode_group16_bf16: their own amax bits and scale codes in 16-bit
// lanes, and their rows' byte offsets in Bf16Thresholds::row. ok is false where the group goes
// 8 blocks at a time (nothing is written then).
struct Bf16Group16 {
  __m256i own;
  __m256i code;
  alignas(32) uint16_t offset[16];
  bool ok;
};

// Lane k: the largest of m[k]'s 16 lanes (non-negative int16), for 16 vectors. Each step halves
// the lanes a block holds in each 128-bit half and doubles the blocks; the last takes the two
// halves' maxima.
[[gnu::always_inline]] inline __m256i transposed_max16_16(const __m256i* m) {
  __m256i t[8], u[4], w[2];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    t[k] = _mm256_max_epi16(_mm256_unpacklo_epi16(m[2 * k], m[2 * k + 1]),
                            _mm256_unpackhi_epi16(m[2 * k], m[2 * k + 1]));
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k)
    u[k] = _mm256_max_epi16(_mm256_unpacklo_epi32(t[2 * k], t[2 * k + 1]),
                            _mm256_unpackhi_epi32(t[2 * k], t[2 * k + 1]));
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k)
    w[k] = _mm256_max_epi16(_mm256_unpacklo_epi64(u[2 * k], u[2 * k + 1]),
                            _mm256_unpackhi_epi64(u[2 * k], u[2 * k + 1]));
  return _mm256_max_epi16(_mm256_permute2x128_si256(w[0], w[1], 0x20),
                          _mm256_permute2x128_si256(w[0], w[1], 0x31));
}

// The scale codes of 16 amax given as bfloat16 bits in 16-bit lanes (numbers >= 0), by the
// thresholds' 16-bit form: 9 + 8 octaves + the steps the low 7 bits reach, clamped to 8..126.
[[gnu::always_inline]] inline __m256i scale_codes16(const Bf16Consts16& k, __m256i bits) {
  const __m256i d = _mm256_sub_epi16(bits, k.base);
  __m256i c = _mm256_add_epi16(_mm256_slli_epi16(_mm256_srai_epi16(d, 7), 3), k.nine);
  const __m256i low = _mm256_and_si256(d, k.low7);
#pragma GCC unroll 7
  for (int j = 0; j < 7; ++j) c = _mm256_sub_epi16(c, _mm256_cmpgt_epi16(low, k.step[j]));
  return _mm256_min_epi16(_mm256_max_epi16(c, k.eight), k.c126);
}

// 16 blocks from p: their amax (block_amax_in's, or their own), scale codes, scales (written)
// and rows (made where missing). Returns false, writing nothing, where the group goes 8 blocks at
// a time.
[[gnu::always_inline]] inline void prepare_group16_bf16(const uint16_t* p,
                                                        const float* block_amax_in,
                                                        float tensor_scale, Bf16Consts16& k,
                                                        Bf16Thresholds& t, uint8_t* scales,
                                                        Bf16Group16& g) {
  __m256i m[16];
#pragma GCC unroll 16
  for (int b = 0; b < 16; ++b)
    m[b] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * b)),
                            k.magnitude);
  g.own = transposed_max16_16(m);
  __m256i amax = g.own, unusual;
  if (block_amax_in) {
    // The given amax of a bfloat16 source are bfloat16 values: their high 16 bits, in order.
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_amax_in));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_amax_in + 8));
    amax = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_srli_epi32(a0, 16), _mm256_srli_epi32(a1, 16)), 0xD8);
    // NaN or negative amax, or any that is not a bfloat16 value, go 8 at a time.
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    unusual = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpgt_epi32(a0, k.unusual), _mm256_cmpgt_epi32(a1, k.unusual)),
        _mm256_and_si256(_mm256_or_si256(a0, a1), low16));
    unusual = _mm256_or_si256(unusual, _mm256_srai_epi32(_mm256_or_si256(a0, a1), 31));
  } else {
    unusual = _mm256_cmpgt_epi16(amax, k.nan_bits);
  }
  g.code = scale_codes16(k, amax);
  g.ok = false;
  if (!_mm256_testz_si256(unusual, unusual)) return;
  const __m256i inside =
      _mm256_and_si256(_mm256_cmpgt_epi16(g.code, k.below), _mm256_cmpgt_epi16(k.above, g.code));
  if (_mm256_movemask_epi8(inside) != -1) {
    alignas(32) int16_t c[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(c), g.code);
    if (!t.cover(*std::min_element(c, c + 16), *std::max_element(c, c + 16), tensor_scale)) return;
    k.rows(t);
  }
  _mm_storeu_si128(
      reinterpret_cast<__m128i*>(scales),
      _mm_packus_epi16(_mm256_castsi256_si128(g.code), _mm256_extracti128_si256(g.code, 1)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.offset), _mm256_slli_epi16(g.code, 8));
  g.ok = true;
}

// The 16 blocks of a prepared group (g.ok): each block's codes by compares against its row of t,
// and with kStats their counts and records.
template <bool kStats>
[[gnu::always_inline]] inline void encode_group16_bf16(const uint16_t* p, const Bf16Group16& g,
                                                       const Bf16Thresholds& t,
                                                       const Nvfp4ScaleCodeThresholds& sc,
                                                       const Bf16Consts16& k, uint8_t* codes,
                                                       Nvfp4LaneStats8* st) {
  const char* rows = reinterpret_cast<const char*>(t.row);
  __m256i saturated = _mm256_setzero_si256(), flushed = saturated, bytes[2];
  Bf16BlockCodes c[2];
#pragma GCC unroll 16
  for (int b = 0; b < 16; ++b) {
    c[b % 2] = bf16_threshold_codes<kStats>(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * b)),
        reinterpret_cast<const int16_t(*)[16]>(rows + g.offset[b]));
    if (b % 2 == 1) bytes[(b / 2) % 2] = bf16_code_bytes<kStats>(c[0], c[1], saturated, flushed);
    if (b % 4 == 3) store_e2m1_blocks4_bytes(codes + 8 * (b - 3), bytes[0], bytes[1]);
  }
  if constexpr (kStats) {
    st->saturated = add_byte_counts(st->saturated, saturated);
    st->flushed = add_byte_counts(st->flushed, flushed);
    // The blocks' own amax as float32 and their codes in 32-bit lanes, in the same order.
    const __m256i zero = _mm256_setzero_si256();
    const __m256 own[2] = {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, g.own)),
                           _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, g.own))};
    const __m256i code[2] = {_mm256_unpacklo_epi16(g.code, zero),
                             _mm256_unpackhi_epi16(g.code, zero)};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      st->best = _mm256_max_ps(own[h], st->best);
      // The blocks' factors, as nvfp4_block_scale makes them.
      const __m256 factor = sc.factors_ok
                                ? _mm256_castsi256_ps(_mm256_sub_epi32(
                                      _mm256_permutevar8x32_epi32(k.factor_top, code[h]),
                                      _mm256_slli_epi32(_mm256_srli_epi32(code[h], 3), 23)))
                                : _mm256_div_ps(k.inverse_scale, e4m3_values(code[h]));
      st->peak = _mm256_max_ps(_mm256_mul_ps(own[h], factor), st->peak);
    }
  }
}

// The NVFP4 cast of a segment, 8 blocks at a time (encode_group8); the segment's last blocks
// that make no group of 8 are cast from a zero-padded copy and their bytes copied out. With
// kStats it returns nvfp4_run_stats's counts of the segment, taken from the vectors the cast
// holds: a block's amax with NaN passed over, |x * factor| > 6, and codes whose magnitude bits
// are 0 from x != 0 (not NaN). Blocks whose factor is NaN or infinite, and a row's short last
// block, run the scalar body and are counted by nvfp4_run_stats. A bfloat16 source rounded to
// nearest takes encode_group16_bf16 where the thresholds and its rows allow, else
// encode_group8_bf16.
template <bool kSr, bool kStats, DType::Id kSrc>
MxStatsRun nvfp4_encode_as(const void* src, int64_t n, float tensor_scale,
                           const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                           int64_t first_col, uint8_t* codes, uint8_t* scales) {
  const DType dtype{kSrc};
  const int64_t blocks = n / kNvfp4Block, full = blocks * kNvfp4Block;
  std::optional<PhiloxKeys8> keys;
  if constexpr (kSr) keys.emplace(seed);
  Nvfp4LaneStats8 st = Nvfp4LaneStats8::zero();
  MxStatsRun run;
  auto scalar_block = [&](int64_t b, int64_t len) {
    const int64_t i = b * kNvfp4Block;
    const float* in = block_amax_in ? block_amax_in + b : nullptr;
    if constexpr (kSr) {
      kScalarKernels.nvfp4_encode_sr(at(src, dtype, i), dtype, len, tensor_scale, in, seed, offset,
                                     row, first_col + i, codes + i / 2, scales + b);
    } else {
      kScalarKernels.nvfp4_encode(at(src, dtype, i), dtype, len, tensor_scale, in, codes + i / 2,
                                  scales + b);
    }
    if constexpr (kStats)
      run.append(
          nvfp4_run_stats(at(src, dtype, i), dtype, len, tensor_scale, codes + i / 2, scales + b));
  };
  const Nvfp4ScaleCodeThresholds& sc = nvfp4_scale_code_thresholds(tensor_scale);
  auto group = [&](const void* x, const float* amax_in, int64_t b, uint8_t* c, uint8_t* s) {
    return encode_group8<kSr, kStats, kSrc>(x, amax_in, tensor_scale, sc, keys ? &*keys : nullptr,
                                            offset, static_cast<uint64_t>(row),
                                            first_col + b * kNvfp4Block, c, s, &st);
  };
  // A bfloat16 source rounded to nearest: each group by the thresholds' rows where they serve,
  // its amax and scale codes taken a group ahead, so that their latency (a reduction, the
  // compares against the scale codes' thresholds) hides behind the blocks before.
  constexpr bool kThresholds = kSrc == DType::Id::bf16 && !kSr;
  Bf16Thresholds* thresholds = kThresholds ? &bf16_thresholds(tensor_scale) : nullptr;
  const auto* p = static_cast<const uint16_t*>(src);
  auto prepare = [&](int64_t b, Bf16Group & g) __attribute__((always_inline)) {
    if constexpr (kThresholds)
      prepare_group8_bf16(p + b * kNvfp4Block, block_amax_in ? block_amax_in + b : nullptr,
                          tensor_scale, sc, *thresholds, scales + b, g);
  };
  // A float32 source rounded to nearest: each group's amax and factors taken a group ahead too.
  constexpr bool kFloatAhead = kSrc == DType::Id::f32 && !kSr;
  auto prepare_float = [&](int64_t b, FloatGroup & g) __attribute__((always_inline)) {
    prepare_group8<kSrc>(at(src, dtype, b * kNvfp4Block),
                         block_amax_in ? block_amax_in + b : nullptr, tensor_scale, sc, scales + b,
                         g);
  };
  // 8 blocks from block b8, not prepared ahead.
  auto eight = [&](int64_t b8) {
    const float* amax_in = block_amax_in ? block_amax_in + b8 : nullptr;
    uint8_t *c = codes + b8 * kNvfp4Block / 2, *s = scales + b8;
    if constexpr (kThresholds) {
      Bf16Group g8;
      prepare_group8_bf16(p + b8 * kNvfp4Block, amax_in, tensor_scale, sc, *thresholds, s, g8);
      if (g8.ok)
        return encode_group8_bf16<kStats>(p + b8 * kNvfp4Block, g8, *thresholds, sc, c, &st);
    }
    for (unsigned nan = group(at(src, dtype, b8 * kNvfp4Block), amax_in, b8, c, s); nan;
         nan &= nan - 1)
      scalar_block(b8 + std::countr_zero(nan), kNvfp4Block);
  };
  int64_t b = 0;
  if constexpr (kThresholds) {
    // Whole groups of 16 blocks where the thresholds serve, each prepared a group ahead; a group
    // that goes 8 blocks at a time runs the loop below on its two halves.
    if (sc.ok && blocks >= 16) {
      Bf16Consts16 k(sc, *thresholds);
      Bf16Group16 ahead16[2];
      const int64_t groups16 = blocks / 16;
      auto prepare16 = [&](int64_t g, Bf16Group16 & a) __attribute__((always_inline)) {
        prepare_group16_bf16(p + 16 * g * kNvfp4Block,
                             block_amax_in ? block_amax_in + 16 * g : nullptr, tensor_scale, k,
                             *thresholds, scales + 16 * g, a);
      };
      prepare16(0, ahead16[0]);
      for (int64_t g = 0; g < groups16; ++g) {
        if (g + 1 < groups16) prepare16(g + 1, ahead16[(g + 1) & 1]);
        const Bf16Group16& a = ahead16[g & 1];
        if (a.ok) {
          encode_group16_bf16<kStats>(p + 16 * g * kNvfp4Block, a, *thresholds, sc, k,
                                      codes + 8 * g * kNvfp4Block, &st);
        } else {
          for (int h = 0; h < 2; ++h) eight(16 * g + 8 * h);
          k.rows(*thresholds);
        }
      }
      b = groups16 * 16;
    }
  }
  const int64_t groups = (blocks - b) / 8, first = b;
  Bf16Group ahead[2];
  FloatGroup float_ahead[2];
  if (kThresholds && groups > 0) prepare(b, ahead[0]);
  if (kFloatAhead && groups > 0) prepare_float(b, float_ahead[0]);
  for (; b + 8 <= blocks; b += 8) {
    const void* x = at(src, dtype, b * kNvfp4Block);
    const float* amax_in = block_amax_in ? block_amax_in + b : nullptr;
    uint8_t *c = codes + b * kNvfp4Block / 2, *s = scales + b;
    const int64_t q = (b - first) / 8;
    if constexpr (kThresholds) {
      if (q + 1 < groups) prepare(b + 8, ahead[(q + 1) & 1]);
      if (ahead[q & 1].ok) {
        encode_group8_bf16<kStats>(p + b * kNvfp4Block, ahead[q & 1], *thresholds, sc, c, &st);
        continue;
      }
    }
    unsigned nan;
    if constexpr (kFloatAhead) {
      if (q + 1 < groups) prepare_float(b + 8, float_ahead[(q + 1) & 1]);
      nan = encode_prepared8<kSr, kStats, kSrc>(x, float_ahead[q & 1], nullptr, 0, 0, 0, c, &st);
    } else {
      nan = group(x, amax_in, b, c, s);
    }
    for (; nan; nan &= nan - 1) scalar_block(b + std::countr_zero(nan), kNvfp4Block);
  }
  if (b < blocks) {
    // The last 1-7 whole blocks, zero-padded to 8 (the padding's codes are dropped).
    const int count = static_cast<int>(blocks - b);
    alignas(32) unsigned char x[8 * kNvfp4Block * sizeof(float)] = {};
    alignas(32) float amax_in[8] = {};
    std::memcpy(x, at(src, dtype, b * kNvfp4Block), count * kNvfp4Block * dtype.itemsize());
    if (block_amax_in) std::copy(block_amax_in + b, block_amax_in + blocks, amax_in);
    uint8_t c[8 * kNvfp4Block / 2], s[8];
    const float* in = block_amax_in ? amax_in : nullptr;
    unsigned nan = 0;
    if constexpr (kThresholds) {
      const auto* xp = reinterpret_cast<const uint16_t*>(x);
      prepare_group8_bf16(xp, in, tensor_scale, sc, *thresholds, s, ahead[0]);
      if (ahead[0].ok)
        encode_group8_bf16<kStats>(xp, ahead[0], *thresholds, sc, c, &st);
      else
        nan = group(x, in, b, c, s);
    } else {
      nan = group(x, in, b, c, s);
    }
    std::memcpy(codes + b * kNvfp4Block / 2, c, count * kNvfp4Block / 2);
    std::memcpy(scales + b, s, count);
    for (nan &= (1u << count) - 1; nan; nan &= nan - 1)
      scalar_block(b + std::countr_zero(nan), kNvfp4Block);
  }
  if (full < n) scalar_block(blocks, n - full);
  if constexpr (kStats) {
    if (blocks > 0) {
      run.best = std::max(run.best, hmax(st.best));
      // max of amax * factor / 6 over the blocks is their max over 6 (division is monotonic).
      run.peak = std::max(run.peak, static_cast<double>(hmax(st.peak)) / kE2m1Max);
    }
    alignas(32) int32_t lanes[2][8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[0]), st.saturated);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[1]), st.flushed);
    for (int k = 0; k < 8; ++k) {
      run.saturated += lanes[0][k];
      run.flushed += lanes[1][k];
    }
  }
  return run;
}

template <bool kSr, bool kStats>
MxStatsRun nvfp4_encode_body(const void* src, DType dtype, int64_t n, float tensor_scale,
                             const float* block_amax_in, uint64_t seed, uint64_t offset,
                             int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  if (dtype == kFloat32)
    return nvfp4_encode_as<kSr, kStats, DType::Id::f32>(src, n, tensor_scale, block_amax_in, seed,
                                                        offset, row, first_col, codes, scales);
  return nvfp4_encode_as<kSr, kStats, DType::Id::bf16>(src, n, tensor_scale, block_amax_in, seed,
                                                       offset, row, first_col, codes, scales);
}

}  // namespace

namespace avx2 {

// mxfp4_sr.h's cast on 8 lanes: each 1x32 block's E8M0 floor scale, then the stochastic rounding
// of x * 2^-e * 3/4 with the column's Philox word (n and first_col multiples of 32 and 64).
void mxfp4_encode_sr(const void* src, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                     int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  const PhiloxKeys8 keys(seed);
  const __m256 prescale = _mm256_set1_ps(kMxfp4SrPrescale), zero = _mm256_setzero_ps();
  __m256i words[2][4];  // lanes 0-7 and 8-15 of the column group's 16 counter blocks
  for (int64_t i = 0; i < n; i += kMxBlock) {
    const int64_t col = first_col + i;
    if ((col & 63) == 0)
      philox16(keys, offset, static_cast<uint64_t>(row), 16 * static_cast<uint64_t>(col >> 6),
               words);
    __m256 x[4], m = zero;
    bool nan = false;
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      x[q] = load8(src, dtype, i + 8 * q);
      nan |= any_nan(x[q]);
      m = _mm256_max_ps(abs8(x[q]), m);
    }
    const uint8_t s = nan ? kE8m0Nan : e8m0_floor(hmax(m), element_limits(Element::kE2m1).max_pow2);
    scales[i / kMxBlock] = s;
    const __m256 r = _mm256_set1_ps(floor_reciprocal(s));
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const int64_t c = col + 8 * q;  // column 64 g + 16 k + l: word k of lane l's counter
      store_e2m1(codes + i / 2 + 4 * q,
                 e2m1_codes_stochastic(_mm256_mul_ps(_mm256_mul_ps(x[q], r), prescale),
                                       words[(c >> 3) & 1][(c >> 4) & 3]));
    }
  }
}

void nvfp4_encode(const void* src, DType dtype, int64_t n, float tensor_scale,
                  const float* block_amax_in, uint8_t* codes, uint8_t* scales) {
  nvfp4_encode_body<false, false>(src, dtype, n, tensor_scale, block_amax_in, 0, 0, 0, 0, codes,
                                  scales);
}

void nvfp4_encode_sr(const void* src, DType dtype, int64_t n, float tensor_scale,
                     const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                     int64_t first_col, uint8_t* codes, uint8_t* scales) {
  nvfp4_encode_body<true, false>(src, dtype, n, tensor_scale, block_amax_in, seed, offset, row,
                                 first_col, codes, scales);
}

MxStatsRun nvfp4_encode_stats(const void* src, DType dtype, int64_t n, float tensor_scale,
                              const float* block_amax_in, bool stochastic, uint64_t seed,
                              uint64_t offset, int64_t row, int64_t first_col, uint8_t* codes,
                              uint8_t* scales) {
  if (stochastic)
    return nvfp4_encode_body<true, true>(src, dtype, n, tensor_scale, block_amax_in, seed, offset,
                                         row, first_col, codes, scales);
  return nvfp4_encode_body<false, true>(src, dtype, n, tensor_scale, block_amax_in, 0, 0, 0, 0,
                                        codes, scales);
}

void nvfp4_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, float tensor_scale,
                  float* out) {
  const int64_t full = n / kNvfp4Block * kNvfp4Block;
  for (int64_t i = 0; i < full; i += kNvfp4Block) {
    const __m256 s = _mm256_set1_ps(tensor_scale * e4m3_value(scales[i / kNvfp4Block]));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(e2m1_values(codes + i / 2), s));
    _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(e2m1_values(codes + i / 2 + 4), s));
  }
  if (full < n)
    kScalarKernels.nvfp4_decode(codes + full / 2, scales + full / kNvfp4Block, n - full,
                                tensor_scale, out + full);
}

// max |x| by integer maxima of the magnitude bits, 16 bfloat16 or 8 float32 lanes a vector (a
// NaN's bits lie above infinity's).
float amax(const void* src, DType dtype, int64_t n) {
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  int64_t full;
  uint32_t bits;
  if (dtype == kBFloat16) {
    const auto* p = static_cast<const uint16_t*>(src);
    const __m256i magnitude = _mm256_set1_epi16(0x7FFF);
    full = n / 32 * 32;
    for (int64_t i = 0; i < full; i += 32) {
      m0 = _mm256_max_epu16(
          m0,
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), magnitude));
      m1 = _mm256_max_epu16(
          m1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 16)),
                               magnitude));
    }
    const __m256i h = _mm256_max_epu16(m0, m1);
    __m128i q = _mm_max_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    // The largest of 8 16-bit lanes: the smallest of their complements.
    q = _mm_minpos_epu16(_mm_xor_si128(q, _mm_set1_epi16(-1)));
    bits = static_cast<uint32_t>(~_mm_extract_epi16(q, 0) & 0xFFFF) << 16;
  } else {
    const auto* p = static_cast<const float*>(src);
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
    full = n / 16 * 16;
    for (int64_t i = 0; i < full; i += 16) {
      m0 = _mm256_max_epu32(
          m0,
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), magnitude));
      m1 = _mm256_max_epu32(
          m1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)),
                               magnitude));
    }
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_max_epu32(m0, m1));
    bits = *std::max_element(lanes, lanes + 8);
  }
  if (bits > 0x7F800000u) return float_of(kQuietNan);
  const float vec = float_of(bits);
  const float tail = kScalarKernels.amax(at(src, dtype, full), dtype, n - full);
  return tail != tail ? tail : (tail > vec ? tail : vec);
}

}  // namespace avx2

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
