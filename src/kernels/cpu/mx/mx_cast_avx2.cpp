// AVX2 (+FMA, F16C) bodies of the MX casts, 8 lanes at a time: one MX block is four vectors.
// The arithmetic is the AVX-512 body's (mx_cast_avx512.cpp) with blends for masks; blocks whose
// multiplier is NaN, and a row's short last block, run the scalar body. A bfloat16 source's
// MXFP8 blocks are cast 16 lanes at a time in 16-bit lanes where their multiplier is a normal
// power of 2 (an exponent add and integer rounding, the same codes), and the transposed cast's
// columns are cast down the rows without a transpose of the source, their codes transposed in
// registers. The level's NVFP4 and MXFP4-SR bodies are nvfp4_cast_avx2.cpp's.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;
using avx2_lanes::e4m3_values;  // beside the overload on code bytes below

inline __m256 clamp8(__m256 y, float max) {
  return _mm256_min_ps(_mm256_set1_ps(max), _mm256_max_ps(_mm256_set1_ps(-max), y));
}

// The bits of |x| of elements i..i+7 as int32 (a NaN's lie above infinity's, 0x7F800000).
template <DType::Id kSrc>
inline __m256i abs_bits8(const void* src, int64_t i) {
  __m256i b;
  if constexpr (kSrc == DType::Id::f32) {
    b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const float*>(src) + i));
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(src) + i));
    b = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
  }
  return _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
}

// The E8M0 codes and multipliers of 8 blocks from the bits of their amax (amax_bits, NaN above
// 0x7F800000): e8m0_floor with floor_reciprocal, or e8m0_rceil with rceil_multiplier. Returns
// the lanes the vector does not decide (bit b for block b): under kRceil a NaN amax (whose block
// the scalar body encodes) and a ratio amax / elem_max that is subnormal (whose code is
// bit_width's), which the caller takes from mx_scalar.h; their code and multiplier are left
// unset.
template <Element E, E8m0Rounding R>
inline unsigned block_scales8(__m256i amax_bits, uint8_t* code, float* mul) {
  constexpr ElementLimits lim = element_limits(E);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i nan = _mm256_cmpgt_epi32(amax_bits, _mm256_set1_epi32(0x7F800000));
  __m256i c;
  unsigned special = 0;
  if constexpr (R == E8m0Rounding::kFloor) {
    // The biased exponent of amax less emax_elem, at least 0 (a NaN's is 0xFF).
    c = _mm256_max_epi32(
        _mm256_sub_epi32(_mm256_srli_epi32(amax_bits, 23), _mm256_set1_epi32(lim.max_pow2)), zero);
    c = _mm256_blendv_epi8(c, _mm256_set1_epi32(kE8m0Nan), nan);
  } else {
    // ceil(log2(d)) + 127 for a normal d = amax / elem_max: its biased exponent, plus one
    // where its mantissa is not 0; at most 254 (an infinite d: 0xFE); 0 for d = 0.
    const __m256i d =
        _mm256_castps_si256(_mm256_div_ps(_mm256_castsi256_ps(amax_bits), _mm256_set1_ps(lim.max)));
    const __m256i exp = _mm256_srli_epi32(d, 23);
    const __m256i mant_zero =
        _mm256_cmpeq_epi32(_mm256_and_si256(d, _mm256_set1_epi32(0x7FFFFF)), zero);
    c = _mm256_add_epi32(exp, _mm256_andnot_si256(mant_zero, _mm256_set1_epi32(1)));
    c = _mm256_min_epi32(c, _mm256_set1_epi32(254));
    const __m256i subnormal = _mm256_andnot_si256(mant_zero, _mm256_cmpeq_epi32(exp, zero));
    special = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(nan, subnormal))));
  }
  // 2^(127 - code), except 2^-127 for 254 (no float32 has it as an exponent field) and the
  // floor's 2^126 or the rceil's 1 for code 0; the floor's NaN code multiplies by 0.
  __m256i m = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), c), 23);
  m = _mm256_blendv_epi8(m, _mm256_set1_epi32(0x00400000),
                         _mm256_cmpeq_epi32(c, _mm256_set1_epi32(254)));
  m = _mm256_blendv_epi8(
      m, _mm256_castps_si256(_mm256_set1_ps(R == E8m0Rounding::kFloor ? 0x1p126f : 1.0f)),
      _mm256_cmpeq_epi32(c, zero));
  if constexpr (R == E8m0Rounding::kFloor) m = _mm256_andnot_si256(nan, m);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(code), bytes_of(c));
  _mm256_storeu_ps(mul, _mm256_castsi256_ps(m));
  return special;
}

