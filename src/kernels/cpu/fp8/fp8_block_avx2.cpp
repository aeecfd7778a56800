// The block recipe's 1x128 tiles of bfloat16 cast to E4M3 on AVX2 (fp8_block.h,
// detail::block_tiles_bf16_e4m3_avx2): each tile's amax from the integer maximum of its
// magnitude bits, its scale, then its 128 codes from the values still in L1, sixteen tiles at a
// time (their maxima, then their scales eight at a time in float32 lanes, then their casts).
// Under a power-of-2 scale (the recipe's default) with the tile's amax * scale within E4M3's
// range, the codes come sixteen a vector from 16-bit lanes (fast_codes32 below where the scale
// lies below 2^120; fp8_codes_avx2.h's codes16_pow2_in_range at 2^120 and codes16_pow2 above:
// an exponent add and an integer rounding, nothing saturates or flushes); a tile (or half a tile
// under the rare scales) holding a value whose code is subnormal or flushed, and every tile under
// another scale or holding a NaN or an inf, takes float32 lanes (satfinite_codes) with the
// saturated and flushed counts kept in vector lanes across all the tiles of a call. 128x128 blocks
// are cast a group side by side (detail::block_groups_bf16_e4m3_avx2, the group walk of
// fp8_block_groups.h): their maxima in one pass over the group's rows, then the casts while the
// rows are in cache, together with the next group's maxima. 128x1 tiles of the columns are
// cast a band of 128 rows at a time (detail::column_tiles_bf16_e4m3_avx2): the columns' maxima
// elementwise over the rows, then 32 columns' codes a step under per-column constants, row by row
// in x's layout. The same amax, scale, codes and counts as the per-tile calls of the
// delayed-scaling cast (fp8_cast.h) that the other sources and formats take.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_block_scales_avx2.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/float8.h"

// The column and group walks take this file's target (fp8_block_columns.h, fp8_block_groups.h).
#pragma GCC push_options
#pragma GCC target("avx2")
#include "kernels/cpu/fp8/fp8_block_columns.h"
#include "kernels/cpu/fp8/fp8_block_groups.h"

namespace mantissa::kernels::fp8::detail {
namespace {

// The largest magnitude bits among 128 bfloat16 values, NaN passed over.
__attribute__((target("avx2"))) inline uint16_t max_magnitude_128(const uint16_t* s) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF), inf = _mm256_set1_epi16(0x7F80);
  __m256i best = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j) {
    __m256i a =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * j)), abs);
    // a <= inf where min(a, inf) == a; NaNs (above inf) become 0.
    a = _mm256_and_si256(a, _mm256_cmpeq_epi16(_mm256_min_epu16(a, inf), a));
    best = _mm256_max_epu16(best, a);
  }
  // The maximum of eight 16-bit lanes as 0xFFFF less the minimum of their complements.
  const __m128i m = _mm_max_epu16(_mm256_castsi256_si128(best), _mm256_extracti128_si256(best, 1));
  const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
  return static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
}

// The largest magnitude bits among 128 bfloat16 values, a NaN's included (above 0x7F80).
__attribute__((target("avx2"))) inline uint16_t max_bits_128(const uint16_t* s) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  __m256i b0 = _mm256_setzero_si256(), b1 = _mm256_setzero_si256();
  for (int j = 0; j < 8; j += 2) {
    // Magnitude bits are at most 0x7FFF: a signed maximum orders them.
    b0 = _mm256_max_epi16(
        b0,
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * j)), abs));
    b1 = _mm256_max_epi16(
        b1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * j + 16)),
                             abs));
  }
  const __m256i best = _mm256_max_epi16(b0, b1);
  const __m128i m = _mm_max_epi16(_mm256_castsi256_si128(best), _mm256_extracti128_si256(best, 1));
  const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
  return static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
}

// The codes of 8 bfloat16 values (bits h) times `vs` in float32 lanes (satfinite_codes), in
// 32-bit lanes, their saturated and flushed elements counted.
__attribute__((target("avx2"))) inline __m256i codes8_f32(__m128i h, __m256 vs,
                                                          LaneCounts& counts) {
  const __m256 x = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return counted_codes<3, 7, 0x7e>(x, _mm256_mul_ps(x, vs), _mm256_set1_ps(Float8E4M3::kMax),
                                   counts);
}

