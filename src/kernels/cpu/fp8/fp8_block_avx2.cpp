// The block recipe's 1x128 tiles of bfloat16 cast to E4M3 on AVX2 (fp8_block.h,
// detail::block_tiles_bf16_e4m3_avx2): each tile's amax from the integer maximum of its
// magnitude bits, its scale, then its 128 codes from the values still in L1, sixteen tiles at a
// time (their maxima, then their scales, then their casts, so that the scalar work of one tile
// does not wait on the last). Under a power-of-2 scale (the recipe's default) with the tile's
// amax * scale within E4M3's range, the codes come sixteen a vector from 16-bit lanes
// (fp8_codes_avx2.h: codes16_pow2_in_range, or codes16_pow2 under the rare scales above 2^120;
// an exponent add and an integer rounding, nothing saturates or flushes); half a tile holding a
// value whose code is subnormal or flushed, and every tile under another scale or holding a NaN
// or an inf, takes float32 lanes (satfinite_codes) with the saturated and flushed counts kept in
// vector lanes across all the tiles of a call. 128x128 blocks are cast a group side by side
// (detail::blocks_128x128_bf16_e4m3_avx2): their maxima in one pass over the group's rows, then
// the casts while the rows are in cache. 128x1 tiles of the columns are cast a band of 128 rows
// at a time (detail::column_tiles_bf16_e4m3_avx2): the columns' maxima elementwise over the
// rows, then 32 columns' codes a step under per-column constants, row by row in x's layout. The
// same amax, scale, codes and counts as the per-tile calls of the delayed-scaling cast
// (fp8_cast.h) that the other sources and formats take.
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

// The column walk takes this file's target (fp8_block_columns.h).
#pragma GCC push_options
#pragma GCC target("avx2")
#include "kernels/cpu/fp8/fp8_block_columns.h"

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

// The constants of one scale's cast, kept as scalars (a batch of tiles holds one each) and
// broadcast by the cast: the scale for float32 lanes and, where the 16-bit lanes apply (a
// power-of-2 scale 2^e, amax * scale within E4M3's range), codes16_pow2's e << 7 and normal_from,
// and codes16_pow2_in_range's rebias where e <= 120.
struct Lanes {
  float scale;
  int16_t exponent_add, normal_from, rebias;
  bool sixteen, in_range;
};

inline Lanes lanes_of(float amax, float scale) {
  Lanes l{scale, 0, 0, 0, false, false};
  int e = 0;
  if (!pow2_exponent(scale, &e) || !(amax * scale <= kE4m3Max)) return l;
  l.exponent_add = static_cast<int16_t>(e * 128);
  l.normal_from = static_cast<int16_t>(std::max((121 - e) * 128, 0x80));
  l.rebias = static_cast<int16_t>(std::max(120 - e, 0) * 128);
  l.sixteen = true;
  l.in_range = e <= 120;
  return l;
}

// The codes of 128 bfloat16 values at s into d. In 16-bit lanes where they apply and no value is
// a NaN: every product a normal E4M3 value or zero, else (rarely) half of them through float32
// lanes. Otherwise all through float32 lanes.
__attribute__((target("avx2"), always_inline)) inline void cast_128(const uint16_t* s, uint8_t* d,
                                                                    bool nan, const Lanes& l,
                                                                    LaneCounts& counts) {
  const __m256 scale = _mm256_set1_ps(l.scale);
  if (nan || !l.sixteen) {
    for (int q = 0; q < 4; ++q) {
      const __m256i lo = codes16_f32(s + 32 * q, scale, counts);
      const __m256i hi = codes16_f32(s + 32 * q + 16, scale, counts);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32 * q), pack32_bytes16(lo, hi));
    }
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

}  // namespace