// A segment's statistics as its vector blocks are encoded: the saturated and flushed elements
// counted in lanes (a compare mask is -1 where true, so subtracting it counts; a lane sees one
// element in 8 of a segment of at most 2^31 elements), the rest of MxStatsRun block by block.
struct SegmentStats {
  __m256i saturated;
  __m256i flushed;
  MxStatsRun run;
};

// The codes of one block of 32 elements from element i, times `mul` (clamped where the
// format and rounding need it). With `st`, its elements counted as mx_run_stats counts them:
// saturated where |x| * mul (before the clamp) exceeds the element max, flushed where x is
// neither zero nor NaN and its code's magnitude bits are 0.
template <Element E, E8m0Rounding R, DType::Id kSrc>
inline void encode_block(const void* src, int64_t i, float mul, uint8_t* codes,
                         SegmentStats* st = nullptr) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr bool clamp = R == E8m0Rounding::kRceil || E != Element::kE2m1;
  const DType dtype{kSrc};
  const __m256 mv = _mm256_set1_ps(mul);
  for (int v = 0; v < 4; ++v) {
    const __m256 x = load8(src, dtype, i + 8 * v);
    __m256 y = _mm256_mul_ps(x, mv);
    if (st)
      st->saturated = _mm256_sub_epi32(
          st->saturated,
          _mm256_castps_si256(_mm256_cmp_ps(abs8(y), _mm256_set1_ps(lim.max), _CMP_GT_OQ)));
    if constexpr (clamp) y = clamp8(y, lim.max);
    __m256i c;
    if constexpr (E == Element::kE2m1) {
      c = e2m1_codes(y);
      store_e2m1(codes + (i + 8 * v) / 2, c);
    } else {
      c = E == Element::kE4m3 ? fp8_codes<3, 7>(y) : fp8_codes<2, 15>(y);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i + 8 * v), bytes_of(c));
    }
    if (st) {
      const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(E == Element::kE2m1 ? 7 : 0x7F));
      const __m256i zero_code = _mm256_cmpeq_epi32(mag, _mm256_setzero_si256());
      const __m256i nonzero =
          _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_OQ));
      st->flushed = _mm256_sub_epi32(st->flushed, _mm256_and_si256(zero_code, nonzero));
    }
  }
}

// mx_run_stats's record of one block encoded in vectors with scale code s and multiplier mul;
// amax_bits: the bits of the block's largest magnitude (above 0x7F800000 where it holds NaN,
// whose amax, NaN passed over, is then taken from the source).
template <Element E, DType::Id kSrc>
inline void record_block(MxStatsRun& run, const void* src, int64_t i, uint32_t amax_bits, uint8_t s,
                         float mul) {
  constexpr ElementLimits lim = element_limits(E);
  float amax = float_of(amax_bits);
  if (amax_bits > 0x7F800000u) {
    amax = 0.0f;
    for (int64_t k = i; k < i + kMxBlock; ++k) {
      const float a = std::fabs(load(src, DType{kSrc}, k));
      amax = a > amax ? a : amax;  // NaN passed over
    }
  }
  if (amax > run.best) {
    run.best = amax;
    if (s != kE8m0Nan) {
      run.scaled_best = amax;
      run.scale = mul;
    }
  }
  if (s != kE8m0Nan) run.peak = std::max(run.peak, static_cast<double>(amax) * mul / lim.max);
}

// The scalar body over blocks the vectors leave (a NaN rceil multiplier, a row's short last
// block), their statistics appended in order.
template <Element E, E8m0Rounding R, DType::Id kSrc>
inline void encode_scalar(const void* src, int64_t i, int64_t n, uint8_t* codes, uint8_t* scales,
                          SegmentStats* st) {
  const DType dtype{kSrc};
  const void* x = at(src, dtype, i);
  uint8_t* c = codes + code_bytes(E, i);
  uint8_t* s = scales + i / kMxBlock;
  kScalarKernels.encode(x, dtype, n, E, R, c, s);
  if (st) st->run.append(mx_run_stats(x, dtype, n, E, R, c, s));
}

