// The block recipe's float32 casts to E4M3 on AVX2 (fp8_block.h): 1x128 tiles
// (detail::block_tiles_f32_e4m3_avx2), 128x128 blocks a group side by side
// (detail::block_groups_f32_e4m3_avx2, the group walk of fp8_block_groups.h) and 128x1 tiles of the
// columns a band of 128 rows at a time (detail::column_tiles_f32_e4m3_avx2), the float32
// counterparts of fp8_block_avx2.cpp's bfloat16 bodies. A tile's amax is the integer maximum of its
// magnitude bits (a NaN's lie above infinity's), its scale block_scale's, and its codes come from
// the values still in L1 or L2. Under a power-of-2 scale 2^e (the recipe's default) with the tile's
// amax * 2^e within E4M3's range and e <= 120, a normal product's code is |x|'s bits less (120 - e)
// << 23, rounded to nearest even on the 20 dropped bits by integer adds (x * 2^e is exact: only the
// exponent moves); nothing saturates or flushes there. A tile holding a value whose code would be
// subnormal or flushed, and every tile under another scale or holding a NaN or an inf, takes the
// float32 lanes of the delayed-scaling cast (satfinite_codes of f32(x * scale)) with the
// saturated and flushed counts kept in vector lanes across the call. The same amax, scale, codes
// and counts as the per-tile calls of the delayed-scaling cast (fp8_cast.h).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_block_scales_avx2.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/float8.h"

// The column and group walks take this file's target (fp8_block_columns.h, fp8_block_groups.h).
#pragma GCC push_options
#pragma GCC target("avx2")
#include "kernels/cpu/fp8/fp8_block_columns.h"
#include "kernels/cpu/fp8/fp8_block_groups.h"