// The same for 16 values at p, the codes in 16-bit lanes.
__attribute__((target("avx2"))) inline __m256i codes16_f32(const uint16_t* p, __m256 vs,
                                                           LaneCounts& counts) {
  const __m256i lo = codes8_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), vs, counts);
  const __m256i hi =
      codes8_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)), vs, counts);
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
}

constexpr float kE4m3Max = Float8E4M3::kMax;

__attribute__((target("avx2"))) inline __m256i load16(const uint16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The codes of 32 bfloat16 values (h0, h1), in element order, under power-of-2 scales 2^e with
// e < 120 and amax * scale within E4M3's range (the common case), each lane's rebias
// ((120 - e) << 7) - 6 in rb0, rb1: y = |h| - rb with unsigned saturation is the product's bits
// rebiased to E4M3's plus 6, and avg(y, bit 4 of |h|) >> 3 = (y - 6 + 7 + lsb) >> 4 is
// codes16_pow2_in_range's code, rounded to nearest even (bit 4 of |h| is the product's, rb + 6
// being a multiple of 128), in two operations fewer. A value whose product lies below E4M3's
// smallest normal gets a code below 8 (but a product in [2^-7 * 1.9375, 2^-6), whose code is 8,
// the smallest normal, gets 8); 0 gets 0. `low` is or-ed with a nonzero byte where a nonzero
// value has a code below 8, whose code must come from float32 lanes: min(packs(|h|), 8) less the
// code with unsigned saturation (packs keeps an |h| of 8 or more at 8 or more).
__attribute__((target("avx2"), always_inline)) inline __m256i fast_codes32(__m256i h0, __m256i h1,
                                                                           __m256i rb0, __m256i rb1,
                                                                           __m256i& low) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF), one = _mm256_set1_epi16(1);
  const __m256i a0 = _mm256_and_si256(h0, abs), a1 = _mm256_and_si256(h1, abs);
  const __m256i r0 =
      _mm256_avg_epu16(_mm256_subs_epu16(a0, rb0), _mm256_and_si256(_mm256_srli_epi16(a0, 4), one));
  const __m256i r1 =
      _mm256_avg_epu16(_mm256_subs_epu16(a1, rb1), _mm256_and_si256(_mm256_srli_epi16(a1, 4), one));
  // Bytes in packs' order (the halves of the two vectors interleaved): the codes, h's signs
  // (packs keeps a negative h negative), |h| at least 8 where it is.
  const __m256i code = _mm256_packus_epi16(_mm256_srli_epi16(r0, 3), _mm256_srli_epi16(r1, 3));
  const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(-128));
  low = _mm256_or_si256(
      low,
      _mm256_subs_epu8(_mm256_min_epu8(_mm256_packs_epi16(a0, a1), _mm256_set1_epi8(8)), code));
  return _mm256_permute4x64_epi64(_mm256_or_si256(code, sign), 0xD8);
}

// fast_codes32 of 128 values at s under one rebias into d (with streaming stores where kStream,
// d 32-byte aligned); false where a nonzero value's code is below 8 (d then untouched).
template <bool kStream = false>
__attribute__((target("avx2"), always_inline)) inline bool fast_codes128(const uint16_t* s,
                                                                         __m256i rb, uint8_t* d) {
  __m256i low = _mm256_setzero_si256(), c[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q)
    c[q] = fast_codes32(load16(s + 32 * q), load16(s + 32 * q + 16), rb, rb, low);
  if (!_mm256_testz_si256(low, low)) return false;
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) columns::put32<kStream>(d + 32 * q, c[q]);
  return true;
}