// One element format, scale rounding and source dtype, fixed at compile time so the block loop
// has no branch on them. Eight blocks at a time: their amaxes by integer maxima of the
// magnitude bits (a NaN's exceed every number's), gathered into one vector whose lanes give
// the eight scales at once; then each block is encoded from the source again (in L1). With
// `st`, the segment's statistics are counted as it is encoded (mx_run_stats's).
template <Element E, E8m0Rounding R, DType::Id kSrc>
void mx_encode_as(const void* src, int64_t n, uint8_t* codes, uint8_t* scales, SegmentStats* st) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr int64_t kGroup = 8 * kMxBlock;
  const int64_t full = n / kMxBlock * kMxBlock;
  int64_t i = 0;
  for (; i + kGroup <= full; i += kGroup) {
    __m256i m[8];
    for (int b = 0; b < 8; ++b) {
      const int64_t j = i + b * kMxBlock;
      m[b] = _mm256_max_epi32(
          _mm256_max_epi32(abs_bits8<kSrc>(src, j), abs_bits8<kSrc>(src, j + 8)),
          _mm256_max_epi32(abs_bits8<kSrc>(src, j + 16), abs_bits8<kSrc>(src, j + 24)));
    }
    const __m256i amax = transposed_max8(m);
    alignas(32) float mul[8];
    alignas(32) uint32_t bits[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax);
    uint8_t* s = scales + i / kMxBlock;
    for (unsigned special = block_scales8<E, R>(amax, s, mul); special; special &= special - 1) {
      const int b = __builtin_ctz(special);
      const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
      s[b] = e8m0_rceil(a, lim.max);
      mul[b] = rceil_multiplier(s[b], a, lim.max);
    }
    for (int b = 0; b < 8; ++b) {
      const int64_t j = i + b * kMxBlock;
      if (R == E8m0Rounding::kRceil && s[b] == kE8m0Nan) {  // NaN multiplier: the scalar body
        encode_scalar<E, R, kSrc>(src, j, kMxBlock, codes, scales, st);
        continue;
      }
      encode_block<E, R, kSrc>(src, j, mul[b], codes, st);
      if (st) record_block<E, kSrc>(st->run, src, j, bits[b], s[b], mul[b]);
    }
  }
  for (; i < full; i += kMxBlock) {
    __m256i m = _mm256_setzero_si256();
    for (int v = 0; v < 4; ++v) m = _mm256_max_epi32(m, abs_bits8<kSrc>(src, i + 8 * v));
    alignas(32) uint32_t bits[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), m);
    uint32_t best = 0;
    for (uint32_t b : bits) best = b > best ? b : best;
    const float amax = best > 0x7F800000u ? float_of(kQuietNan) : float_of(best);
    const uint8_t s = e8m0_scale(amax, E, R);
    if (R == E8m0Rounding::kRceil && s == kE8m0Nan) {  // NaN multiplier: the scalar body
      encode_scalar<E, R, kSrc>(src, i, kMxBlock, codes, scales, st);
      continue;
    }
    scales[i / kMxBlock] = s;
    const float mul =
        R == E8m0Rounding::kFloor ? floor_reciprocal(s) : rceil_multiplier(s, amax, lim.max);
    encode_block<E, R, kSrc>(src, i, mul, codes, st);
    if (st) record_block<E, kSrc>(st->run, src, i, best, s, mul);
  }
  if (full < n) encode_scalar<E, R, kSrc>(src, full, n - full, codes, scales, st);
}

// The sum of the 32-bit lanes of v.
inline int64_t lane_sum(__m256i v) {
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  int64_t s = 0;
  for (int32_t l : lanes) s += l;
  return s;
}