namespace mantissa::kernels::fp8::detail {
namespace {

constexpr float kE4m3Max = Float8E4M3::kMax;
constexpr uint32_t kInfBits = 0x7F800000u;

__attribute__((target("avx2"))) inline __m256i load8i(const float* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The largest of eight 32-bit lanes (signed).
__attribute__((target("avx2"))) inline uint32_t lanes_max(__m256i v) {
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
}

// The largest magnitude bits among 128 float32 values, a NaN's included (above kInfBits).
__attribute__((target("avx2"))) inline __m256i max_bits_lanes_128(const float* s, __m256i b0) {
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i b1 = _mm256_setzero_si256();
  // Unrolled: the loop's own add, compare and branch were a third of the pass's instructions.
#pragma GCC unroll 8
  for (int j = 0; j < 16; j += 2) {
    // Magnitude bits are at most 0x7FFFFFFF: a signed maximum orders them.
    b0 = _mm256_max_epi32(b0, _mm256_and_si256(load8i(s + 8 * j), abs));
    b1 = _mm256_max_epi32(b1, _mm256_and_si256(load8i(s + 8 * j + 8), abs));
  }
  return _mm256_max_epi32(b0, b1);
}

// The largest magnitude bits among 128 float32 values, NaN passed over.
__attribute__((target("avx2"))) inline uint32_t max_magnitude_128(const float* s) {
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i above_inf = _mm256_set1_epi32(static_cast<int>(kInfBits + 1));
  __m256i best = _mm256_setzero_si256();
  for (int j = 0; j < 16; ++j) {
    const __m256i a = _mm256_and_si256(load8i(s + 8 * j), abs);
    // NaNs (above inf) become 0.
    best = _mm256_max_epi32(best, _mm256_and_si256(a, _mm256_cmpgt_epi32(above_inf, a)));
  }
  return lanes_max(best);
}

// The constants of one scale's cast: the scale for float32 lanes and, where the integer codes
// apply (scale 2^e with e <= 120, amax * scale within E4M3's range), rebias = ((120 - e) << 23)
// less the rounding's 2^19 - 1 (int_codes32).
struct Lanes {
  float scale;
  int32_t rebias;
  bool fast;
};

inline Lanes lanes_of(float amax, float scale) {
  Lanes l{scale, 0, false};
  int e = 0;
  if (!pow2_exponent(scale, &e) || e > 120 || !(amax * scale <= kE4m3Max)) return l;
  l.rebias = static_cast<int32_t>(static_cast<uint32_t>(120 - e) << 23) - ((1 << 19) - 1);
  l.fast = true;
  return l;
}

// The codes of 32 values at s into d through float32 lanes: satfinite_codes of f32(x * scale),
// the saturated and flushed elements counted.
__attribute__((target("avx2"), always_inline)) inline void cast_32_f32(const float* s, uint8_t* d,
                                                                       __m256 scale,
                                                                       LaneCounts& counts) {
  const __m256 max = _mm256_set1_ps(kE4m3Max);
  __m256i c[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 x = _mm256_loadu_ps(s + 8 * k);
    c[k] = counted_codes<3, 7, 0x7e>(x, _mm256_mul_ps(x, scale), max, counts);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), pack32_bytes(c[0], c[1], c[2], c[3]));
}

// The codes of 32 float32 values at p under the integer constants (rb[q], each lane's rebias
// ((120 - e) << 23) - (2^19 - 1), for values 8q to 8q + 7), in element order: |x|'s bits less the
// rebias plus bit 20 of |x| (the product's lowest kept bit), >> 20, is the product's code
// rounded to nearest even where the product is a normal E4M3 value. Below E4M3's normal range
// the code lies under 8 (negative under 2^-7, 0 after the unsigned pack), but for a product in
// [2^-7 * 1.9375, 2^-6) whose code is 8, the smallest normal; 0 gets 0. `low` is or-ed with a
// nonzero byte where a nonzero value has a code below 8, whose code must come from float32
// lanes: min(packs(|x|), 8) less the code with unsigned saturation (the signed packs keep an |x|
// of 8 or more at 8 or more, and 1 to 7 as they are). A rebias of INT32_MAX gives every value a
// code of 0 (and every nonzero one to the float32 lanes).
__attribute__((target("avx2"), always_inline)) inline __m256i int_codes32(const float* p,
                                                                          const __m256i* rb,
                                                                          __m256i& low) {
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), bit20 = _mm256_set1_epi32(1 << 20);
  __m256i x[4], a[4], code[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    x[q] = load8i(p + 8 * q);
    a[q] = _mm256_and_si256(x[q], abs);
    // -1 where bit 20 is set (a compare, not a shift: Zen 4 shifts and shuffles share two pipes).
    const __m256i lsb = _mm256_cmpeq_epi32(_mm256_and_si256(a[q], bit20), bit20);
    code[q] = _mm256_srai_epi32(_mm256_sub_epi32(_mm256_sub_epi32(a[q], rb[q]), lsb), 20);
  }
  // Bytes in the packs' order (values 0-3 of each vector, then 4-7): the codes (0 to 0x7E), x's
  // signs (the signed packs keep a negative x negative), |x| at least 8 where it is.
  const __m256i codes = _mm256_packus_epi16(_mm256_packus_epi32(code[0], code[1]),
                                            _mm256_packus_epi32(code[2], code[3]));
  const __m256i signs =
      _mm256_packs_epi16(_mm256_packs_epi32(x[0], x[1]), _mm256_packs_epi32(x[2], x[3]));
  const __m256i mags =
      _mm256_packs_epi16(_mm256_packs_epi32(a[0], a[1]), _mm256_packs_epi32(a[2], a[3]));
  low = _mm256_or_si256(low, _mm256_subs_epu8(_mm256_min_epu8(mags, _mm256_set1_epi8(8)), codes));
  const __m256i bytes =
      _mm256_or_si256(codes, _mm256_and_si256(signs, _mm256_set1_epi8(static_cast<char>(0x80))));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The codes of 128 float32 values at s into d: through the integer codes where they apply and no
// value is a NaN (with streaming stores where kStream, d 32-byte aligned), through float32 lanes
// where one of the values is not a normal product and where they do not apply.
template <bool kStream = false>
__attribute__((target("avx2"), always_inline)) inline void cast_128(const float* s, uint8_t* d,
                                                                    bool nan, const Lanes& l,
                                                                    LaneCounts& counts) {
  const __m256 scale = _mm256_set1_ps(l.scale);
  if (!nan && l.fast) [[likely]] {
    const __m256i rb = _mm256_set1_epi32(l.rebias);
    const __m256i rebias[4] = {rb, rb, rb, rb};
    __m256i low = _mm256_setzero_si256(), c[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) c[q] = int_codes32(s + 32 * q, rebias, low);
    // Else a value with a subnormal or flushed code, which the float32 lanes give with their
    // counts.
    if (_mm256_testz_si256(low, low)) [[likely]] {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) columns::put32<kStream>(d + 32 * q, c[q]);
      return;
    }
  }
  for (int q = 0; q < 4; ++q) cast_32_f32(s + 32 * q, d + 32 * q, scale, counts);
}

// One tile's amax from its magnitude bits' maximum (bits), a NaN's (above kInfBits) passed over.
inline float amax_of_bits(const float* s, uint32_t bits) {
  return std::bit_cast<float>(bits > kInfBits ? max_magnitude_128(s) : bits);
}

}  // namespace

