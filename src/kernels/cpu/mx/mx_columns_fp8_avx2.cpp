// AVX2 (+FMA, F16C) bodies of the MX casts to FP8 (E4M3, E5M2) with blocks along the columns
// (mx_quantize_columns), which the AVX-512 level runs too: a band of 32 rows read as it lies
// (mx_columns_avx2.h's walk), in chunks of columns, twice: each column's amax and least nonzero
// magnitude as vertical maxima and minima of the magnitude bits row by row, then, from the chunk
// in cache, each row's codes under its columns' constants, written in the source's layout. The
// codes are cast on the source's bits (16-bit lanes for bfloat16, 32-bit for float32) under
// power-of-2 multipliers, one a lane; a step of 32 columns holding a column with nonzero elements
// below the normal codes in float32 lanes (subnormal codes too) as the row is cast. Under rceil
// without statistics, a group's scales and constants come straight from its amax in the source's
// lanes (rceil_columns16, rceil_columns32), the general path taking only groups with special
// columns. A column whose block the lanes do not cast (an infinite or NaN amax, a multiplier that
// is not a normal power of 2) is encoded again by the scalar body (encode_column_block_scalar).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/common/stream_codes.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_columns_levels.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"
#include "kernels/cpu/mx/mx_columns_avx2.h"

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;
// The 16-bit lanes' constants of 16 columns' blocks (column j in lane j) from their amax bits
// (float32 bits, NaN above 0x7F800000) and multipliers, for column_codes16: `round` the
// exponent add 2^e of the multiplier with the rounding bias and the rebias to the code folded
// in, `from` lane_constants's smallest |x| bits with a normal code, `sat_above` the largest |x|
// bits whose product does not exceed the element max (0x7FFF: none does). Returns the columns
// that need the float32 path (bit j: an infinite or NaN amax, a multiplier that is not a normal
// power of 2 or is above 2^(127 - kBias), under which a zero's code would not be 0), whose lanes
// get from = 0x7FFF and no saturation.
template <Element E>
inline unsigned column_constants16(const uint32_t* bits, const float* mul, __m256i& round,
                                   __m256i& from, __m256i& sat_above) {
  using L = Bf16Lanes<E>;
  constexpr int kDrop = 7 - L::kMant;
  constexpr int kMaxBits = (L::kMaxCode + ((127 - L::kBias) << L::kMant)) << kDrop;
  constexpr int kRound = (1 << (kDrop - 1)) - 1 - (((127 - L::kBias) << L::kMant) << kDrop);
  __m256i r[2], f[2], t[2];
  unsigned fallback = 0;
  for (int h = 0; h < 2; ++h) {
    const __m256i mb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mul + 8 * h));
    const __m256i ab = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 * h));
    const __m256i field = _mm256_srli_epi32(mb, 23);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i bad = _mm256_or_si256(
        _mm256_or_si256(
            _mm256_xor_si256(
                _mm256_cmpeq_epi32(_mm256_and_si256(mb, _mm256_set1_epi32(0x807FFFFF)), zero),
                _mm256_set1_epi32(-1)),
            _mm256_cmpgt_epi32(ab, _mm256_set1_epi32(0x7F7FFFFF))),
        _mm256_or_si256(_mm256_cmpeq_epi32(field, zero),
                        _mm256_cmpgt_epi32(field, _mm256_set1_epi32(254 - L::kBias))));
    const __m256i e = _mm256_sub_epi32(field, _mm256_set1_epi32(127));
    const __m256i add = _mm256_slli_epi32(e, 7);
    const __m256i none = _mm256_set1_epi32(0x7FFF);
    r[h] = _mm256_andnot_si256(bad, _mm256_add_epi32(add, _mm256_set1_epi32(kRound)));
    f[h] = _mm256_blendv_epi8(
        _mm256_max_epi32(
            _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(128 - L::kBias), e), 7),
            _mm256_set1_epi32(0x80)),
        none, bad);
    t[h] = _mm256_blendv_epi8(
        _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(kMaxBits), add), none), none, bad);
    fallback |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad))) << (8 * h);
  }
  // packs works within 128-bit lanes: [lanes 0-3, 8-11 | 4-7, 12-15] before the permute.
  round = _mm256_permute4x64_epi64(_mm256_packs_epi32(r[0], r[1]), 0xD8);
  from = _mm256_permute4x64_epi64(_mm256_packs_epi32(f[0], f[1]), 0xD8);
  sat_above = _mm256_permute4x64_epi64(_mm256_packs_epi32(t[0], t[1]), 0xD8);
  return fallback;
}