// --- bfloat16 sources under power-of-2 multipliers, in 16-bit lanes -----------------------
//
// For |x|'s bfloat16 bits a (x normal) and a multiplier 2^e, y = |x| * 2^e has the bits
// a + (e << 7) while y is normal, and y's FP8 code is fp8_codes's of float32's bits y << 16:
// 7 - kMant dropped bits here where float32 drops 23 - kMant, with the same carry out of them
// (round to nearest even). The code is normal exactly where y >= 2^(1 - kBias), that is
// a >= (128 - kBias - e) << 7; lanes below that hold zero (code 0 with x's sign) or need the
// float32 path (a subnormal code, a subnormal x), which then encodes their whole block. A code
// above the element's largest (y above its max, which the float32 path clamps) is lowered to
// it, and such a y counts as saturated.

template <Element E>
struct Bf16Lanes {
  static constexpr int kMant = E == Element::kE4m3 ? 3 : 2;
  static constexpr int kBias = E == Element::kE4m3 ? 7 : 15;
  static constexpr int16_t kMaxCode = E == Element::kE4m3 ? 0x7E : 0x7B;
};

// The lanes' constants of a multiplier 2^e, a normal float32: e << 7, and the smallest |x|
// bits whose product has a normal code (at least bfloat16's smallest normal, 0x80). False for
// any other multiplier (2^-127, 0, NaN).
template <Element E>
inline bool lane_constants(float mul, int16_t* add, int16_t* from) {
  const uint32_t b = bits_of(mul);
  const uint32_t field = b >> 23;
  if ((b & 0x807FFFFFu) != 0 || field == 0 || field == 255) return false;
  const int e = static_cast<int>(field) - 127;
  *add = static_cast<int16_t>(e * 128);
  *from = static_cast<int16_t>(std::max((128 - Bf16Lanes<E>::kBias - e) * 128, 0x80));
  return true;
}

// The FP8 codes of 16 bfloat16 values (bits h) times 2^e (`add`, `from`: lane_constants's), in
// 16-bit lanes (fp8_codes_avx2.h's codes16_pow2). `slow` gets -1 in lanes that need the float32
// path, `sat` in lanes whose y exceeds the element max.
template <Element E>
inline __m256i codes16(__m256i h, __m256i add, __m256i from, __m256i& slow, __m256i& sat) {
  using L = Bf16Lanes<E>;
  return fp8::detail::codes16_pow2<L::kMant, L::kBias, L::kMaxCode>(h, add, from, &slow, &sat);
}

inline __m256i load16_bits(const uint16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m256i abs16_bits(const uint16_t* p) {
  return _mm256_and_si256(load16_bits(p), _mm256_set1_epi16(0x7FFF));
}

// One block of 32 bfloat16 values from element i times mul in 16-bit lanes, its codes stored
// and its saturated lanes subtracted from `sat` (counts in 16-bit lanes); false, having written
// nothing, where the block needs the float32 path (an infinite or NaN amax, mul not a normal
// power of 2, a lane below the normal codes that is not zero).
template <Element E>
inline bool encode_block16(const uint16_t* src, int64_t i, float mul, uint32_t amax_bits,
                           uint8_t* codes, __m256i& sat) {
  int16_t add = 0, from = 0;
  if (amax_bits >= 0x7F800000u || !lane_constants<E>(mul, &add, &from)) return false;
  const __m256i va = _mm256_set1_epi16(add), vf = _mm256_set1_epi16(from);
  __m256i slow0, slow1, sat0, sat1;
  const __m256i c0 = codes16<E>(load16_bits(src + i), va, vf, slow0, sat0);
  const __m256i c1 = codes16<E>(load16_bits(src + i + 16), va, vf, slow1, sat1);
  if (!_mm256_testz_si256(_mm256_or_si256(slow0, slow1), _mm256_set1_epi8(-1))) return false;
  sat = _mm256_sub_epi16(sat, _mm256_add_epi16(sat0, sat1));
  // packus interleaves the 128-bit lanes' halves: [c0 0-7, c1 0-7 | c0 8-15, c1 8-15].
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(c0, c1), 0xD8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i), bytes);
  return true;
}

// The sum of the 16-bit lanes (each at most 2^15) of v.
inline int64_t lane_sum16(__m256i v) {
  const __m256i d = _mm256_madd_epi16(v, _mm256_set1_epi16(1));
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), d);
  int64_t s = 0;
  for (int32_t l : lanes) s += l;
  return s;
}