__attribute__((target("avx2"))) void block_tiles_f32_e4m3_avx2(const float* src, int64_t src_step,
                                                               int64_t count, uint8_t* dst,
                                                               int64_t dst_step, float* scale_inv,
                                                               int64_t inv_step, float for_inf,
                                                               bool power_2, float epsilon,
                                                               BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  // The largest amax and amax * scale over the tiles, in vector lanes (block_scales8).
  __m256 amax_acc = _mm256_setzero_ps();
  __m256d top_acc = _mm256_setzero_pd();
  // Tiles a batch at a time: the maxima of all (a tile holding a NaN found again, each NaN
  // passed over), then their scales eight at a time in float32 lanes (a scalar chain of two
  // divisions a tile otherwise), then the casts from L1. Eight tiles (4 KiB, as the bfloat16
  // tiles' batch of sixteen): at 4096 x 4096 on one thread (Zen 4) 0.23 ns a value with 16
  // tiles (8 KiB) and 0.29-0.30 with 32 against 0.20 with 8, 0.21-0.28 with 4: the further the
  // maxima read ahead of the casts, the slower, as with every read ahead tried here.
  constexpr int64_t kBatch = 8;
  bool nan[kBatch];
  alignas(32) float amax[kBatch], scale_of[kBatch], inv[kBatch];
  alignas(32) int32_t rebias[kBatch], fast[kBatch];
  for (int64_t t0 = 0; t0 < count; t0 += kBatch) {
    const int64_t n = std::min(kBatch, count - t0);
    for (int64_t k = 0; k < n; ++k) {
      const float* s = src + (t0 + k) * src_step;
      const uint32_t bits = lanes_max(max_bits_lanes_128(s, _mm256_setzero_si256()));
      nan[k] = bits > kInfBits;
      amax[k] = amax_of_bits(s, bits);
    }
    for (int64_t k = n; k < kBatch; ++k) amax[k] = 0.0f;  // scale 1, nothing measured
    for (int h = 0; h < kBatch; h += 8) {
      __m256i ok;
      const __m256i e =
          block_scales8(_mm256_load_ps(amax + h), _mm256_setzero_si256(), for_inf, power_2, epsilon,
                        scale_of + h, inv + h, amax_acc, top_acc, ok);
      // lanes_of's rebias, ((120 - e) << 23) less the rounding's 2^19 - 1.
      const __m256i shift = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(120), e), 23);
      _mm256_store_si256(reinterpret_cast<__m256i*>(rebias + h),
                         _mm256_sub_epi32(shift, _mm256_set1_epi32((1 << 19) - 1)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(fast + h), ok);
    }
    for (int64_t k = 0; k < n; ++k) scale_inv[(t0 + k) * inv_step] = inv[k];
    for (int64_t k = 0; k < n; ++k) {
      const float* s = src + (t0 + k) * src_step;
      uint8_t* d = dst + (t0 + k) * dst_step;
      const Lanes l =
          fast[k] && !nan[k] ? Lanes{scale_of[k], rebias[k], true} : lanes_of(amax[k], scale_of[k]);
      cast_128(s, d, nan[k], l, counts);
    }
  }
  finish_columns(amax_acc, top_acc, st.amax, 0.0, counts, st);
}

namespace {

// The group walk's lanes (fp8_block_groups.h) for float32: a block's folded bits are eight lanes
// of 32-bit magnitude bits, its casts cast_128's.
struct F32Groups {
  using Src = float;
  using Top = __m256i;
  using Counts = LaneCounts;
  using Lanes = detail::Lanes;
  static constexpr uint32_t kInfBits = 0x7F800000u;
  [[gnu::always_inline]] static __m256i fold(const float* p, __m256i top) {
    return max_bits_lanes_128(p, top);
  }
  [[gnu::always_inline]] static uint32_t top_bits(__m256i top) { return lanes_max(top); }
  static float amax_of(uint32_t bits) { return std::bit_cast<float>(bits); }
  static Lanes lanes_of(float amax, float scale) { return detail::lanes_of(amax, scale); }
  template <bool kStream>
  [[gnu::always_inline]] static void cast(const float* p, uint8_t* d, const Lanes& l,
                                          LaneCounts& counts) {
    cast_128<kStream>(p, d, false, l, counts);
  }
  // Each row's amax with the NaN passed over, then the casts through float32 lanes.
  static void nan_block(const float* src, int64_t ld, int64_t rows, uint8_t* dst, int64_t ldd,
                        float* scale_inv, float for_inf, bool power_2, float epsilon,
                        float& amax_max, double& top_max, LaneCounts& counts) {
    uint32_t bits = 0;
    for (int64_t r = 0; r < rows; ++r) bits = std::max(bits, max_magnitude_128(src + r * ld));
    const float amax = std::bit_cast<float>(bits);
    const Lanes l = groups::block_lanes<F32Groups>(amax, for_inf, power_2, epsilon, scale_inv,
                                                   amax_max, top_max);
    for (int64_t r = 0; r < rows; ++r) cast_128(src + r * ld, dst + r * ldd, true, l, counts);
  }
};

}  // namespace