// Under rceil, the scale codes (to scale[0..15]), multipliers (to mul[0..15]) and 16-bit lanes'
// constants (column_constants16's, with low[]'s lanes folded in as fp8_chunk_bf16 folds them) of
// 16 columns straight from their bfloat16 amax bits and least |x| - 1 (column j in lane j), in
// 16-bit lanes: block_scales8's code (amax's exponent less the element's, plus one where its
// mantissa exceeds the element max's, whose low 16 bits are 0) and column_constants16's
// constants of e = 127 - code (0 for a zero amax, whose multiplier is 1). Returns false, writing
// nothing, where a column's amax is infinite or NaN or its nonzero code is below 2 (block_scales8's
// special lanes) or below the element's bias (column_constants16's fallback): the general path
// takes those groups.
template <Element E>
[[gnu::always_inline]] inline bool rceil_columns16(__m256i amax, __m256i lowest, uint8_t* scale,
                                                   float* mul, __m256i& round, __m256i& sat_above,
                                                   __m256i& low_from, uint32_t& low) {
  using L = Bf16Lanes<E>;
  constexpr ElementLimits lim = element_limits(E);
  constexpr uint32_t kFrac = std::bit_cast<uint32_t>(lim.max) & 0x7FFFFFu;
  static_assert((kFrac & 0xFFFFu) == 0, "the element max's mantissa within bfloat16's");
  constexpr int kDrop = 7 - L::kMant;
  constexpr int kMaxBits = (L::kMaxCode + ((127 - L::kBias) << L::kMant)) << kDrop;
  constexpr int kRound = (1 << (kDrop - 1)) - 1 - (((127 - L::kBias) << L::kMant) << kDrop);
  constexpr int kLeast = std::max(2, L::kBias);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i above = _mm256_cmpgt_epi16(_mm256_and_si256(amax, _mm256_set1_epi16(0x7F)),
                                           _mm256_set1_epi16(static_cast<int16_t>(kFrac >> 16)));
  const __m256i code = _mm256_sub_epi16(
      _mm256_sub_epi16(_mm256_srli_epi16(amax, 7), _mm256_set1_epi16(lim.max_pow2)), above);
  const __m256i none = _mm256_cmpeq_epi16(amax, zero);
  const __m256i ok = _mm256_or_si256(
      none, _mm256_and_si256(_mm256_cmpgt_epi16(_mm256_set1_epi16(0x7F80), amax),
                             _mm256_cmpgt_epi16(code, _mm256_set1_epi16(kLeast - 1))));
  if (_mm256_movemask_epi8(ok) != -1) return false;
  const __m256i c = _mm256_andnot_si256(none, code);
  const __m256i e = _mm256_andnot_si256(none, _mm256_sub_epi16(_mm256_set1_epi16(127), c));
  const __m256i add = _mm256_slli_epi16(e, 7);
  round = _mm256_add_epi16(add, _mm256_set1_epi16(kRound));
  const __m256i from =
      _mm256_max_epi16(_mm256_slli_epi16(_mm256_sub_epi16(_mm256_set1_epi16(128 - L::kBias), e), 7),
                       _mm256_set1_epi16(0x80));
  // Lanes with a nonzero |x| below `from` (lowest < from - 1, unsigned) are low[]'s: no
  // saturation there (the float32 lanes count them), low_from their from - 1.
  const __m256i from1 = _mm256_sub_epi16(from, _mm256_set1_epi16(1));
  const __m256i fine = _mm256_cmpeq_epi16(_mm256_subs_epu16(from1, lowest), zero);
  const auto fine_bits =
      static_cast<unsigned>(_mm256_movemask_epi8(_mm256_packs_epi16(fine, fine)));
  low = ~((fine_bits & 0xFFu) | ((fine_bits >> 8) & 0xFF00u)) & 0xFFFFu;
  sat_above = _mm256_blendv_epi8(_mm256_set1_epi16(0x7FFF),
                                 _mm256_subs_epi16(_mm256_set1_epi16(kMaxBits), add), fine);
  low_from = _mm256_andnot_si256(fine, from1);
  // The codes as bytes (packus: [0-7, 0-7 | 8-15, 8-15]), the multipliers 2^(127 - c), 1 for 0.
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(c, c), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scale), _mm256_castsi256_si128(bytes));
  for (int h = 0; h < 2; ++h) {
    const __m256i c32 =
        _mm256_cvtepu16_epi32(h ? _mm256_extracti128_si256(c, 1) : _mm256_castsi256_si128(c));
    const __m256i m = _mm256_blendv_epi8(
        _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), c32), 23),
        _mm256_castps_si256(_mm256_set1_ps(1.0f)), _mm256_cmpeq_epi32(c32, zero));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(mul + 8 * h), m);
  }
  return true;
}