__attribute__((target("avx2"))) void block_tiles_bf16_e4m3_avx2(const uint16_t* src,
                                                                int64_t src_step, int64_t count,
                                                                uint8_t* dst, int64_t dst_step,
                                                                float* scale_inv, int64_t inv_step,
                                                                float for_inf, bool power_2,
                                                                float epsilon, BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  // The largest amax and amax * scale in locals (st's fields would be reloaded after each
  // scale_inv store, which the compiler cannot prove apart). Division by fp8_max keeps the order
  // of the products, so the largest peak is the largest product's.
  float amax_max = st.amax;
  double top_max = 0.0;
  // Tiles a batch at a time: the maxima of all, then their scales (scalar chains of a division
  // each, independent of one another), then the casts from L1.
  constexpr int64_t kBatch = 16;
  uint16_t bits[kBatch];
  Lanes lanes[kBatch];
  for (int64_t t0 = 0; t0 < count; t0 += kBatch) {
    const int64_t n = std::min(kBatch, count - t0);
    for (int64_t k = 0; k < n; ++k) bits[k] = max_bits_128(src + (t0 + k) * src_step);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t t = t0 + k;
      const bool nan = bits[k] > 0x7F80;
      const float amax = bf16_bits_to_float(nan ? max_magnitude_128(src + t * src_step) : bits[k]);
      const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
      scale_inv[t * inv_step] = block_scale_inverse(scale);
      amax_max = std::max(amax_max, amax);
      fold_top(amax, scale, top_max);
      lanes[k] = lanes_of(amax, scale);
    }
    for (int64_t k = 0; k < n; ++k)
      cast_128(src + (t0 + k) * src_step, dst + (t0 + k) * dst_step, bits[k] > 0x7F80, lanes[k],
               counts);
  }
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / kE4m3Max);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}

__attribute__((target("avx2"))) void block_128x128_bf16_e4m3_avx2(
    const uint16_t* src, int64_t ld, int64_t rows, uint8_t* dst, int64_t ldd, float* scale_inv,
    float for_inf, bool power_2, float epsilon, BlockCastStats& st) {
  bool nan[kBlockLen];
  float amax = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t bits = max_bits_128(src + r * ld);
    nan[r] = bits > 0x7F80;
    amax = std::max(amax, bf16_bits_to_float(nan[r] ? max_magnitude_128(src + r * ld) : bits));
  }
  const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
  *scale_inv = block_scale_inverse(scale);
  const Lanes lanes = lanes_of(amax, scale);
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int64_t r = 0; r < rows; ++r) cast_128(src + r * ld, dst + r * ldd, nan[r], lanes, counts);
  double top_max = 0.0;
  fold_top(amax, scale, top_max);
  st.amax = std::max(st.amax, amax);
  st.peak = std::max(st.peak, top_max / kE4m3Max);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}