void block_groups_f32_e4m3_avx2(const BlockGroup* groups, int64_t n, int64_t ld, int64_t ldd,
                                float for_inf, bool power_2, float epsilon, bool stream,
                                BlockCastStats& st) {
  groups::block_groups<F32Groups>(groups, n, ld, ldd, for_inf, power_2, epsilon, stream, st);
}

namespace {

// The column walk's lanes (fp8_block_columns.h) for float32 on AVX2: 8 columns a vector; the fast
// codes are int_codes32's, the integer codes under each column's rebias.
struct F32Avx2 {
  using Src = float;
  using Bits = uint32_t;
  using Rebias = int32_t;
  static constexpr Bits kAbs = 0x7FFFFFFFu, kInfBits = 0x7F800000u;
  static constexpr int64_t kVec = 8;
  struct Acc {
    __m256 amax;
    __m256d top;
  };
  using Counts = LaneCounts;

  static float amax_of(Bits bits) { return std::bit_cast<float>(bits); }
  // Magnitude bits are at most 0x7FFFFFFF: a signed maximum orders them.
  using Vec = __m256i;
  [[gnu::always_inline]] static Vec magnitude(const float* p) {
    return _mm256_and_si256(load8i(p), _mm256_set1_epi32(kAbs));
  }
  [[gnu::always_inline]] static Vec max(Vec a, Vec b) { return _mm256_max_epi32(a, b); }
  [[gnu::always_inline]] static void max_into(uint32_t* top, Vec m) {
    auto* t = reinterpret_cast<__m256i*>(top);
    _mm256_store_si256(t, _mm256_max_epi32(_mm256_load_si256(t), m));
  }
  // The scales 8 at a time (block_scales8); the rebias is ((120 - e) << 23) less the rounding's
  // 2^19 - 1 where the integer codes apply, else INT32_MAX, which makes every nonzero value of
  // the column take the float32 lanes (int_codes32).
  [[gnu::always_inline]] static void scales32(const uint32_t* top, float for_inf, bool power_2,
                                              float epsilon, float* scale_of, float* inv,
                                              int32_t* rebias, Acc& acc, uint32_t& nan) {
    for (int c = 0; c < 32; c += 8) {
      const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(top + c));
      const __m256i nan_lanes =
          _mm256_cmpgt_epi32(b, _mm256_set1_epi32(static_cast<int>(kInfBits)));
      __m256i ok;
      const __m256i e = block_scales8(_mm256_castsi256_ps(b), nan_lanes, for_inf, power_2, epsilon,
                                      scale_of + c, inv + c, acc.amax, acc.top, ok);
      const __m256i shift = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(120), e), 23);
      const __m256i r = _mm256_sub_epi32(shift, _mm256_set1_epi32((1 << 19) - 1));
      _mm256_store_si256(reinterpret_cast<__m256i*>(rebias + c),
                         _mm256_blendv_epi8(_mm256_set1_epi32(INT32_MAX), r, ok));
      nan |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(nan_lanes))) << c;
    }
  }
  // int_codes32 under each column's rebias; a step takes the float32 lanes where a nonzero value
  // has a code below 8.
  template <bool kStream>
  [[gnu::always_inline]] static bool codes32(const float* p, const int32_t* rebias, uint8_t* d) {
    const auto* r = reinterpret_cast<const __m256i*>(rebias);
    const __m256i rb[4] = {_mm256_load_si256(r), _mm256_load_si256(r + 1), _mm256_load_si256(r + 2),
                           _mm256_load_si256(r + 3)};
    __m256i low = _mm256_setzero_si256();
    columns::put32<kStream>(d, int_codes32(p, rb, low));
    return _mm256_testz_si256(low, low);
  }
  [[gnu::always_inline]] static void codes32_f32(const float* p, const float* scale_of, uint8_t* d,
                                                 LaneCounts& counts) {
    column_codes32_f32_lanes(p, scale_of, d, counts);
  }
  [[gnu::always_inline]] static void finish(const Acc& acc, const LaneCounts& counts,
                                            float amax_max, double top_max, BlockCastStats& st) {
    finish_columns(acc.amax, acc.top, amax_max, top_max, counts, st);
  }
};

}  // namespace

void column_tiles_f32_e4m3_avx2(const float* src, int64_t ld, int64_t rows, int64_t cols,
                                uint8_t* dst, int64_t ldd, float* scale_inv, float for_inf,
                                bool power_2, float epsilon, const float* next, int64_t next_bytes,
                                bool stream, BlockCastStats& st) {
  columns::column_tiles<F32Avx2>(src, ld, rows, cols, dst, ldd, scale_inv, for_inf, power_2,
                                 epsilon, next, next_bytes, stream, st);
}

}  // namespace mantissa::kernels::fp8::detail

#pragma GCC pop_options