// The constants of one scale's cast, kept as scalars (a batch of tiles holds one each) and
// broadcast by the cast: the scale for float32 lanes and, where the 16-bit lanes apply (a
// power-of-2 scale 2^e, amax * scale within E4M3's range), codes16_pow2's e << 7 and normal_from,
// codes16_pow2_in_range's rebias where e <= 120, and fast_codes32's where e < 120 (`fast`).
struct Lanes {
  float scale;
  int16_t exponent_add, normal_from, rebias, fast_rebias;
  bool sixteen, in_range, fast;
};

inline Lanes lanes_of(float amax, float scale) {
  Lanes l{scale, 0, 0, 0, 0, false, false, false};
  int e = 0;
  if (!pow2_exponent(scale, &e) || !(amax * scale <= kE4m3Max)) return l;
  l.exponent_add = static_cast<int16_t>(e * 128);
  l.normal_from = static_cast<int16_t>(std::max((121 - e) * 128, 0x80));
  l.rebias = static_cast<int16_t>(std::max(120 - e, 0) * 128);
  l.fast_rebias = static_cast<int16_t>(std::max(120 - e, 1) * 128 - 6);
  l.sixteen = true;
  l.in_range = e <= 120;
  l.fast = e < 120;
  return l;
}

// The codes of 128 bfloat16 values at s into d through float32 lanes under `scale`
// (satfinite_codes), their saturated and flushed elements counted.
__attribute__((target("avx2"), always_inline)) inline void cast_128_f32(const uint16_t* s,
                                                                        uint8_t* d, __m256 scale,
                                                                        LaneCounts& counts) {
  for (int q = 0; q < 4; ++q) {
    const __m256i lo = codes16_f32(s + 32 * q, scale, counts);
    const __m256i hi = codes16_f32(s + 32 * q + 16, scale, counts);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32 * q), pack32_bytes16(lo, hi));
  }
}

// The codes of 128 bfloat16 values at s into d. In 16-bit lanes where they apply and no value is
// a NaN: every product a normal E4M3 value or zero, else (rarely) half of them through float32
// lanes. Otherwise all through float32 lanes.
__attribute__((target("avx2"), always_inline)) inline void cast_128(const uint16_t* s, uint8_t* d,
                                                                    bool nan, const Lanes& l,
                                                                    LaneCounts& counts) {
  const __m256 scale = _mm256_set1_ps(l.scale);
  if (nan || !l.sixteen) {
    cast_128_f32(s, d, scale, counts);
    return;
  }
  const __m256i normal_from = _mm256_set1_epi16(l.normal_from);
  if (l.in_range) [[likely]] {
    const __m256i rebias = _mm256_set1_epi16(l.rebias);
    for (int half = 0; half < 2; ++half) {
      const uint16_t* p = s + 64 * half;
      __m256i low = _mm256_set1_epi16(-1);
      __m256i c0 = codes16_pow2_in_range<3, 7>(load16(p), rebias, &low);
      __m256i c1 = codes16_pow2_in_range<3, 7>(load16(p + 16), rebias, &low);
      __m256i c2 = codes16_pow2_in_range<3, 7>(load16(p + 32), rebias, &low);
      __m256i c3 = codes16_pow2_in_range<3, 7>(load16(p + 48), rebias, &low);
      if (any_below(low, normal_from)) [[unlikely]] {
        c0 = codes16_f32(p, scale, counts);
        c1 = codes16_f32(p + 16, scale, counts);
        c2 = codes16_f32(p + 32, scale, counts);
        c3 = codes16_f32(p + 48, scale, counts);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64 * half), pack32_bytes16(c0, c1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64 * half + 32), pack32_bytes16(c2, c3));
    }
    return;
  }
  const __m256i exponent_add = _mm256_set1_epi16(l.exponent_add);
  for (int half = 0; half < 2; ++half) {
    const uint16_t* p = s + 64 * half;
    // Four vectors in named registers (an array of them is kept on the stack at -O2).
    __m256i s0, s1, s2, s3;
    __m256i c0 = codes16_pow2<3, 7, 0x7e>(load16(p), exponent_add, normal_from, &s0);
    __m256i c1 = codes16_pow2<3, 7, 0x7e>(load16(p + 16), exponent_add, normal_from, &s1);
    __m256i c2 = codes16_pow2<3, 7, 0x7e>(load16(p + 32), exponent_add, normal_from, &s2);
    __m256i c3 = codes16_pow2<3, 7, 0x7e>(load16(p + 48), exponent_add, normal_from, &s3);
    const __m256i any = _mm256_or_si256(_mm256_or_si256(s0, s1), _mm256_or_si256(s2, s3));
    if (!_mm256_testz_si256(any, any)) [[unlikely]] {
      c0 = codes16_f32(p, scale, counts);
      c1 = codes16_f32(p + 16, scale, counts);
      c2 = codes16_f32(p + 32, scale, counts);
      c3 = codes16_f32(p + 48, scale, counts);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64 * half), pack32_bytes16(c0, c1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64 * half + 32), pack32_bytes16(c2, c3));
  }
}