// mx_encode_as for a bfloat16 source and an FP8 element: eight blocks' amax from 16-bit maxima
// of the magnitude bits, their scales as one vector (block_scales8), then each block in 16-bit
// lanes where it can (encode_block16), else in float32 lanes (encode_block) or, where its
// multiplier is NaN, by the scalar body.
template <Element E, E8m0Rounding R>
void mx_encode_bf16(const uint16_t* src, int64_t n, uint8_t* codes, uint8_t* scales,
                    SegmentStats* st) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr DType::Id kSrc = DType::Id::bf16;
  constexpr int64_t kGroup = 8 * kMxBlock;
  const int64_t full = n / kMxBlock * kMxBlock;
  // Saturated lanes of the 16-bit blocks: a lane sees 2 elements of a block, at most 2^13
  // blocks before the counts are moved to `st`.
  __m256i sat = _mm256_setzero_si256();
  int64_t since_flush = 0;
  auto block = [&](int64_t j, uint8_t s, float mul, uint32_t amax_bits) {
    if (R == E8m0Rounding::kRceil && s == kE8m0Nan) {  // NaN multiplier: the scalar body
      encode_scalar<E, R, kSrc>(src, j, kMxBlock, codes, scales, st);
      return;
    }
    scales[j / kMxBlock] = s;
    if (!encode_block16<E>(src, j, mul, amax_bits, codes, sat))
      encode_block<E, R, kSrc>(src, j, mul, codes, st);
    if (st) {
      record_block<E, kSrc>(st->run, src, j, amax_bits, s, mul);
      if (++since_flush == (1 << 13)) {
        st->run.saturated += lane_sum16(sat);
        sat = _mm256_setzero_si256();
        since_flush = 0;
      }
    }
  };
  int64_t i = 0;
  for (; i + kGroup <= full; i += kGroup) {
    __m256i m[8];
    for (int b = 0; b < 8; ++b) {
      const int64_t j = i + b * kMxBlock;
      m[b] = _mm256_max_epi16(abs16_bits(src + j), abs16_bits(src + j + 16));
    }
    const __m256i amax = transposed_max8_16(m);
    alignas(32) float mul[8];
    alignas(32) uint32_t bits[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax);
    uint8_t s[8];
    for (unsigned special = block_scales8<E, R>(amax, s, mul); special; special &= special - 1) {
      const int b = __builtin_ctz(special);
      const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
      s[b] = e8m0_rceil(a, lim.max);
      mul[b] = rceil_multiplier(s[b], a, lim.max);
    }
    for (int b = 0; b < 8; ++b) block(i + b * kMxBlock, s[b], mul[b], bits[b]);
  }
  for (; i < full; i += kMxBlock) {
    const __m256i m = _mm256_max_epi16(abs16_bits(src + i), abs16_bits(src + i + 16));
    alignas(32) uint16_t lanes[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
    uint32_t best = 0;
    for (uint16_t l : lanes) best = l > best ? l : best;
    best <<= 16;
    const float amax = best > 0x7F800000u ? float_of(kQuietNan) : float_of(best);
    const uint8_t s = e8m0_scale(amax, E, R);
    const float mul =
        R == E8m0Rounding::kFloor ? floor_reciprocal(s) : rceil_multiplier(s, amax, lim.max);
    block(i, s, mul, best);
  }
  if (full < n) encode_scalar<E, R, kSrc>(src, full, n - full, codes, scales, st);
  if (st) st->run.saturated += lane_sum16(sat);
}