// The 32-bit lanes' constants of 8 columns' blocks (column j in lane j) from their amax bits
// and multipliers, column_constants16's for a float32 source: `round` the exponent add e << 23
// with the rounding bias and the rebias folded in, `from` the smallest |x| bits with a normal
// code (at least float32's smallest normal), `sat_above` the largest |x| bits whose product does
// not exceed the element max. `bad` gets -1 in the lanes that need the row-wise body (an infinite
// or NaN amax, a multiplier that is not a normal power of 2 or is above 2^(127 - kBias)), whose
// lanes get round 0, from and sat_above 0x7FFFFFFF.
template <Element E>
[[gnu::always_inline]] inline void column_constants32(__m256i amax, const float* mul,
                                                      __m256i& round, __m256i& from,
                                                      __m256i& sat_above, __m256i& bad) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr int kBias = Bf16Lanes<E>::kBias;
  constexpr int kDrop = 23 - Bf16Lanes<E>::kMant;
  constexpr int kRound = (1 << (kDrop - 1)) - 1 - ((127 - kBias) << 23);
  const __m256i mb = _mm256_castps_si256(_mm256_loadu_ps(mul));
  const __m256i field = _mm256_srli_epi32(mb, 23);
  const __m256i zero = _mm256_setzero_si256();
  bad = _mm256_or_si256(
      _mm256_or_si256(
          _mm256_xor_si256(
              _mm256_cmpeq_epi32(_mm256_and_si256(mb, _mm256_set1_epi32(0x807FFFFF)), zero),
              _mm256_set1_epi32(-1)),
          _mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF))),
      _mm256_or_si256(_mm256_cmpeq_epi32(field, zero),
                      _mm256_cmpgt_epi32(field, _mm256_set1_epi32(254 - kBias))));
  const __m256i e = _mm256_sub_epi32(field, _mm256_set1_epi32(127));
  const __m256i add = _mm256_slli_epi32(e, 23);
  const __m256i none = _mm256_set1_epi32(0x7FFFFFFF);
  round = _mm256_andnot_si256(bad, _mm256_add_epi32(add, _mm256_set1_epi32(kRound)));
  // e <= 127 - kBias: (128 - kBias - e) << 23 is at least float32's smallest normal.
  from = _mm256_blendv_epi8(
      _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(128 - kBias), e), 23), none, bad);
  sat_above = _mm256_blendv_epi8(
      _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int32_t>(bits_of(lim.max))), add), none, bad);
}

// rceil_columns16 for 8 float32 columns in 32-bit lanes: their scale codes, multipliers and
// column_constants32's constants (with low[]'s lanes folded in as fp8_chunk_f32 folds them)
// straight from their amax bits and least |x| - 1. Returns false, writing nothing, where a
// column's amax is infinite or NaN or its nonzero code is below 2 or the element's bias.
template <Element E>
[[gnu::always_inline]] inline bool rceil_columns32(__m256i amax, __m256i lowest, uint8_t* scale,
                                                   float* mul, __m256i& round, __m256i& sat_above,
                                                   __m256i& low_from, uint32_t& low) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr int kBias = Bf16Lanes<E>::kBias;
  constexpr int kDrop = 23 - Bf16Lanes<E>::kMant;
  constexpr int kRound = (1 << (kDrop - 1)) - 1 - ((127 - kBias) << 23);
  constexpr int kLeast = std::max(2, kBias);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i above = _mm256_cmpgt_epi32(
      _mm256_and_si256(amax, _mm256_set1_epi32(0x7FFFFF)),
      _mm256_set1_epi32(static_cast<int32_t>(std::bit_cast<uint32_t>(lim.max) & 0x7FFFFFu)));
  const __m256i code = _mm256_sub_epi32(
      _mm256_sub_epi32(_mm256_srli_epi32(amax, 23), _mm256_set1_epi32(lim.max_pow2)), above);
  const __m256i none = _mm256_cmpeq_epi32(amax, zero);
  const __m256i ok = _mm256_or_si256(
      none, _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(0x7F800000), amax),
                             _mm256_cmpgt_epi32(code, _mm256_set1_epi32(kLeast - 1))));
  if (_mm256_movemask_ps(_mm256_castsi256_ps(ok)) != 0xFF) return false;
  const __m256i c = _mm256_andnot_si256(none, code);
  const __m256i e = _mm256_andnot_si256(none, _mm256_sub_epi32(_mm256_set1_epi32(127), c));
  const __m256i add = _mm256_slli_epi32(e, 23);
  round = _mm256_add_epi32(add, _mm256_set1_epi32(kRound));
  // e <= 127 - kBias: (128 - kBias - e) << 23 is at least float32's smallest normal.
  const __m256i floor =
      _mm256_sub_epi32(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(128 - kBias), e), 23),
                       _mm256_set1_epi32(1));
  // Lanes with a nonzero |x| below `from` (lowest < from - 1, unsigned) are low[]'s: no
  // saturation there (the float32 lanes count them), low_from their from - 1.
  const __m256i fine = _mm256_cmpeq_epi32(_mm256_max_epu32(lowest, floor), lowest);
  low = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(fine))) & 0xFFu;
  sat_above = _mm256_blendv_epi8(
      _mm256_set1_epi32(0x7FFFFFFF),
      _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int32_t>(std::bit_cast<uint32_t>(lim.max))),
                       add),
      fine);
  low_from = _mm256_andnot_si256(fine, floor);
  // The multipliers 2^(127 - c), 1 for 0.
  _mm_storel_epi64(reinterpret_cast<__m128i*>(scale), bytes_of(c));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(mul),
      _mm256_blendv_epi8(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), c), 23),
                         _mm256_castps_si256(_mm256_set1_ps(1.0f)), none));
  return true;
}