// The codes of 128 values at s into d: fast_codes128 where it applies (no NaN, l.fast) and gives
// every code (with streaming stores where kStream), else cast_128 (float32 lanes for all of them
// where fast_codes128 fell short).
template <bool kStream = false>
__attribute__((target("avx2"), always_inline)) inline void cast_tile(const uint16_t* s, uint8_t* d,
                                                                     bool nan, const Lanes& l,
                                                                     LaneCounts& counts) {
  if (!nan && l.fast) [[likely]] {
    if (fast_codes128<kStream>(s, _mm256_set1_epi16(l.fast_rebias), d)) [[likely]]
      return;
    cast_128_f32(s, d, _mm256_set1_ps(l.scale), counts);
    return;
  }
  cast_128(s, d, nan, l, counts);
}

}  // namespace

__attribute__((target("avx2"))) void block_tiles_bf16_e4m3_avx2(const uint16_t* src,
                                                                int64_t src_step, int64_t count,
                                                                uint8_t* dst, int64_t dst_step,
                                                                float* scale_inv, int64_t inv_step,
                                                                float for_inf, bool power_2,
                                                                float epsilon, BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  // The largest amax and amax * scale over the tiles, in vector lanes (block_scales8).
  __m256 amax_acc = _mm256_setzero_ps();
  __m256d top_acc = _mm256_setzero_pd();
  // Tiles a batch at a time: the maxima of all (a tile holding a NaN found again, each NaN
  // passed over), then their scales eight at a time in float32 lanes, then the casts from L1.
  constexpr int64_t kBatch = 16;
  bool nan[kBatch];
  alignas(32) float amax[kBatch], scale_of[kBatch], inv[kBatch];
  alignas(32) int32_t exponent[kBatch], fast[kBatch];
  for (int64_t t0 = 0; t0 < count; t0 += kBatch) {
    const int64_t n = std::min(kBatch, count - t0);
    for (int64_t k = 0; k < n; ++k) {
      const uint16_t* s = src + (t0 + k) * src_step;
      const uint16_t bits = max_bits_128(s);
      nan[k] = bits > 0x7F80;
      amax[k] = bf16_bits_to_float(nan[k] ? max_magnitude_128(s) : bits);
    }
    for (int64_t k = n; k < kBatch; ++k) amax[k] = 0.0f;  // scale 1, nothing measured
    for (int h = 0; h < kBatch; h += 8) {
      __m256i ok;
      const __m256i e =
          block_scales8(_mm256_load_ps(amax + h), _mm256_setzero_si256(), for_inf, power_2, epsilon,
                        scale_of + h, inv + h, amax_acc, top_acc, ok);
      _mm256_store_si256(reinterpret_cast<__m256i*>(exponent + h), e);
      _mm256_store_si256(reinterpret_cast<__m256i*>(fast + h),
                         _mm256_and_si256(ok, _mm256_cmpgt_epi32(_mm256_set1_epi32(120), e)));
    }
    for (int64_t k = 0; k < n; ++k) scale_inv[(t0 + k) * inv_step] = inv[k];
    for (int64_t k = 0; k < n; ++k) {
      const uint16_t* s = src + (t0 + k) * src_step;
      uint8_t* d = dst + (t0 + k) * dst_step;
      if (fast[k] && !nan[k]) [[likely]] {
        const __m256i rb = _mm256_set1_epi16(static_cast<int16_t>(((120 - exponent[k]) << 7) - 6));
        if (fast_codes128(s, rb, d)) [[likely]]
          continue;
        cast_128_f32(s, d, _mm256_set1_ps(scale_of[k]), counts);
      } else {
        cast_128(s, d, nan[k], lanes_of(amax[k], scale_of[k]), counts);
      }
    }
  }
  finish_columns(amax_acc, top_acc, st.amax, 0.0, counts, st);
}