// In-lane 16 x 16 byte transpose: byte j of x[i] (per 128-bit lane) becomes byte i of x[j].
[[gnu::always_inline]] inline void transpose16x16_bytes(__m256i* x) {
  __m256i a[16], b[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm256_unpacklo_epi8(x[2 * k], x[2 * k + 1]);
    a[2 * k + 1] = _mm256_unpackhi_epi8(x[2 * k], x[2 * k + 1]);
  }
  // a[2k]: words w = rows 2k, 2k + 1 at byte w; a[2k + 1]: at byte w + 8.
  for (int g = 0; g < 4; ++g) {
    b[4 * g] = _mm256_unpacklo_epi16(a[4 * g], a[4 * g + 2]);
    b[4 * g + 1] = _mm256_unpackhi_epi16(a[4 * g], a[4 * g + 2]);
    b[4 * g + 2] = _mm256_unpacklo_epi16(a[4 * g + 1], a[4 * g + 3]);
    b[4 * g + 3] = _mm256_unpackhi_epi16(a[4 * g + 1], a[4 * g + 3]);
  }
  // b[4g + q]: dword d = rows 4g..4g + 3 at byte 4q + d.
  for (int h = 0; h < 2; ++h)
    for (int q = 0; q < 4; ++q) {
      a[8 * h + 2 * q] = _mm256_unpacklo_epi32(b[8 * h + q], b[8 * h + 4 + q]);
      a[8 * h + 2 * q + 1] = _mm256_unpackhi_epi32(b[8 * h + q], b[8 * h + 4 + q]);
    }
  // a[8h + 2q + p]: qword w = rows 8h..8h + 7 at byte 4q + 2p + w.
  for (int q = 0; q < 4; ++q)
    for (int p = 0; p < 2; ++p) {
      x[4 * q + 2 * p] = _mm256_unpacklo_epi64(a[2 * q + p], a[8 + 2 * q + p]);
      x[4 * q + 2 * p + 1] = _mm256_unpackhi_epi64(a[2 * q + p], a[8 + 2 * q + p]);
    }
}