// 32 code bytes to p, past the caches where kStream (p then 32-byte aligned).
template <bool kStream>
[[gnu::always_inline]] inline void store_codes(uint8_t* p, __m256i v) {
  if constexpr (kStream)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

// The 16-bit lanes of bfloat16 bits or the 32-bit lanes of float32 bits: the operations the
// codes take, and the source's mantissa bits.
template <DType::Id kSrc>
struct BitLanes {
  static constexpr bool k16 = kSrc == DType::Id::bf16;
  static constexpr int kFrac = k16 ? 7 : 23;
  static constexpr int kMag = k16 ? 0x7FFF : 0x7FFFFFFF;
  [[gnu::always_inline]] static __m256i set1(int v) {
    return k16 ? _mm256_set1_epi16(static_cast<int16_t>(v)) : _mm256_set1_epi32(v);
  }
  [[gnu::always_inline]] static __m256i add(__m256i a, __m256i b) {
    return k16 ? _mm256_add_epi16(a, b) : _mm256_add_epi32(a, b);
  }
  [[gnu::always_inline]] static __m256i cmpgt(__m256i a, __m256i b) {
    return k16 ? _mm256_cmpgt_epi16(a, b) : _mm256_cmpgt_epi32(a, b);
  }
  [[gnu::always_inline]] static __m256i max(__m256i a, __m256i b) {
    return k16 ? _mm256_max_epi16(a, b) : _mm256_max_epi32(a, b);
  }
  [[gnu::always_inline]] static __m256i min_u(__m256i a, __m256i b) {
    return k16 ? _mm256_min_epu16(a, b) : _mm256_min_epu32(a, b);
  }
  template <int kN>
  [[gnu::always_inline]] static __m256i srli(__m256i a) {
    return k16 ? _mm256_srli_epi16(a, kN) : _mm256_srli_epi32(a, kN);
  }
  template <int kN>
  [[gnu::always_inline]] static __m256i srai(__m256i a) {
    return k16 ? _mm256_srai_epi16(a, kN) : _mm256_srai_epi32(a, kN);
  }
};

// Pass 1 over kB vectors of columns from p down n rows (ld elements apart), the running values
// in registers: the columns' largest magnitude bits (amax) and least |x| - 1 (lowest; all ones
// for a zero).
template <DType::Id kSrc, int kB, class T>
[[gnu::always_inline]] inline void extremes_of(const T* p, int64_t ld, int n, __m256i* amax,
                                               __m256i* lowest) {
  using B = BitLanes<kSrc>;
  constexpr int kLanes = 32 / sizeof(T);
  __m256i m[kB], l[kB];
#pragma GCC unroll 4
  for (int j = 0; j < kB; ++j) {
    m[j] = _mm256_setzero_si256();
    l[j] = _mm256_set1_epi32(-1);
  }
  for (int k = 0; k < n; ++k)
#pragma GCC unroll 4
    for (int j = 0; j < kB; ++j) {
      const __m256i a = _mm256_and_si256(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + k * ld + kLanes * j)),
          B::set1(B::kMag));
      m[j] = B::max(m[j], a);
      l[j] = B::min_u(l[j], B::add(a, B::set1(-1)));
    }
#pragma GCC unroll 4
  for (int j = 0; j < kB; ++j) {
    amax[j] = m[j];
    lowest[j] = l[j];
  }
}

// Pass 1 of a chunk: amax[g] and lowest[g] of its `groups` vectors of columns from p (an even
// count), four at a time.
template <DType::Id kSrc, class T>
inline void column_extremes(const T* p, int64_t ld, int n, int64_t groups, __m256i* amax,
                            __m256i* lowest) {
  int64_t g = 0;
  for (; g + 4 <= groups; g += 4)
    extremes_of<kSrc, 4>(p + g * (32 / sizeof(T)), ld, n, amax + g, lowest + g);
  if (g < groups) extremes_of<kSrc, 2>(p + g * (32 / sizeof(T)), ld, n, amax + g, lowest + g);
}

// The FP8 magnitude codes of a vector of source bits x (16 bfloat16 or 8 float32 values) under
// their lanes' constants (column_constants16 or column_constants32), before the element's largest
// code caps them; a zero's is 0 or below. With kStats, `sat` counts (subtracts -1 in) the lanes
// above sat_above.
template <Element E, bool kStats, DType::Id kSrc>
[[gnu::always_inline]] inline __m256i magnitude_codes(__m256i x, __m256i round, __m256i sat_above,
                                                      __m256i& sat) {
  using B = BitLanes<kSrc>;
  constexpr int kDrop = B::kFrac - Bf16Lanes<E>::kMant;
  const __m256i a = _mm256_and_si256(x, B::set1(B::kMag));
  // Round to nearest even on the dropped bits: bit kDrop of |x| is that of |x| * 2^e.
  const __m256i lsb = _mm256_and_si256(B::template srli<kDrop>(x), B::set1(1));
  if constexpr (kStats) sat = B::add(sat, B::cmpgt(a, sat_above));
  return B::template srai<kDrop>(B::add(B::add(a, lsb), round));
}