namespace {

// The group walk's lanes (fp8_block_groups.h) for bfloat16: a block's folded bits are sixteen
// lanes of 16-bit magnitude bits, its casts cast_tile's.
struct Bf16Groups {
  using Src = uint16_t;
  using Top = __m256i;
  using Counts = LaneCounts;
  using Lanes = detail::Lanes;
  static constexpr uint32_t kInfBits = 0x7F80;
  [[gnu::always_inline]] static __m256i fold(const uint16_t* s, __m256i top) {
    const __m256i abs = _mm256_set1_epi16(0x7FFF);
    __m256i b1 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int v = 0; v < 8; v += 2) {
      // Magnitude bits are at most 0x7FFF: a signed maximum orders them.
      top = _mm256_max_epi16(top, _mm256_and_si256(load16(s + 16 * v), abs));
      b1 = _mm256_max_epi16(b1, _mm256_and_si256(load16(s + 16 * v + 16), abs));
    }
    return _mm256_max_epi16(top, b1);
  }
  [[gnu::always_inline]] static uint32_t top_bits(__m256i top) {
    const __m128i m = _mm_max_epi16(_mm256_castsi256_si128(top), _mm256_extracti128_si256(top, 1));
    const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
    return static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
  }
  static float amax_of(uint32_t bits) { return bf16_bits_to_float(static_cast<uint16_t>(bits)); }
  static Lanes lanes_of(float amax, float scale) { return detail::lanes_of(amax, scale); }
  template <bool kStream>
  [[gnu::always_inline]] static void cast(const uint16_t* p, uint8_t* d, const Lanes& l,
                                          LaneCounts& counts) {
    cast_tile<kStream>(p, d, false, l, counts);
  }
  // Each row's amax with the NaN passed over, then the casts, a row holding a NaN through
  // float32 lanes.
  static void nan_block(const uint16_t* src, int64_t ld, int64_t rows, uint8_t* dst, int64_t ldd,
                        float* scale_inv, float for_inf, bool power_2, float epsilon,
                        float& amax_max, double& top_max, LaneCounts& counts) {
    bool nan[kBlockLen];
    float amax = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t bits = max_bits_128(src + r * ld);
      nan[r] = bits > 0x7F80;
      amax = std::max(amax, bf16_bits_to_float(nan[r] ? max_magnitude_128(src + r * ld) : bits));
    }
    const Lanes lanes = groups::block_lanes<Bf16Groups>(amax, for_inf, power_2, epsilon, scale_inv,
                                                        amax_max, top_max);
    for (int64_t r = 0; r < rows; ++r)
      cast_tile(src + r * ld, dst + r * ldd, nan[r], lanes, counts);
  }
};

}  // namespace

void tile_bf16_e4m3_avx2(const uint16_t* s, uint8_t* d, float amax, float scale,
                         BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  cast_tile(s, d, false, lanes_of(amax, scale), counts);
  groups::add_counts(counts, st);
}

void nan_block_bf16_e4m3_avx2(const uint16_t* src, int64_t ld, int64_t rows, uint8_t* dst,
                              int64_t ldd, float* scale_inv, float for_inf, bool power_2,
                              float epsilon, float& amax_max, double& top_max, BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  Bf16Groups::nan_block(src, ld, rows, dst, ldd, scale_inv, for_inf, power_2, epsilon, amax_max,
                        top_max, counts);
  groups::add_counts(counts, st);
}

void block_groups_bf16_e4m3_avx2(const BlockGroup* groups, int64_t n, int64_t ld, int64_t ldd,
                                 float for_inf, bool power_2, float epsilon, bool stream,
                                 BlockCastStats& st) {
  groups::block_groups<Bf16Groups>(groups, n, ld, ldd, for_inf, power_2, epsilon, stream, st);
}