__attribute__((target("avx2"))) void blocks_128x128_bf16_e4m3_avx2(
    const uint16_t* src, int64_t ld, int64_t rows, int64_t count, uint8_t* dst, int64_t ldd,
    float* scale_inv, float for_inf, bool power_2, float epsilon, const uint16_t* next,
    int64_t next_bytes, BlockCastStats& st) {
  constexpr int64_t kMaxCount = kBlockGroupBytes / (2 * kBlockLen);
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  // The largest magnitude bits of each block (a NaN's above 0x7F80), a lane for each of 16
  // columns of the block's 128: one read of the rows in memory order.
  __m256i top[kMaxCount];
  for (int64_t j = 0; j < count; ++j) top[j] = _mm256_setzero_si256();
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = src + r * ld;
    for (int64_t j = 0; j < count; ++j) {
      const uint16_t* s = row + j * kBlockLen;
      __m256i b0 = top[j], b1 = _mm256_setzero_si256();
      for (int v = 0; v < 8; v += 2) {
        // Magnitude bits are at most 0x7FFF: a signed maximum orders them.
        b0 = _mm256_max_epi16(
            b0, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * v)),
                                 abs));
        b1 = _mm256_max_epi16(
            b1, _mm256_and_si256(
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * v + 16)), abs));
      }
      top[j] = _mm256_max_epi16(b0, b1);
    }
  }
  Lanes lanes[kMaxCount];
  bool nan[kMaxCount];
  double top_max = 0.0;
  float amax_max = st.amax;
  for (int64_t j = 0; j < count; ++j) {
    const __m128i m =
        _mm_max_epi16(_mm256_castsi256_si128(top[j]), _mm256_extracti128_si256(top[j], 1));
    const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
    const auto bits = static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
    nan[j] = bits > 0x7F80;
    if (nan[j]) continue;  // the block's rows are found again, each NaN passed over, below
    const float amax = bf16_bits_to_float(bits);
    const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
    scale_inv[j] = block_scale_inverse(scale);
    amax_max = std::max(amax_max, amax);
    fold_top(amax, scale, top_max);
    lanes[j] = lanes_of(amax, scale);
  }
  // The casts, again in memory order: the rows are still in L2 or L3. The next group's rows are
  // fetched into L2 meanwhile, so that its amax pass does not wait on memory with nothing to do.
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  const int64_t ahead = next != nullptr ? next_bytes : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* line = reinterpret_cast<const char*>(next + r * ld);
    if (ahead > 0) touch_pages(line, ahead);
    for (int64_t j = 0; j < count; ++j) {
      // The next group's lines at the pace of the casts (kBlockGroupBytes of each row over
      // the group's `count` blocks).
      for (int64_t b = j * 256; b < std::min(ahead, (j + 1) * 256); b += 64)
        _mm_prefetch(line + b, _MM_HINT_T1);
      if (!nan[j])
        cast_128(src + r * ld + j * kBlockLen, dst + r * ldd + j * kBlockLen, false, lanes[j],
                 counts);
    }
  }
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / kE4m3Max);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
  for (int64_t j = 0; j < count; ++j)
    if (nan[j])
      block_128x128_bf16_e4m3_avx2(src + j * kBlockLen, ld, rows, dst + j * kBlockLen, ldd,
                                   scale_inv + j, for_inf, power_2, epsilon, st);
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
  [[gnu::always_inline]] static void fold(uint16_t* top, const uint16_t* p) {
    auto* t = reinterpret_cast<__m256i*>(top);
    _mm256_store_si256(t, _mm256_max_epi16(_mm256_load_si256(t),
                                           _mm256_and_si256(load16(p), _mm256_set1_epi16(kAbs))));
  }
  [[gnu::always_inline]] static void fold2(uint16_t* top, const uint16_t* p, const uint16_t* q) {
    const __m256i abs = _mm256_set1_epi16(kAbs);
    auto* t = reinterpret_cast<__m256i*>(top);
    const __m256i m =
        _mm256_max_epi16(_mm256_and_si256(load16(p), abs), _mm256_and_si256(load16(q), abs));
    _mm256_store_si256(t, _mm256_max_epi16(_mm256_load_si256(t), m));
  }
  // The scales 16 at a time (block_scales8 twice); the rebias is (120 - e) << 7.
  [[gnu::always_inline]] static bool scales32(const uint16_t* top, float for_inf, bool power_2,
                                              float epsilon, float* scale_of, float* inv,
                                              uint16_t* rebias, Acc& acc, uint32_t& nan) {
    unsigned fast = 0;
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
        const int at = c + 8 * h;
        fast |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok))) << at;
        nan |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(nan_lanes))) << at;
        rb[h] = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(120), e), 7);
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(rebias + c),
                         _mm256_permute4x64_epi64(_mm256_packs_epi32(rb[0], rb[1]), 0xD8));
    }
    return fast == 0xFFFFFFFFu;
  }
  // codes16_pow2_in_range under each column's rebias; a value's code is subnormal or flushed
  // where 0 < |h| < normal_from = rebias + 128: |h| - 1 below rebias + 127 (0 wraps to 0xFFFF).
  [[gnu::always_inline]] static bool codes32(const uint16_t* p, const uint16_t* rebias,
                                             uint8_t* d) {
    const __m256i h0 = load16(p), h1 = load16(p + 16);
    const __m256i rb0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(rebias));
    const __m256i rb1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(rebias + 16));
    __m256i unused = _mm256_setzero_si256();
    const __m256i c0 = codes16_pow2_in_range<3, 7>(h0, rb0, &unused);
    const __m256i c1 = codes16_pow2_in_range<3, 7>(h1, rb1, &unused);
    const __m256i abs = _mm256_set1_epi16(kAbs), one = _mm256_set1_epi16(1);
    const __m256i below = _mm256_set1_epi16(127);
    const __m256i d0 = _mm256_subs_epu16(_mm256_add_epi16(rb0, below),
                                         _mm256_sub_epi16(_mm256_and_si256(h0, abs), one));
    const __m256i d1 = _mm256_subs_epu16(_mm256_add_epi16(rb1, below),
                                         _mm256_sub_epi16(_mm256_and_si256(h1, abs), one));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), pack32_bytes16(c0, c1));
    const __m256i any = _mm256_or_si256(d0, d1);
    return _mm256_testz_si256(any, any);
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
                                 int64_t next_bytes, BlockCastStats& st) {
  columns::column_tiles<Bf16Avx2>(src, ld, rows, cols, dst, ldd, scale_inv, for_inf, power_2,
                                  epsilon, next, next_bytes, st);
}

}  // namespace mantissa::kernels::fp8::detail

#pragma GCC pop_options