// 8 bfloat16 values (bits h) as float32.
[[gnu::always_inline]] inline __m256 widen8(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// The FP8 codes of one step of 32 columns of a row in float32 lanes (x[q]: columns 8q..8q + 7)
// under their multipliers mul[0..31], subnormal codes too (fp8_codes), in column order: the
// codes of a step holding columns with nonzero elements below the normal codes, which the 16- or
// 32-bit lanes do not give. With kStats, the columns of `counted` (bit j: column j) count their
// saturated and flushed elements (mx_run_stats's counts) in sat and flush.
template <Element E, bool kStats>
[[gnu::always_inline]] inline __m256i step_codes_f32(const __m256* x, const float* mul,
                                                     uint32_t counted, __m256i& sat,
                                                     __m256i& flush) {
  constexpr ElementLimits lim = element_limits(E);
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  __m256i c[4];
  for (int q = 0; q < 4; ++q) {
    const __m256 y = _mm256_mul_ps(x[q], _mm256_loadu_ps(mul + 8 * q));
    c[q] = E == Element::kE4m3 ? fp8_codes<3, 7>(clamp8(y, lim.max))
                               : fp8_codes<2, 15>(clamp8(y, lim.max));
    if constexpr (kStats) {
      const __m256i keep = _mm256_cmpeq_epi32(
          _mm256_and_si256(_mm256_set1_epi32(static_cast<int>((counted >> (8 * q)) & 0xFFu)),
                           lane_bit),
          lane_bit);
      const __m256i over =
          _mm256_castps_si256(_mm256_cmp_ps(abs8(y), _mm256_set1_ps(lim.max), _CMP_GT_OQ));
      const __m256i zero_code = _mm256_cmpeq_epi32(_mm256_and_si256(c[q], _mm256_set1_epi32(0x7F)),
                                                   _mm256_setzero_si256());
      const __m256i nonzero =
          _mm256_castps_si256(_mm256_cmp_ps(x[q], _mm256_setzero_ps(), _CMP_NEQ_OQ));
      sat = _mm256_sub_epi32(sat, _mm256_and_si256(keep, over));
      flush = _mm256_sub_epi32(flush, _mm256_and_si256(keep, _mm256_and_si256(zero_code, nonzero)));
    }
  }
  // packus keeps the codes (each <= 0xFF); dwords [0-3, 8-11, 16-19, 24-27 | 4-7, ..] before the
  // permute.
  const __m256i bytes =
      _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Whether a lane of the bfloat16 bits h0, h1 holds a nonzero |x| below its column's `from`:
// |x| - 1 < from - 1 (unsigned; from1: from - 1, 0 in lanes not to check).
[[gnu::always_inline]] inline bool below_normal(__m256i h0, __m256i h1, __m256i from1_0,
                                                __m256i from1_1) {
  const __m256i mag = _mm256_set1_epi16(0x7FFF), one = _mm256_set1_epi16(1);
  const __m256i b0 = _mm256_subs_epu16(from1_0, _mm256_sub_epi16(_mm256_and_si256(h0, mag), one));
  const __m256i b1 = _mm256_subs_epu16(from1_1, _mm256_sub_epi16(_mm256_and_si256(h1, mag), one));
  const __m256i any = _mm256_or_si256(b0, b1);
  return !_mm256_testz_si256(any, any);
}

// A chunk's column constants for pass 2, a group of columns (16 bfloat16 or 8 float32 lanes) a
// vector: round, sat_above and low_from (column_constants16's or column_constants32's, low_from
// `from` - 1 in the lanes of low[g], 0 in the others), low (bit j: the group's column j has
// nonzero elements below the normal codes) and the multipliers (a lane each).
struct PassColumns {
  const __m256i* round;
  const __m256i* sat_above;
  const __m256i* low_from;
  const uint32_t* low;
  const float* muls;
};

// Calls f.template operator()<kStream, kLow>() for whether the codes stream and whether a column
// of the chunk's `groups` groups is in low[] (bit j of low[g]: the group's column j).
template <class F>
[[gnu::always_inline]] inline void for_stream_and_low(bool stream, const uint32_t* low,
                                                      int64_t groups, F&& f) {
  uint32_t any = 0;
  for (int64_t g = 0; g < groups; ++g) any |= low[g];
  if (stream && any)
    f.template operator()<true, true>();
  else if (stream)
    f.template operator()<true, false>();
  else if (any)
    f.template operator()<false, true>();
  else
    f.template operator()<false, false>();
}

// The code bytes of one step of 32 columns (groups g, g + 1) of a bfloat16 row; with kLow, a
// step with columns of low[] in float32 lanes where the row holds one of their nonzero elements
// below the normal codes (with statistics in every row: the float32 lanes count those columns'
// elements).
template <Element E, bool kStats, bool kLow>
[[gnu::always_inline]] inline __m256i bf16_step(const uint16_t* row, int64_t g,
                                                const PassColumns& k, __m256i& sat, __m256i& sat32,
                                                __m256i& flush32) {
  using L = Bf16Lanes<E>;
  const __m256i h0 = load16_bits(row + 16 * g), h1 = load16_bits(row + 16 * g + 16);
  const __m256i x0 =
      magnitude_codes<E, kStats, DType::Id::bf16>(h0, k.round[g], k.sat_above[g], sat);
  const __m256i x1 =
      magnitude_codes<E, kStats, DType::Id::bf16>(h1, k.round[g + 1], k.sat_above[g + 1], sat);
  // packs keeps each value's sign in its byte's top bit; packus the codes (a zero's negative
  // ones to 0), capped at the element's largest.
  const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(-128));
  const __m256i c = _mm256_min_epu8(_mm256_packus_epi16(x0, x1), _mm256_set1_epi8(L::kMaxCode));
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_or_si256(c, sign), 0xD8);
  if constexpr (kLow)
    if (const uint32_t l = k.low[g] | (k.low[g + 1] << 16);
        l && (kStats || below_normal(h0, h1, k.low_from[g], k.low_from[g + 1]))) [[unlikely]] {
      const __m256 x[4] = {
          widen8(_mm256_castsi256_si128(h0)), widen8(_mm256_extracti128_si256(h0, 1)),
          widen8(_mm256_castsi256_si128(h1)), widen8(_mm256_extracti128_si256(h1, 1))};
      return step_codes_f32<E, kStats>(x, k.muls + 16 * g, l, sat32, flush32);
    }
  return bytes;
}