namespace {

// The codes of 32 bfloat16 values (h0, h1) into d in float32 lanes under each one's scale
// (scale_of, 32 floats): satfinite_codes of f32(x * scale), the saturated and flushed elements
// counted.
__attribute__((target("avx2"), always_inline)) inline void slow_codes32(__m256i h0, __m256i h1,
                                                                        const float* scale_of,
                                                                        uint8_t* d,
                                                                        LaneCounts& counts) {
  __m256i c[4];
  for (int q = 0; q < 4; ++q) {
    const __m256i h = q < 2 ? h0 : h1;
    c[q] = codes8_f32(q % 2 ? _mm256_extracti128_si256(h, 1) : _mm256_castsi256_si128(h),
                      _mm256_load_ps(scale_of + 8 * q), counts);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), pack32_bytes(c[0], c[1], c[2], c[3]));
}

// The column walk's lanes (fp8_block_columns.h) for bfloat16 on AVX2: 16 columns a vector; the
// fast codes are codes16_pow2_in_range's, in 16-bit lanes under each column's rebias.
struct Bf16Avx2 {
  using Src = uint16_t;
  using Bits = uint16_t;
  using Rebias = uint16_t;
  static constexpr Bits kAbs = 0x7FFF, kInfBits = 0x7F80;
  static constexpr int64_t kVec = 16;
  struct Acc {
    __m256 amax;
    __m256d top;
  };
  using Counts = LaneCounts;