// encode_columns_bf16 (mx_cast.h) for one element format and rounding. Per block row of 32
// rows and 16 columns: the columns' amax by 16-bit maxima down the rows (no transpose), their
// scales as two vectors (block_scales8), the rows' codes in 16-bit lanes (codes16) with each
// lane's own multiplier, and the 32 x 16 codes transposed in registers into the 16 columns' 32
// bytes. A column whose block needs the float32 path (its multiplier not a normal power of 2,
// a lane below the normal codes that is not zero, an infinite or NaN amax) is encoded again
// from a copy of its block by the row-wise body, over the bytes written.
template <Element E, E8m0Rounding R>
void encode_columns_as(const uint16_t* src, int64_t ld, int64_t rows, int64_t c0, int64_t groups,
                       uint8_t* codes, int64_t code_row, uint8_t* scales, int64_t scale_row,
                       MxStatsRun* runs) {
  constexpr ElementLimits lim = element_limits(E);
  const __m256i one16 = _mm256_set1_epi16(1);
  __m256i sat_total = _mm256_setzero_si256();  // 32-bit lanes
  for (int64_t r0 = 0; r0 < rows; r0 += kMxBlock) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c = c0 + 16 * g;
      const uint16_t* p = src + r0 * ld + c;
      __m256i m = _mm256_setzero_si256();
      for (int k = 0; k < kMxBlock; ++k) {
        m = _mm256_max_epi16(m, abs16_bits(p + k * ld));
        // The next block row's line of this row: rows lie ld apart, too far for the
        // hardware's stream detection.
        if (r0 + kMxBlock < rows) _mm_prefetch(p + (k + kMxBlock) * ld, _MM_HINT_T0);
      }
      alignas(32) uint32_t bits[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(bits),
                         _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(m)), 16));
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(bits + 8),
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(m, 1)), 16));
      alignas(32) float mul[16];
      uint8_t s[16];
      unsigned special =
          block_scales8<E, R>(_mm256_load_si256(reinterpret_cast<const __m256i*>(bits)), s, mul);
      special |= block_scales8<E, R>(_mm256_load_si256(reinterpret_cast<const __m256i*>(bits + 8)),
                                     s + 8, mul + 8)
                 << 8;
      for (; special; special &= special - 1) {
        const int b = __builtin_ctz(special);
        const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
        s[b] = e8m0_rceil(a, lim.max);
        mul[b] = rceil_multiplier(s[b], a, lim.max);
      }
      alignas(32) int16_t add[16], from[16];
      unsigned fallback = 0;  // bit j: column c + j takes the row-wise body
      for (int j = 0; j < 16; ++j) {
        scales[(c + j) * scale_row + r0 / kMxBlock] = s[j];
        if (bits[j] >= 0x7F800000u || !lane_constants<E>(mul[j], &add[j], &from[j])) {
          fallback |= 1u << j;
          add[j] = 0;
          from[j] = 0x7FFF;  // every lane below: codes 0
        }
      }
      const __m256i va = _mm256_load_si256(reinterpret_cast<const __m256i*>(add));
      const __m256i vf = _mm256_load_si256(reinterpret_cast<const __m256i*>(from));
      __m256i slow = _mm256_setzero_si256(), sat = _mm256_setzero_si256();
      __m256i x[16];  // rows k (low 128-bit lane) and k + 16 (high) as 16 code bytes each
      for (int k = 0; k < 16; ++k) {
        __m256i sl0, sl1, sa0, sa1;
        const __m256i lo = codes16<E>(load16_bits(p + k * ld), va, vf, sl0, sa0);
        const __m256i hi = codes16<E>(load16_bits(p + (k + 16) * ld), va, vf, sl1, sa1);
        slow = _mm256_or_si256(slow, _mm256_or_si256(sl0, sl1));
        sat = _mm256_sub_epi16(sat, _mm256_add_epi16(sa0, sa1));
        x[k] = _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xD8);
      }
      transpose16x16_bytes(x);
      for (int j = 0; j < 16; ++j)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + (c + j) * code_row + r0), x[j]);
      // Lane j's mask bits are bits 2j and 2j + 1 of the byte mask.
      const auto slow_bits = static_cast<unsigned>(_mm256_movemask_epi8(slow));
      for (int j = 0; j < 16; ++j) fallback |= ((slow_bits >> (2 * j)) & 1u) << j;
      if (runs) {
        alignas(32) int16_t keep[16];
        for (int j = 0; j < 16; ++j) keep[j] = (fallback >> j) & 1u ? 0 : -1;
        sat = _mm256_and_si256(sat, _mm256_load_si256(reinterpret_cast<const __m256i*>(keep)));
        sat_total = _mm256_add_epi32(sat_total, _mm256_madd_epi16(sat, one16));
        for (int j = 0; j < 16; ++j)
          if (!((fallback >> j) & 1u))
            record_block<E, DType::Id::bf16>(runs[c + j - c0], nullptr, 0, bits[j], s[j], mul[j]);
      }
      for (; fallback; fallback &= fallback - 1) {
        const int j = __builtin_ctz(fallback);
        alignas(32) uint16_t column[kMxBlock];
        for (int k = 0; k < kMxBlock; ++k) column[k] = p[k * ld + j];
        uint8_t* cp = codes + (c + j) * code_row + r0;
        uint8_t* sp = scales + (c + j) * scale_row + r0 / kMxBlock;
        if (runs) {
          SegmentStats st{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
          mx_encode_as<E, R, DType::Id::bf16>(column, kMxBlock, cp, sp, &st);
          st.run.saturated += lane_sum(st.saturated);
          st.run.flushed += lane_sum(st.flushed);
          runs[c + j - c0].append(st.run);
        } else {
          mx_encode_as<E, R, DType::Id::bf16>(column, kMxBlock, cp, sp, nullptr);
        }
      }
    }
  }
  if (runs) runs[0].saturated += lane_sum(sat_total);
}

template <E8m0Rounding R, DType::Id kSrc>
void mx_encode_rounded(const void* src, int64_t n, Element e, uint8_t* codes, uint8_t* scales,
                       SegmentStats* st) {
  if constexpr (kSrc == DType::Id::bf16) {
    const auto* b = static_cast<const uint16_t*>(src);
    if (e == Element::kE4m3) return mx_encode_bf16<Element::kE4m3, R>(b, n, codes, scales, st);
    if (e == Element::kE5m2) return mx_encode_bf16<Element::kE5m2, R>(b, n, codes, scales, st);
  }
  if (e == Element::kE4m3) return mx_encode_as<Element::kE4m3, R, kSrc>(src, n, codes, scales, st);
  if (e == Element::kE5m2) return mx_encode_as<Element::kE5m2, R, kSrc>(src, n, codes, scales, st);
  mx_encode_as<Element::kE2m1, R, kSrc>(src, n, codes, scales, st);
}

template <E8m0Rounding R>
void mx_encode_rounded(const void* src, DType dtype, int64_t n, Element e, uint8_t* codes,
                       uint8_t* scales, SegmentStats* st) {
  if (dtype == kFloat32)
    mx_encode_rounded<R, DType::Id::f32>(src, n, e, codes, scales, st);
  else
    mx_encode_rounded<R, DType::Id::bf16>(src, n, e, codes, scales, st);
}