// Pass 2 of a chunk: each of its n rows' codes (`groups` groups of columns from src, a whole
// number of 32-column steps) to codes, two steps a loop (one at the end), a line of the next
// chunk fetched a 64 source bytes; kLow: the chunk has columns of low[].
template <DType::Id kSrc, Element E, bool kStats, bool kStream, bool kLow>
void rows_codes(const void* src, int64_t ld, int n, int64_t groups, uint8_t* codes,
                int64_t code_row, const PassColumns& cols, int64_t& saturated, int64_t& flushed,
                Ahead ahead) {
  constexpr bool k16 = kSrc == DType::Id::bf16;
  using T = std::conditional_t<k16, uint16_t, float>;
  constexpr int64_t kStep = k16 ? 2 : 4;  // groups a step
  constexpr int kLines = k16 ? 1 : 2;     // source lines a step
  __m256i sat = _mm256_setzero_si256(), sat32 = sat, flush32 = sat;
  const auto step = [&](const T* row, int64_t g) __attribute__((always_inline)) {
    if constexpr (k16)
      return bf16_step<E, kStats, kLow>(row, g, cols, sat, sat32, flush32);
    else
      return f32_step<E, kStats, kLow>(row, g, cols, sat, sat32, flush32);
  };
  for (int k = 0; k < n; ++k) {
    const T* row = static_cast<const T*>(src) + k * ld;
    uint8_t* out = codes + k * code_row;
    int64_t g = 0;
    for (; g + 2 * kStep <= groups; g += 2 * kStep) {
      ahead.next_lines<2 * kLines>();
      const __m256i b0 = step(row, g), b1 = step(row, g + kStep);
      store_codes<kStream>(out + 32 / kStep * g, b0);
      store_codes<kStream>(out + 32 / kStep * g + 32, b1);
    }
    if (g < groups) {
      ahead.next_lines<kLines>();
      store_codes<kStream>(out + 32 / kStep * g, step(row, g));
    }
    // bfloat16: a 16-bit lane counts at most 32 rows of 64 groups.
    if constexpr (kStats && k16)
      if ((k & 31) == 31 || k == n - 1) {
        saturated -= lane_sum(_mm256_madd_epi16(sat, _mm256_set1_epi16(1)));
        sat = _mm256_setzero_si256();
      }
  }
  if constexpr (kStats) {
    saturated += lane_sum(sat32) - lane_sum(sat);
    flushed += lane_sum(flush32);
  }
}

// A bfloat16 band's FP8 codes: chunks of `width` columns (a multiple of 32) from column c0.
template <Element E, E8m0Rounding R, bool kStats>
void fp8_chunk_bf16(const uint16_t* src, int64_t ld, int n, int64_t c0, int64_t width,
                    uint8_t* codes, int64_t code_row, uint8_t* scale_row, MxStatsRun* runs,
                    int64_t& saturated, int64_t& flushed, Ahead ahead, bool stream) {
  constexpr int64_t kMax = kChunkBytes / (kMxBlock * 2) / 16;
  alignas(32) __m256i amax[kMax], lowest[kMax], round[kMax], sat_above[kMax], low_from[kMax];
  const int64_t groups = width / 16;
  // Pass 1: the columns' largest magnitude bits and least |x| - 1 (0xFFFF for a zero).
  column_extremes<DType::Id::bf16>(src + c0, ld, n, groups, amax, lowest);
  // The columns' scales and lane constants. The columns the lanes do not cast (bit j of
  // fallback[g]: the scalar body's; of low[g]: nonzero elements below the normal codes, encoded
  // again in float32 lanes) get sat_above 0x7FFF (their statistics are counted there); low_from
  // holds `from` - 1 in the lanes of low[g], 0 in the others.
  alignas(32) uint32_t fallback[kMax], low[kMax];
  alignas(32) float muls[kMax * 16];
  for (int64_t g = 0; g < groups; ++g) {
    alignas(32) uint32_t bits[16];
    float* mul = muls + 16 * g;
    uint8_t* s = scale_row + c0 + 16 * g;
    if constexpr (R == E8m0Rounding::kRceil && !kStats)
      if (rceil_columns16<E>(amax[g], lowest[g], s, mul, round[g], sat_above[g], low_from[g],
                             low[g])) {
        fallback[g] = 0;
        continue;
      }
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(bits),
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(amax[g])), 16));
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(bits + 8),
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(amax[g], 1)), 16));
    scales8<E, R>(_mm256_load_si256(reinterpret_cast<const __m256i*>(bits)), s, mul);
    scales8<E, R>(_mm256_load_si256(reinterpret_cast<const __m256i*>(bits + 8)), s + 8, mul + 8);
    __m256i from;
    unsigned fb = column_constants16<E>(bits, mul, round[g], from, sat_above[g]);
    // Lanes with a nonzero |x| below `from`: lowest < from - 1 (unsigned).
    const __m256i fine = _mm256_cmpeq_epi16(
        _mm256_subs_epu16(_mm256_sub_epi16(from, _mm256_set1_epi16(1)), lowest[g]),
        _mm256_setzero_si256());
    const auto fine_bits =
        static_cast<unsigned>(_mm256_movemask_epi8(_mm256_packs_epi16(fine, fine)));
    low[g] = ~((fine_bits & 0xFFu) | ((fine_bits >> 8) & 0xFF00u)) & 0xFFFFu & ~fb;
    fallback[g] = fb;
    low_from[g] = _mm256_setzero_si256();
    if (fb | low[g]) {
      alignas(32) uint16_t lanes[16], lf[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sat_above[g]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(lf),
                         _mm256_sub_epi16(from, _mm256_set1_epi16(1)));
      for (int j = 0; j < 16; ++j) {
        if (((fb | low[g]) >> j) & 1u) lanes[j] = 0x7FFF;
        if (!((low[g] >> j) & 1u)) lf[j] = 0;
      }
      sat_above[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
      low_from[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lf));
    }
    if constexpr (kStats)
      record_columns<E, DType::Id::bf16>(runs + c0 + 16 * g, bits, s, mul, 16, fb);
  }
  // Pass 2: each row's codes.
  const PassColumns cols{round, sat_above, low_from, low, muls};
  for_stream_and_low(stream, low, groups, [&]<bool kStream, bool kLow>() {
    rows_codes<DType::Id::bf16, E, kStats, kStream, kLow>(
        src + c0, ld, n, groups, codes + c0, code_row, cols, saturated, flushed, ahead);
  });
  // The streamed codes reach memory before the scalar body's stores overwrite some of them.
  bool fenced = !stream;
  for (int64_t g = 0; g < groups; ++g) {
    if (!fallback[g]) continue;
    if (!fenced) {
      _mm_sfence();
      fenced = true;
    }
    for (unsigned f = fallback[g]; f; f &= f - 1) {
      const int64_t c = c0 + 16 * g + __builtin_ctz(f);
      encode_column_block_scalar(src, DType{DType::Id::bf16}, ld, n, c, E, R, codes, code_row,
                                 scale_row + c, kStats ? runs + c : nullptr);
    }
  }
}