  static float amax_of(Bits bits) { return bf16_bits_to_float(bits); }
  // Magnitude bits are at most 0x7FFF: a signed maximum orders them.
  using Vec = __m256i;
  [[gnu::always_inline]] static Vec magnitude(const uint16_t* p) {
    return _mm256_and_si256(load16(p), _mm256_set1_epi16(kAbs));
  }
  [[gnu::always_inline]] static Vec max(Vec a, Vec b) { return _mm256_max_epi16(a, b); }
  [[gnu::always_inline]] static void max_into(uint16_t* top, Vec m) {
    auto* t = reinterpret_cast<__m256i*>(top);
    _mm256_store_si256(t, _mm256_max_epi16(_mm256_load_si256(t), m));
  }
  // The scales 16 at a time (block_scales8 twice). A column's rebias is ((120 - e) << 7) - 6
  // where the fast codes apply and e < 120, else 0xFFFF, which makes every nonzero value of the
  // column take the float32 lanes (codes32).
  [[gnu::always_inline]] static void scales32(const uint16_t* top, float for_inf, bool power_2,
                                              float epsilon, float* scale_of, float* inv,
                                              uint16_t* rebias, Acc& acc, uint32_t& nan) {
    for (int c = 0; c < 32; c += 16) {
      const __m256i t = _mm256_load_si256(reinterpret_cast<const __m256i*>(top + c));
      __m256i rb[2];
      for (int h = 0; h < 2; ++h) {
        const __m256i b32 =
            _mm256_cvtepu16_epi32(h ? _mm256_extracti128_si256(t, 1) : _mm256_castsi256_si128(t));
        const __m256i nan_lanes = _mm256_cmpgt_epi32(b32, _mm256_set1_epi32(kInfBits));
        const __m256 amax = _mm256_castsi256_ps(_mm256_slli_epi32(b32, 16));
        __m256i ok;
        const __m256i e =
            block_scales8(amax, nan_lanes, for_inf, power_2, epsilon, scale_of + c + 8 * h,
                          inv + c + 8 * h, acc.amax, acc.top, ok);
        nan |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(nan_lanes)))
               << (c + 8 * h);
        ok = _mm256_and_si256(ok, _mm256_cmpgt_epi32(_mm256_set1_epi32(120), e));
        const __m256i r =
            _mm256_sub_epi32(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(120), e), 7),
                             _mm256_set1_epi32(6));
        // -1 packs to 0xFFFF.
        rb[h] = _mm256_blendv_epi8(_mm256_set1_epi32(-1), r, ok);
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(rebias + c),
                         _mm256_permute4x64_epi64(_mm256_packs_epi32(rb[0], rb[1]), 0xD8));
    }
  }
  // The codes of 32 values in 16-bit lanes under each column's rebias rb: y = |h| - rb with
  // unsigned saturation is |h| - ((120 - e) << 7) + 6 (the product's bits rebiased to E4M3's,
  // plus 6), and avg(y, bit 4 of |h|) >> 3 is (y - 6 + 7 + lsb) >> 4, codes16_pow2_in_range's
  // code rounded to nearest even (bit 4 of |h| is the product's, rb + 6 being a multiple of 128).
  // A value whose product lies below E4M3's smallest normal gets a code below 8 (a product in
  // [2^-7 * 1.9375, 2^-6) rounds to 8, the smallest normal, which is its code), and so does every
  // nonzero value of a column whose rebias is 0xFFFF; 0 gets 0. So a step needs the float32
  // lanes where a nonzero |h| has a code below 8: min(packs(|h|), 8) less the code, with unsigned
  // saturation, is nonzero there (packs keeps every |h| of 8 or more at 8 or more).
  template <bool kStream>
  [[gnu::always_inline]] static bool codes32(const uint16_t* p, const uint16_t* rebias,
                                             uint8_t* d) {
    const __m256i abs = _mm256_set1_epi16(kAbs), one = _mm256_set1_epi16(1);
    const __m256i h0 = load16(p), h1 = load16(p + 16);
    const __m256i a0 = _mm256_and_si256(h0, abs), a1 = _mm256_and_si256(h1, abs);
    const __m256i y0 =
        _mm256_subs_epu16(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(rebias)));
    const __m256i y1 =
        _mm256_subs_epu16(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(rebias + 16)));
    const __m256i r0 = _mm256_avg_epu16(y0, _mm256_and_si256(_mm256_srli_epi16(a0, 4), one));
    const __m256i r1 = _mm256_avg_epu16(y1, _mm256_and_si256(_mm256_srli_epi16(a1, 4), one));
    // Bytes in packs' order (the halves of the two vectors interleaved): the codes, h's signs
    // (packs keeps a negative h negative), |h| at least 8 where it is.
    const __m256i code = _mm256_packus_epi16(_mm256_srli_epi16(r0, 3), _mm256_srli_epi16(r1, 3));
    const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(-128));
    const __m256i low =
        _mm256_subs_epu8(_mm256_min_epu8(_mm256_packs_epi16(a0, a1), _mm256_set1_epi8(8)), code);
    columns::put32<kStream>(d, _mm256_permute4x64_epi64(_mm256_or_si256(code, sign), 0xD8));
    return _mm256_testz_si256(low, low);
  }
  [[gnu::always_inline]] static void codes32_f32(const uint16_t* p, const float* scale_of,
                                                 uint8_t* d, LaneCounts& counts) {
    slow_codes32(load16(p), load16(p + 16), scale_of, d, counts);
  }
  [[gnu::always_inline]] static void finish(const Acc& acc, const LaneCounts& counts,
                                            float amax_max, double top_max, BlockCastStats& st) {
    finish_columns(acc.amax, acc.top, amax_max, top_max, counts, st);
  }
};

}  // namespace

void column_codes32_bf16_f32_lanes(const uint16_t* p, const float* scale_of, uint8_t* d,
                                   BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  slow_codes32(load16(p), load16(p + 16), scale_of, d, counts);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}

void column_tiles_bf16_e4m3_avx2(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols,
                                 uint8_t* dst, int64_t ldd, float* scale_inv, float for_inf,
                                 bool power_2, float epsilon, const uint16_t* next,
                                 int64_t next_bytes, bool stream, BlockCastStats& st) {
  columns::column_tiles<Bf16Avx2>(src, ld, rows, cols, dst, ldd, scale_inv, for_inf, power_2,
                                  epsilon, next, next_bytes, stream, st);
}

}  // namespace mantissa::kernels::fp8::detail

#pragma GCC pop_options