void mx_encode_with(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                    uint8_t* codes, uint8_t* scales, SegmentStats* st) {
  if (r == E8m0Rounding::kFloor)
    mx_encode_rounded<E8m0Rounding::kFloor>(src, dtype, n, e, codes, scales, st);
  else
    mx_encode_rounded<E8m0Rounding::kRceil>(src, dtype, n, e, codes, scales, st);
}

void mx_encode(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r, uint8_t* codes,
               uint8_t* scales) {
  mx_encode_with(src, dtype, n, e, r, codes, scales, nullptr);
}

MxStatsRun mx_encode_stats(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                           uint8_t* codes, uint8_t* scales) {
  SegmentStats st{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
  mx_encode_with(src, dtype, n, e, r, codes, scales, &st);
  st.run.saturated += lane_sum(st.saturated);
  st.run.flushed += lane_sum(st.flushed);
  return st.run;
}

// The values of 8 E5M2 codes: each is the high byte of a half (scalar::e5m2_value).
inline __m256 e5m2_values(const uint8_t* src) {
  const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
  const __m256i half = _mm256_slli_epi32(c, 8);
  return _mm256_cvtph_ps(
      _mm_packus_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1)));
}
inline __m256 e4m3_values(const uint8_t* src) {
  return e4m3_values(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src))));
}

void mx_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, Element e, float* out) {
  const int64_t full = n / kMxBlock * kMxBlock;
  for (int64_t i = 0; i < full; i += kMxBlock) {
    const __m256 s = _mm256_set1_ps(e8m0_value(scales[i / kMxBlock]));
    for (int64_t j = i; j < i + kMxBlock; j += 8) {
      __m256 v;
      if (e == Element::kE4m3) {
        v = e4m3_values(codes + j);
      } else if (e == Element::kE5m2) {
        v = e5m2_values(codes + j);
      } else {
        v = e2m1_values(codes + j / 2);
      }
      _mm256_storeu_ps(out + j, _mm256_mul_ps(v, s));
    }
  }
  if (full < n)
    kScalarKernels.decode(codes + code_bytes(e, full), scales + full / kMxBlock, n - full, e,
                          out + full);
}

}  // namespace

void mx_encode_columns_bf16_avx2(const uint16_t* src, int64_t ld, int64_t rows, int64_t c0,
                                 int64_t groups, Element element, E8m0Rounding rounding,
                                 uint8_t* codes, int64_t code_row, uint8_t* scales,
                                 int64_t scale_row, MxStatsRun* runs) {
  const bool floor = rounding == E8m0Rounding::kFloor;
  if (element == Element::kE4m3 && floor)
    encode_columns_as<Element::kE4m3, E8m0Rounding::kFloor>(src, ld, rows, c0, groups, codes,
                                                            code_row, scales, scale_row, runs);
  else if (element == Element::kE4m3)
    encode_columns_as<Element::kE4m3, E8m0Rounding::kRceil>(src, ld, rows, c0, groups, codes,
                                                            code_row, scales, scale_row, runs);
  else if (floor)
    encode_columns_as<Element::kE5m2, E8m0Rounding::kFloor>(src, ld, rows, c0, groups, codes,
                                                            code_row, scales, scale_row, runs);
  else
    encode_columns_as<Element::kE5m2, E8m0Rounding::kRceil>(src, ld, rows, c0, groups, codes,
                                                            code_row, scales, scale_row, runs);
}

const MxKernels kAvx2Kernels = {.encode = mx_encode,
                                .encode_stats = mx_encode_stats,
                                .decode = mx_decode,
                                .nvfp4_encode = avx2::nvfp4_encode,
                                .nvfp4_encode_sr = avx2::nvfp4_encode_sr,
                                .nvfp4_decode = avx2::nvfp4_decode,
                                .amax = avx2::amax,
                                .nvfp4_encode_stats = avx2::nvfp4_encode_stats,
                                .mxfp4_encode_sr = avx2::mxfp4_encode_sr,
                                .encode_columns_bf16 = mx_encode_columns_bf16_avx2};

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