// Whether a lane of the float32 bits v[0..3] holds a nonzero |x| below its column's `from`:
// |x| - 1 < from - 1 (unsigned; from1[q]: from - 1, 0 in lanes not to check).
[[gnu::always_inline]] inline bool below_normal32(const __m256i* v, const __m256i* from1) {
  __m256i fine = _mm256_set1_epi32(-1);
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m256i a1 = _mm256_sub_epi32(_mm256_and_si256(v[q], _mm256_set1_epi32(0x7FFFFFFF)),
                                        _mm256_set1_epi32(1));
    fine = _mm256_and_si256(fine, _mm256_cmpeq_epi32(_mm256_max_epu32(a1, from1[q]), a1));
  }
  return !_mm256_testc_si256(fine, _mm256_set1_epi32(-1));
}

// The code bytes of one step of 32 columns (groups g..g + 3) of a float32 row; with kLow, a step
// with columns of low[] in float32 lanes where the row holds one of their nonzero elements below
// the normal codes (with statistics in every row: the float32 lanes count those columns'
// elements).
template <Element E, bool kStats, bool kLow>
[[gnu::always_inline]] inline __m256i f32_step(const float* row, int64_t g, const PassColumns& k,
                                               __m256i& sat, __m256i& sat32, __m256i& flush32) {
  using L = Bf16Lanes<E>;
  __m256i v[4], c[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    v[q] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 8 * (g + q)));
    c[q] =
        magnitude_codes<E, kStats, DType::Id::f32>(v[q], k.round[g + q], k.sat_above[g + q], sat);
  }
  // packus makes a zero's negative code 0; packs keeps each value's sign in its top bit.
  const __m256i codes8 = _mm256_min_epu8(
      _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3])),
      _mm256_set1_epi8(L::kMaxCode));
  const __m256i sign =
      _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  const __m256i bytes = _mm256_or_si256(codes8, _mm256_and_si256(sign, _mm256_set1_epi8(-128)));
  if constexpr (kLow)
    if (const uint32_t l =
            k.low[g] | (k.low[g + 1] << 8) | (k.low[g + 2] << 16) | (k.low[g + 3] << 24);
        l && (kStats || below_normal32(v, k.low_from + g))) [[unlikely]] {
      const __m256 x[4] = {_mm256_castsi256_ps(v[0]), _mm256_castsi256_ps(v[1]),
                           _mm256_castsi256_ps(v[2]), _mm256_castsi256_ps(v[3])};
      return step_codes_f32<E, kStats>(x, k.muls + 8 * g, l, sat32, flush32);
    }
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// A float32 band's FP8 codes: chunks of `width` columns (a multiple of 32) from column c0.
template <Element E, E8m0Rounding R, bool kStats>
void fp8_chunk_f32(const float* src, int64_t ld, int n, int64_t c0, int64_t width, uint8_t* codes,
                   int64_t code_row, uint8_t* scale_row, MxStatsRun* runs, int64_t& saturated,
                   int64_t& flushed, Ahead ahead, bool stream) {
  constexpr int64_t kMax = kChunkBytes / (kMxBlock * 4) / 8;
  alignas(32) __m256i amax[kMax], lowest[kMax], round[kMax], sat_above[kMax], low_from[kMax];
  const int64_t groups = width / 8;
  column_extremes<DType::Id::f32>(src + c0, ld, n, groups, amax, lowest);
  // The columns the lanes do not cast: bit j of fallback[g] the scalar body's, of low[g] those
  // with nonzero elements below the normal codes, encoded again in float32 lanes (low_from: their
  // `from` - 1, 0 in the other lanes).
  alignas(32) uint32_t fallback[kMax], low[kMax];
  alignas(32) float muls[kMax * 8];
  for (int64_t g = 0; g < groups; ++g) {
    alignas(32) uint32_t bits[8];
    float* mul = muls + 8 * g;
    uint8_t* s = scale_row + c0 + 8 * g;
    if constexpr (R == E8m0Rounding::kRceil && !kStats)
      if (rceil_columns32<E>(amax[g], lowest[g], s, mul, round[g], sat_above[g], low_from[g],
                             low[g])) {
        fallback[g] = 0;
        continue;
      }
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax[g]);
    scales8<E, R>(amax[g], s, mul);
    __m256i from, bad;
    column_constants32<E>(amax[g], mul, round[g], from, sat_above[g], bad);
    // The lanes cast here: a normal multiplier in range and no nonzero |x| below `from`.
    const __m256i floor = _mm256_sub_epi32(from, _mm256_set1_epi32(1));
    const __m256i fine =
        _mm256_andnot_si256(bad, _mm256_cmpeq_epi32(_mm256_max_epu32(lowest[g], floor), lowest[g]));
    const unsigned fb = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad)));
    low[g] = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(fine))) & 0xFFu & ~fb;
    sat_above[g] = _mm256_blendv_epi8(_mm256_set1_epi32(0x7FFFFFFF), sat_above[g], fine);
    low_from[g] = _mm256_andnot_si256(_mm256_or_si256(fine, bad), floor);
    fallback[g] = fb;
    if constexpr (kStats) record_columns<E, DType::Id::f32>(runs + c0 + 8 * g, bits, s, mul, 8, fb);
  }
  // Pass 2: each row's codes.
  const PassColumns cols{round, sat_above, low_from, low, muls};
  for_stream_and_low(stream, low, groups, [&]<bool kStream, bool kLow>() {
    rows_codes<DType::Id::f32, E, kStats, kStream, kLow>(src + c0, ld, n, groups, codes + c0,
                                                         code_row, cols, saturated, flushed, ahead);
  });
  // The streamed codes reach memory before the scalar body's stores overwrite some of them.
  bool fenced = !stream;
  for (int64_t g = 0; g < groups; ++g) {
    if (!fallback[g]) continue;
    if (!fenced) {
      _mm_sfence();
      fenced = true;
    }
    for (unsigned f = fallback[g]; f; f &= f - 1) {
      const int64_t c = c0 + 8 * g + __builtin_ctz(f);
      encode_column_block_scalar(src, DType{DType::Id::f32}, ld, n, c, E, R, codes, code_row,
                                 scale_row + c, kStats ? runs + c : nullptr);
    }
  }
}

// encode_column_band for one FP8 element and rounding.
template <Element E, E8m0Rounding R>
void columns_as(const void* src, DType dtype, int64_t rows, int64_t cols, uint8_t* codes,
                uint8_t* scales, MxStatsRun* runs) {
  for_stats_and_dtype(dtype, runs, [&]<bool kStats, DType::Id kSrc>() {
    walk_column_bands<E, R, kStats, kSrc>(
        src, rows, cols, codes, scales, runs, 32, [](const ColumnChunk& k) {
          if constexpr (kSrc == DType::Id::bf16)
            fp8_chunk_bf16<E, R, kStats>(static_cast<const uint16_t*>(k.band), k.ld, k.n, k.c0,
                                         k.width, k.codes, k.code_row, k.scale_row, k.runs,
                                         *k.saturated, *k.flushed, k.ahead, k.stream);
          else
            fp8_chunk_f32<E, R, kStats>(static_cast<const float*>(k.band), k.ld, k.n, k.c0, k.width,
                                        k.codes, k.code_row, k.scale_row, k.runs, *k.saturated,
                                        *k.flushed, k.ahead, k.stream);
        });
  });
}

}  // namespace

void avx2::mx_columns_fp8(const void* src, DType dtype, int64_t rows, int64_t cols, Element e,
                          E8m0Rounding r, uint8_t* codes, uint8_t* scales, MxStatsRun* runs) {
  const bool floor = r == E8m0Rounding::kFloor;
  if (e == Element::kE4m3 && floor)
    columns_as<Element::kE4m3, E8m0Rounding::kFloor>(src, dtype, rows, cols, codes, scales, runs);
  else if (e == Element::kE4m3)
    columns_as<Element::kE4m3, E8m0Rounding::kRceil>(src, dtype, rows, cols, codes, scales, runs);
  else if (floor)
    columns_as<Element::kE5m2, E8m0Rounding::kFloor>(src, dtype, rows, cols, codes, scales, runs);
  else
    columns_as<Element::kE5m2, E8m0Rounding::kRceil>(src, dtype, rows, cols, codes, scales, runs);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
