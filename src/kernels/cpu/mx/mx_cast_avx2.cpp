// AVX2 (+FMA, F16C) bodies of the MX casts, which the AVX-512 level runs too. Row-wise, eight
// blocks' amax and scales at a time, then each block cast on the source's bits where its
// multiplier is a power of 2 (an exponent add and integer rounding, the same codes: 32-bit lanes
// for float32, 16-bit for bfloat16); other blocks in float32 lanes, 8 at a time (four vectors a
// block), and those whose multiplier is NaN, and a row's short last block, by the scalar body.
// The transposed cast's columns are cast down the rows without a transpose of the source, their
// codes transposed in registers. The level's NVFP4 and MXFP4-SR bodies are nvfp4_cast_avx2.cpp's.
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
// the scalar body encodes), an infinite one, and a ratio amax / elem_max that may be subnormal
// (whose code is bit_width's), which the caller takes from mx_scalar.h; their code and
// multiplier are left unset.
template <Element E, E8m0Rounding R>
[[gnu::always_inline]] inline unsigned block_scales8(__m256i amax_bits, uint8_t* code, float* mul) {
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
    // ceil(log2(d)) + 127 for d = amax / elem_max rounded to float32, from amax's bits without
    // the division: with amax = 2^A (1 + f) and elem_max = 2^M (1 + q), d's exponent is A - M
    // where f >= q and A - M - 1 where f < q, and its mantissa is 0 only where f = q (else d
    // lies at least 2^-24 of itself from a power of 2, beyond half its ulp), so the code is
    // A - M + 127 plus one where f > q, and 0 for amax = 0. Below 2 (d may be subnormal) and
    // for an infinite amax (0xFE) the caller takes the code.
    const __m256i field = _mm256_srli_epi32(amax_bits, 23);
    const __m256i above =
        _mm256_cmpgt_epi32(_mm256_and_si256(amax_bits, _mm256_set1_epi32(0x7FFFFF)),
                           _mm256_set1_epi32(static_cast<int32_t>(bits_of(lim.max) & 0x7FFFFFu)));
    c = _mm256_sub_epi32(_mm256_sub_epi32(field, _mm256_set1_epi32(lim.max_pow2)), above);
    const __m256i low = _mm256_andnot_si256(_mm256_cmpeq_epi32(amax_bits, zero),
                                            _mm256_cmpgt_epi32(_mm256_set1_epi32(2), c));
    const __m256i inf = _mm256_cmpeq_epi32(amax_bits, _mm256_set1_epi32(0x7F800000));
    special = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_or_si256(nan, inf), low))));
    c = _mm256_max_epi32(c, zero);
  }
  // 2^(127 - code) (the codes here are at most 253), except the floor's 2^126 or the rceil's 1
  // for code 0; the floor's NaN code multiplies by 0.
  __m256i m = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), c), 23);
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
// has no branch on them, one block at a time (a segment's blocks after its groups of eight,
// encode_groups, or the transposed cast's column blocks): its amax by integer maxima of the
// magnitude bits (a NaN's exceed every number's), then the block in float32 lanes. With `st`,
// the segment's statistics are counted as it is encoded (mx_run_stats's).
template <Element E, E8m0Rounding R, DType::Id kSrc>
void mx_encode_as(const void* src, int64_t n, uint8_t* codes, uint8_t* scales, SegmentStats* st) {
  constexpr ElementLimits lim = element_limits(E);
  const int64_t full = n / kMxBlock * kMxBlock;
  int64_t i = 0;
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

// A bfloat16 source's FP8 blocks one at a time (what a segment leaves after its groups of eight,
// encode_groups): each block's amax from 16-bit maxima of the magnitude bits, then the block
// in 16-bit lanes where it can (encode_block16), else in float32 lanes (encode_block) or, where
// its multiplier is NaN, by the scalar body.
template <Element E, E8m0Rounding R>
void mx_encode_bf16(const uint16_t* src, int64_t n, uint8_t* codes, uint8_t* scales,
                    SegmentStats* st) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr DType::Id kSrc = DType::Id::bf16;
  const int64_t full = n / kMxBlock * kMxBlock;
  // Saturated lanes of the 16-bit blocks: a lane sees 2 elements of a block (fewer than 8
  // blocks here).
  __m256i sat = _mm256_setzero_si256();
  for (int64_t i = 0; i < full; i += kMxBlock) {
    const __m256i m = _mm256_max_epi16(abs16_bits(src + i), abs16_bits(src + i + 16));
    alignas(32) uint16_t lanes[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
    uint32_t best = 0;
    for (uint16_t l : lanes) best = l > best ? l : best;
    best <<= 16;
    const float amax = best > 0x7F800000u ? float_of(kQuietNan) : float_of(best);
    const uint8_t s = e8m0_scale(amax, E, R);
    if (R == E8m0Rounding::kRceil && s == kE8m0Nan) {  // NaN multiplier: the scalar body
      encode_scalar<E, R, kSrc>(src, i, kMxBlock, codes, scales, st);
      continue;
    }
    const float mul =
        R == E8m0Rounding::kFloor ? floor_reciprocal(s) : rceil_multiplier(s, amax, lim.max);
    scales[i / kMxBlock] = s;
    if (!encode_block16<E>(src, i, mul, best, codes, sat))
      encode_block<E, R, kSrc>(src, i, mul, codes, st);
    if (st) record_block<E, kSrc>(st->run, src, i, best, s, mul);
  }
  if (full < n) encode_scalar<E, R, kSrc>(src, full, n - full, codes, scales, st);
  if (st) st->run.saturated += lane_sum16(sat);
}

// --- Row-wise blocks on the source's bits ----------------------------------------------
//
// A block whose multiplier is 2^e (a normal float32, e <= 127 - kBias), whose amax is finite
// and whose nonzero elements all have normal FP8 codes (|x| * 2^e at least 2^(1 - kBias)) is
// cast on x's bits alone, in the source's own lanes (32-bit for float32, 16-bit for bfloat16,
// kFrac = 23 or 7 mantissa bits): |x|'s bits plus e << kFrac are those of |x| * 2^e, whose code
// drops kDrop = kFrac - kMant bits, rounded to nearest even by integer adds, and is rebiased. The
// rebias and e << kFrac fold into one constant added per block (RowConstants::add); an
// arithmetic shift then leaves the zeros' lanes negative, which the saturating packs to bytes
// make code 0, a byte minimum saturates codes above the element's largest (the float32 path's
// clamp), and the signs come from packing the source's bits with signed saturation. The codes
// are fp8_codes's of the clamped x * 2^e. Other blocks (a nonzero element below the normal
// codes, a multiplier 2^-127, 0 or NaN, an infinite or NaN amax) take the float32 lanes
// (encode_block) or, for a NaN multiplier, the scalar body.
//
// E2M1 (bias 1, one mantissa bit) takes the same steps for |x| * 2^e of at least 1, with e at
// most 124: then a subnormal x, whose bits plus e << kFrac are not its product's, lies below
// 2^-2 with its product and gets code 0 like it. Below 1 e2m1_code's grid of 0, 0.5 and 1 is two
// comparisons of |x|'s bits with per-block thresholds (above 0.25: at least 0.5; from 0.75: 1,
// its ties to even), whose count the code is where it exceeds the rounded one; a code above 7
// (6) saturates to it (above 6 torchao's cast saturates too), and the codes are packed in pairs
// into nibbles.

// The per-block constants of eight blocks (lane b: block b) in the source's lanes.
template <Element E, DType::Id kSrc>
struct RowConstants {
  static constexpr bool kFp4 = E == Element::kE2m1;
  static constexpr int kFrac = kSrc == DType::Id::f32 ? 23 : 7;
  static constexpr int kMant = E == Element::kE4m3 ? 3 : (E == Element::kE5m2 ? 2 : 1);
  static constexpr int kBias = E == Element::kE4m3 ? 7 : (E == Element::kE5m2 ? 15 : 1);
  static constexpr int kDrop = kFrac - kMant;
  static constexpr int kMaxCode = E == Element::kE4m3 ? 0x7E : (E == Element::kE5m2 ? 0x7B : 7);
  // The largest e a block cast here may have.
  static constexpr int kMaxE = kFp4 ? 124 : 127 - kBias;
  // Lane b of each: (e << kFrac) + the rounding bias - the rebias; FP8: the smallest |x| bits
  // with a normal code, less 1, E2M1: the largest |x| bits whose product is at most 0.25 (in
  // from_less_1) and at most 0.75 less an ulp (three_quarters); the largest |x| bits whose
  // product is not above the element max (bits above 0x7F800000 where none is).
  alignas(32) int32_t add[8], from_less_1[8], three_quarters[8], sat_above[8];
  // The blocks' shared constants, read from memory by the blocks (not rebuilt in registers).
  __m256i one16, magnitude16, one32, magnitude32, max_code8, sign8, dword_order;
  // Bit b: block b takes the float32 lanes or the scalar body.
  unsigned slow;

  // amax: the blocks' amax bits; mul: their multipliers.
  [[gnu::always_inline]] void set(__m256i amax, const float* mul) {
    constexpr ElementLimits lim = element_limits(E);
    constexpr int kShift = 32 - 1 - 8 - kFrac;  // float32 bits -> the source's
    one16 = _mm256_set1_epi16(1);
    magnitude16 = _mm256_set1_epi16(0x7FFF);
    max_code8 = _mm256_set1_epi8(kMaxCode);
    sign8 = _mm256_set1_epi8(static_cast<char>(0x80));
    one32 = _mm256_set1_epi32(1);
    magnitude32 = _mm256_set1_epi32(0x7FFFFFFF);
    dword_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(mul));
    const __m256i field = _mm256_srli_epi32(m, 23);
    const __m256i e = _mm256_sub_epi32(field, _mm256_set1_epi32(127));
    const __m256i pow2 = _mm256_cmpeq_epi32(_mm256_and_si256(m, _mm256_set1_epi32(0x807FFFFF)),
                                            _mm256_setzero_si256());
    // field in [1, 127 + kMaxE]: a normal multiplier with e <= kMaxE.
    const __m256i in_range =
        _mm256_and_si256(_mm256_cmpgt_epi32(field, _mm256_setzero_si256()),
                         _mm256_cmpgt_epi32(_mm256_set1_epi32(128 + kMaxE), field));
    const __m256i finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7F800000), amax);
    const __m256i ok = _mm256_and_si256(_mm256_and_si256(pow2, in_range), finite);
    slow = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok))) & 0xFFu;
    const __m256i shifted = _mm256_slli_epi32(e, kFrac);
    const int32_t bias = (1 << (kDrop - 1)) - 1 - ((127 - kBias) << kFrac);
    _mm256_store_si256(reinterpret_cast<__m256i*>(add),
                       _mm256_add_epi32(shifted, _mm256_set1_epi32(bias)));
    if constexpr (kFp4) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(from_less_1),
                         _mm256_sub_epi32(_mm256_set1_epi32(125 << kFrac), shifted));
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(three_quarters),
          _mm256_sub_epi32(_mm256_set1_epi32((126 << kFrac) + (1 << (kFrac - 1)) - 1), shifted));
    } else {
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(from_less_1),
          _mm256_sub_epi32(
              _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(128 - kBias), e), kFrac),
              _mm256_set1_epi32(1)));
    }
    // max_bits - (e << kFrac), at most inf's bits (no finite |x| lies above).
    const int32_t max_bits = static_cast<int32_t>(bits_of(lim.max) >> kShift);
    const int32_t inf_bits = 0x7F800000 >> kShift;
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(sat_above),
        _mm256_add_epi32(_mm256_set1_epi32(max_bits),
                         _mm256_min_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), shifted),
                                          _mm256_set1_epi32(inf_bits - max_bits))));
  }
};

// One block of 32 float32 values from p cast on their bits (RowConstants, lane b); false,
// having written nothing, where a nonzero element lies below the normal codes. kSat: the
// elements above the element max subtracted from `sat` as -1 masks.
template <Element E, bool kSat>
inline bool fast_block_f32(const float* p, uint8_t* out, const RowConstants<E, DType::Id::f32>& k,
                           int b, __m256i& sat) {
  using K = RowConstants<E, DType::Id::f32>;
  const __m256i one = k.one32, magnitude = k.magnitude32;
  // Named vectors, not an array: GCC copies unaligned loads into an array's slots in 16-byte
  // halves, which its 32-byte reloads then wait on.
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
  const __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
  const __m256i x3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 24));
  const __m256i a0 = _mm256_and_si256(x0, magnitude), a1 = _mm256_and_si256(x1, magnitude);
  const __m256i a2 = _mm256_and_si256(x2, magnitude), a3 = _mm256_and_si256(x3, magnitude);
  // The smallest nonzero |x| less 1 (a zero wraps to the largest) against from - 1.
  const __m256i low =
      _mm256_min_epu32(_mm256_min_epu32(_mm256_sub_epi32(a0, one), _mm256_sub_epi32(a1, one)),
                       _mm256_min_epu32(_mm256_sub_epi32(a2, one), _mm256_sub_epi32(a3, one)));
  const __m256i from = _mm256_set1_epi32(k.from_less_1[b]);
  if (!_mm256_testc_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(low, from), low),
                          _mm256_set1_epi32(-1)))
    return false;
  const __m256i add = _mm256_set1_epi32(k.add[b]);
  const auto code = [&](__m256i a) {
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, K::kDrop), one);
    return _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(a, lsb), add), K::kDrop);
  };
  if constexpr (kSat) {
    const __m256i above = _mm256_set1_epi32(k.sat_above[b]);
    sat = _mm256_add_epi32(
        sat, _mm256_add_epi32(_mm256_cmpgt_epi32(a0, above), _mm256_cmpgt_epi32(a1, above)));
    sat = _mm256_add_epi32(
        sat, _mm256_add_epi32(_mm256_cmpgt_epi32(a2, above), _mm256_cmpgt_epi32(a3, above)));
  }
  // packs keeps the order [0-3 8-11 | 4-7 12-15] of each pair; the byte packs then
  // [0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31], whose dwords the permute puts in order.
  const __m256i codes = _mm256_min_epu8(_mm256_packus_epi16(_mm256_packs_epi32(code(a0), code(a1)),
                                                            _mm256_packs_epi32(code(a2), code(a3))),
                                        k.max_code8);
  const __m256i signs = _mm256_and_si256(
      _mm256_packs_epi16(_mm256_packs_epi32(x0, x1), _mm256_packs_epi32(x2, x3)), k.sign8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_permutevar8x32_epi32(_mm256_or_si256(codes, signs), k.dword_order));
  return true;
}

// The same for 32 bfloat16 values in 16-bit lanes.
template <Element E, bool kSat>
inline bool fast_block_bf16(const uint16_t* p, uint8_t* out,
                            const RowConstants<E, DType::Id::bf16>& k, int b, __m256i& sat) {
  using K = RowConstants<E, DType::Id::bf16>;
  const __m256i one = k.one16, magnitude = k.magnitude16;
  const __m256i h0 = load16_bits(p), h1 = load16_bits(p + 16);
  const __m256i a0 = _mm256_and_si256(h0, magnitude), a1 = _mm256_and_si256(h1, magnitude);
  const __m256i low = _mm256_min_epu16(_mm256_sub_epi16(a0, one), _mm256_sub_epi16(a1, one));
  const __m256i below =
      _mm256_subs_epu16(_mm256_set1_epi16(static_cast<int16_t>(k.from_less_1[b])), low);
  if (!_mm256_testz_si256(below, below)) return false;
  const __m256i add = _mm256_set1_epi16(static_cast<int16_t>(k.add[b]));
  const __m256i c0 = _mm256_srai_epi16(
      _mm256_add_epi16(_mm256_add_epi16(a0, _mm256_and_si256(_mm256_srli_epi16(a0, K::kDrop), one)),
                       add),
      K::kDrop);
  const __m256i c1 = _mm256_srai_epi16(
      _mm256_add_epi16(_mm256_add_epi16(a1, _mm256_and_si256(_mm256_srli_epi16(a1, K::kDrop), one)),
                       add),
      K::kDrop);
  if constexpr (kSat) {
    const __m256i above = _mm256_set1_epi16(static_cast<int16_t>(k.sat_above[b]));
    sat = _mm256_add_epi16(
        sat, _mm256_add_epi16(_mm256_cmpgt_epi16(a0, above), _mm256_cmpgt_epi16(a1, above)));
  }
  const __m256i codes = _mm256_min_epu8(_mm256_packus_epi16(c0, c1), k.max_code8);
  const __m256i signs = _mm256_and_si256(_mm256_packs_epi16(h0, h1), k.sign8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_permute4x64_epi64(_mm256_or_si256(codes, signs), 0xD8));
  return true;
}

// The E2M1 codes of 32 values in order (bytes, each below 16, the sign in bit 3) as 16 bytes
// of nibble pairs, the even element low.
[[gnu::always_inline]] inline void store_nibbles(uint8_t* out, __m256i codes) {
  const __m256i pairs = _mm256_maddubs_epi16(codes, _mm256_set1_epi16(0x1001));  // even + 16 odd
  const __m256i bytes = _mm256_packus_epi16(pairs, pairs);  // [0-7 0-7 | 8-15 8-15]
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm256_castsi256_si128(_mm256_permute4x64_epi64(bytes, 0x08)));
}

// One block of 32 float32 values from p cast to E2M1 on their bits (RowConstants, lane b) into
// 16 bytes at out. kSat: the elements above 6 subtracted from `sat` as -1 masks; kKept: those
// not flushed (zero, or above 0.25 times the multiplier) from `kept`.
template <bool kSat, bool kKept>
inline void fast_block_f32_fp4(const float* p, uint8_t* out,
                               const RowConstants<Element::kE2m1, DType::Id::f32>& k, int b,
                               __m256i& sat, __m256i& kept) {
  using K = RowConstants<Element::kE2m1, DType::Id::f32>;
  const __m256i one = k.one32, magnitude = k.magnitude32;
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
  const __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
  const __m256i x3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 24));
  const __m256i add = _mm256_set1_epi32(k.add[b]);
  const __m256i quarter = _mm256_set1_epi32(k.from_less_1[b]);
  const __m256i three_quarters = _mm256_set1_epi32(k.three_quarters[b]);
  const __m256i above = _mm256_set1_epi32(k.sat_above[b]);
  const auto code = [&](__m256i x) {
    const __m256i a = _mm256_and_si256(x, magnitude);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, K::kDrop), one);
    const __m256i rounded =
        _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(a, lsb), add), K::kDrop);
    const __m256i half = _mm256_cmpgt_epi32(a, quarter);
    const __m256i low = _mm256_sub_epi32(
        _mm256_setzero_si256(), _mm256_add_epi32(half, _mm256_cmpgt_epi32(a, three_quarters)));
    if constexpr (kSat) sat = _mm256_add_epi32(sat, _mm256_cmpgt_epi32(a, above));
    if constexpr (kKept)
      kept = _mm256_add_epi32(kept,
                              _mm256_or_si256(half, _mm256_cmpeq_epi32(a, _mm256_setzero_si256())));
    return _mm256_max_epi32(rounded, low);
  };
  const __m256i codes = _mm256_min_epu8(_mm256_packus_epi16(_mm256_packs_epi32(code(x0), code(x1)),
                                                            _mm256_packs_epi32(code(x2), code(x3))),
                                        k.max_code8);
  // The signs' 0x80 moved to bit 3 of each byte.
  const __m256i signs = _mm256_srli_epi16(
      _mm256_and_si256(_mm256_packs_epi16(_mm256_packs_epi32(x0, x1), _mm256_packs_epi32(x2, x3)),
                       k.sign8),
      4);
  store_nibbles(out, _mm256_permutevar8x32_epi32(_mm256_or_si256(codes, signs), k.dword_order));
}

// The same for 32 bfloat16 values in 16-bit lanes.
template <bool kSat, bool kKept>
inline void fast_block_bf16_fp4(const uint16_t* p, uint8_t* out,
                                const RowConstants<Element::kE2m1, DType::Id::bf16>& k, int b,
                                __m256i& sat, __m256i& kept) {
  using K = RowConstants<Element::kE2m1, DType::Id::bf16>;
  const __m256i one = k.one16, magnitude = k.magnitude16;
  const __m256i h0 = load16_bits(p), h1 = load16_bits(p + 16);
  const __m256i add = _mm256_set1_epi16(static_cast<int16_t>(k.add[b]));
  const __m256i quarter = _mm256_set1_epi16(static_cast<int16_t>(k.from_less_1[b]));
  const __m256i three_quarters = _mm256_set1_epi16(static_cast<int16_t>(k.three_quarters[b]));
  const __m256i above = _mm256_set1_epi16(static_cast<int16_t>(k.sat_above[b]));
  const auto code = [&](__m256i h) {
    const __m256i a = _mm256_and_si256(h, magnitude);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(a, K::kDrop), one);
    const __m256i rounded =
        _mm256_srai_epi16(_mm256_add_epi16(_mm256_add_epi16(a, lsb), add), K::kDrop);
    const __m256i half = _mm256_cmpgt_epi16(a, quarter);
    const __m256i low = _mm256_sub_epi16(
        _mm256_setzero_si256(), _mm256_add_epi16(half, _mm256_cmpgt_epi16(a, three_quarters)));
    if constexpr (kSat) sat = _mm256_add_epi16(sat, _mm256_cmpgt_epi16(a, above));
    if constexpr (kKept)
      kept = _mm256_add_epi16(kept,
                              _mm256_or_si256(half, _mm256_cmpeq_epi16(a, _mm256_setzero_si256())));
    return _mm256_max_epi16(rounded, low);
  };
  const __m256i codes = _mm256_min_epu8(_mm256_packus_epi16(code(h0), code(h1)), k.max_code8);
  const __m256i signs = _mm256_srli_epi16(_mm256_and_si256(_mm256_packs_epi16(h0, h1), k.sign8), 4);
  store_nibbles(out, _mm256_permute4x64_epi64(_mm256_or_si256(codes, signs), 0xD8));
}

// The records (best, scale, peak) of eight blocks in order, none of whose amax is NaN: peak as
// the largest amax * multiplier (exact in float32: a power of 2, or 1 below the smallest scale)
// kept in lanes until the segment ends; best and scale where a block raises best (rarely past a
// segment's first blocks).
inline void record_group(MxStatsRun& run, __m256i amax, const float* mul, __m256& peak) {
  peak = _mm256_max_ps(peak, _mm256_mul_ps(_mm256_castsi256_ps(amax), _mm256_load_ps(mul)));
  // best's bits order non-negative floats as int32 do; -1 (no block) lies below them all.
  const __m256i best = _mm256_set1_epi32(static_cast<int32_t>(bits_of(run.best)));
  if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(amax, best))) == 0) return;
  alignas(32) float a[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(a), amax);
  for (int b = 0; b < 8; ++b) {
    if (a[b] > run.best) {
      run.best = a[b];
      run.scaled_best = a[b];
      run.scale = mul[b];
    }
  }
}

// The largest lane of peak (non-negative, no NaN) into run.peak as record_block takes it.
inline void finish_peak(MxStatsRun& run, __m256 peak, float elem_max) {
  run.peak = std::max(run.peak, static_cast<double>(hmax(peak)) / elem_max);
}

// One group of eight blocks ready to encode: their amax bits, scales (written), multipliers
// and constants.
template <Element E, DType::Id kSrc>
struct RowGroup {
  __m256i amax;
  alignas(32) float mul[8];
  RowConstants<E, kSrc> k;
};

// RowGroup of the eight blocks from element i: their amax by integer maxima of the magnitude
// bits, their scales (into s) and multipliers as vectors, the lanes' exceptions from
// mx_scalar.h.
template <Element E, E8m0Rounding R, DType::Id kSrc>
[[gnu::always_inline]] inline void prepare_group(const void* src, int64_t i, uint8_t* s,
                                                 RowGroup<E, kSrc>& g) {
  constexpr ElementLimits lim = element_limits(E);
  __m256i m[8];
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    const int64_t j = i + b * kMxBlock;
    if constexpr (kSrc == DType::Id::bf16) {
      const auto* h = static_cast<const uint16_t*>(src);
      m[b] = _mm256_max_epi16(abs16_bits(h + j), abs16_bits(h + j + 16));
    } else {
      m[b] = _mm256_max_epi32(
          _mm256_max_epi32(abs_bits8<kSrc>(src, j), abs_bits8<kSrc>(src, j + 8)),
          _mm256_max_epi32(abs_bits8<kSrc>(src, j + 16), abs_bits8<kSrc>(src, j + 24)));
    }
  }
  g.amax = kSrc == DType::Id::bf16 ? transposed_max8_16(m) : transposed_max8(m);
  unsigned special = block_scales8<E, R>(g.amax, s, g.mul);
  if (special) {
    alignas(32) uint32_t bits[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), g.amax);
    for (; special; special &= special - 1) {
      const int b = __builtin_ctz(special);
      const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
      s[b] = e8m0_rceil(a, lim.max);
      g.mul[b] = rceil_multiplier(s[b], a, lim.max);
    }
  }
  g.k.set(g.amax, g.mul);
}

// The row cast of whole groups of eight blocks from the start of a segment: each group's amax,
// scales and constants (prepare_group), taken while the group before it is encoded (their
// latency hidden behind its blocks), then each block on its bits where it can (fast_block_*),
// else as mx_encode_as does. With kStats the statistics as mx_run_stats counts them: the fast
// blocks' saturated elements in lanes (none under kRceil, whose products never exceed the max),
// their flushed ones (FP8: none, every nonzero one has a normal code; E2M1: the rest of those not
// kept, counted in lanes), the records of a group at once where no amax is NaN. Returns the
// elements done (the rest: mx_encode_as or mx_encode_bf16).
template <Element E, E8m0Rounding R, DType::Id kSrc, bool kStats>
int64_t encode_groups(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                      SegmentStats* st) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr int64_t kGroup = 8 * kMxBlock;
  constexpr bool kSat = kStats && R == E8m0Rounding::kFloor;
  constexpr bool kHalf = kSrc == DType::Id::bf16;
  constexpr bool kFp4 = E == Element::kE2m1;
  const int64_t groups = n / kGroup;
  if (groups == 0) return 0;
  // The fast blocks' saturated and (E2M1) kept elements as -1s: 32-bit lanes, or 16-bit lanes
  // that see two elements a block (moved out every 2^10 groups, below 2^15).
  __m256i sat = _mm256_setzero_si256(), kept = _mm256_setzero_si256();
  int64_t fast_fp4 = 0, kept_total = 0;
  const auto move_counts = [&] {
    st->run.saturated -= kHalf ? lane_sum16(sat) : lane_sum(sat);
    kept_total += kHalf ? lane_sum16(kept) : lane_sum(kept);
    sat = kept = _mm256_setzero_si256();
  };
  __m256 peak = _mm256_setzero_ps();
  RowGroup<E, kSrc> groups_ahead[2];
  prepare_group<E, R, kSrc>(src, 0, scales, groups_ahead[0]);
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t i = q * kGroup;
    const RowGroup<E, kSrc>& g = groups_ahead[q & 1];
    if (q + 1 < groups)
      prepare_group<E, R, kSrc>(src, i + kGroup, scales + (i + kGroup) / kMxBlock,
                                groups_ahead[(q + 1) & 1]);
    const uint8_t* s = scales + i / kMxBlock;
    // A NaN amax: every block's record in order, beside the scalar body's runs.
    const bool nan = kStats && _mm256_movemask_ps(_mm256_castsi256_ps(
                                   _mm256_cmpgt_epi32(g.amax, _mm256_set1_epi32(0x7F800000)))) != 0;
    for (int b = 0; b < 8; ++b) {
      const int64_t j = i + b * kMxBlock;
      bool done = false;
      if (!((g.k.slow >> b) & 1u)) {
        const auto* h = static_cast<const uint16_t*>(src) + j;
        const auto* f = static_cast<const float*>(src) + j;
        if constexpr (kFp4) {
          if constexpr (kHalf)
            fast_block_bf16_fp4<kSat, kStats>(h, codes + j / 2, g.k, b, sat, kept);
          else
            fast_block_f32_fp4<kSat, kStats>(f, codes + j / 2, g.k, b, sat, kept);
          done = true;
          ++fast_fp4;
        } else if constexpr (kHalf) {
          done = fast_block_bf16<E, kSat>(h, codes + j, g.k, b, sat);
        } else {
          done = fast_block_f32<E, kSat>(f, codes + j, g.k, b, sat);
        }
      }
      if (!done) {
        if (R == E8m0Rounding::kRceil && s[b] == kE8m0Nan) {  // NaN multiplier: the scalar body
          encode_scalar<E, R, kSrc>(src, j, kMxBlock, codes, scales, st);
          continue;
        }
        encode_block<E, R, kSrc>(src, j, g.mul[b], codes, kStats ? st : nullptr);
      }
      if (nan) {
        alignas(32) uint32_t bits[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(bits), g.amax);
        record_block<E, kSrc>(st->run, src, j, bits[b], s[b], g.mul[b]);
      }
    }
    if constexpr (kStats) {
      if (!nan) record_group(st->run, g.amax, g.mul, peak);
      if (kHalf && (q & 1023) == 1023) move_counts();
    }
  }
  if constexpr (kStats) {
    move_counts();
    if constexpr (kFp4) st->run.flushed += kMxBlock * fast_fp4 + kept_total;
    finish_peak(st->run, peak, lim.max);
  }
  return groups * kGroup;
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

// The 16-bit lanes' constants of 16 columns' blocks (column j in lane j) from their amax bits
// (float32 bits, NaN above 0x7F800000) and multipliers, for column_codes16: `round` the
// exponent add 2^e of the multiplier with the rounding bias and the rebias to the code folded
// in, `from` lane_constants's smallest |x| bits with a normal code, `sat_above` the largest |x|
// bits whose product does not exceed the element max (0x7FFF: none does). Returns the columns
// that need the float32 path (bit j: an infinite or NaN amax, a multiplier that is not a normal
// power of 2), whose lanes get from = 0x7FFF (every lane below: code 0) and no saturation.
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
                        _mm256_cmpeq_epi32(field, _mm256_set1_epi32(255))));
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

// The FP8 magnitude codes of one row of 16 columns (bfloat16 bits h) under their lanes'
// power-of-2 multipliers (column_constants16), the codes of codes16 less the sign: lanes below
// `from` give 0. lowest gets the least |x| - 1 (as unsigned, 0xFFFF for 0) so far, from which
// the lanes with a nonzero |x| below `from` (the float32 path's) are found once per block; with
// kStats, `sat` counts (subtracts -1 in) the lanes above sat_above.
template <Element E, bool kStats>
[[gnu::always_inline]] inline __m256i column_codes16(__m256i h, __m256i round, __m256i from,
                                                     __m256i sat_above, __m256i& lowest,
                                                     __m256i& sat) {
  using L = Bf16Lanes<E>;
  constexpr int kDrop = 7 - L::kMant;
  const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  // Round to nearest even on the dropped bits: bit kDrop of |x| is that of |x| * 2^e.
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(h, kDrop), _mm256_set1_epi16(1));
  const __m256i r = _mm256_add_epi16(_mm256_add_epi16(a, round), lsb);
  const __m256i code =
      _mm256_min_epi16(_mm256_srli_epi16(r, kDrop), _mm256_set1_epi16(L::kMaxCode));
  lowest = _mm256_min_epu16(lowest, _mm256_add_epi16(a, _mm256_set1_epi16(-1)));
  if constexpr (kStats) sat = _mm256_add_epi16(sat, _mm256_cmpgt_epi16(a, sat_above));
  return _mm256_andnot_si256(_mm256_cmpgt_epi16(from, a), code);
}

// One block (32 rows from p, ld elements apart) of 16 columns: their amax bits m (16-bit
// lanes), their scales written from `scale` (scale_row bytes apart), their codes to
// sink(j, column j's 32 bytes) and with kStats their statistics appended to runs[j]
// (the 16-bit lanes' saturated elements added to sat_total). The scales as two vectors
// (block_scales8), the rows' codes in 16-bit lanes (column_codes16) with each lane's own
// multiplier, and the 32 x 16 codes transposed in registers into the columns' 32 bytes. A
// column whose block needs the float32 path (its multiplier not a normal power of 2, a lane
// below the normal codes that is not zero, an infinite or NaN amax) is encoded again from a
// copy of its block by the row-wise body, over the bytes written.
template <Element E, E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_column_block16(const uint16_t* p, int64_t ld, __m256i m,
                                                         uint8_t* scale, int64_t scale_row,
                                                         Sink sink, MxStatsRun* runs,
                                                         __m256i& sat_total) {
  constexpr ElementLimits lim = element_limits(E);
  alignas(32) uint32_t bits[16];
  const __m256i lo_bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(m)), 16);
  const __m256i hi_bits =
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(m, 1)), 16);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits), lo_bits);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits + 8), hi_bits);
  alignas(32) float mul[16];
  uint8_t s[16];
  unsigned special = block_scales8<E, R>(lo_bits, s, mul);
  special |= block_scales8<E, R>(hi_bits, s + 8, mul + 8) << 8;
  for (; special; special &= special - 1) {
    const int b = __builtin_ctz(special);
    const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
    s[b] = e8m0_rceil(a, lim.max);
    mul[b] = rceil_multiplier(s[b], a, lim.max);
  }
  for (int j = 0; j < 16; ++j) scale[j * scale_row] = s[j];
  __m256i round, from, sat_above;
  unsigned fallback = column_constants16<E>(bits, mul, round, from, sat_above);
  __m256i lowest = _mm256_set1_epi16(-1), sat = _mm256_setzero_si256();
  __m256i x[16];  // rows k (low 128-bit lane) and k + 16 (high) as 16 code bytes each
  for (int k = 0; k < 16; ++k) {
    const __m256i h0 = load16_bits(p + k * ld), h1 = load16_bits(p + (k + 16) * ld);
    const __m256i c0 = column_codes16<E, kStats>(h0, round, from, sat_above, lowest, sat);
    const __m256i c1 = column_codes16<E, kStats>(h1, round, from, sat_above, lowest, sat);
    // packs keeps each value's sign in its byte's top bit; packus the codes (below 0x80).
    const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(-128));
    x[k] = _mm256_permute4x64_epi64(_mm256_or_si256(_mm256_packus_epi16(c0, c1), sign), 0xD8);
  }
  transpose16x16_bytes(x);
  // Lanes with a nonzero |x| below `from`: lowest < from - 1 (unsigned).
  const __m256i fine =
      _mm256_cmpeq_epi16(_mm256_subs_epu16(_mm256_sub_epi16(from, _mm256_set1_epi16(1)), lowest),
                         _mm256_setzero_si256());
  const auto fine_bits =
      static_cast<unsigned>(_mm256_movemask_epi8(_mm256_packs_epi16(fine, fine)));
  fallback |= ~((fine_bits & 0xFFu) | ((fine_bits >> 8) & 0xFF00u)) & 0xFFFFu;
  if constexpr (kStats) {
    sat = _mm256_and_si256(sat, fine);  // fallback columns are counted by the row-wise body
    sat_total = _mm256_sub_epi32(sat_total, _mm256_madd_epi16(sat, _mm256_set1_epi16(1)));
    for (int j = 0; j < 16; ++j)
      if (!((fallback >> j) & 1u))
        record_block<E, DType::Id::bf16>(runs[j], nullptr, 0, bits[j], s[j], mul[j]);
  }
  alignas(32) uint8_t redone[16][kMxBlock];  // the fallback columns' codes
  for (unsigned f = fallback; f; f &= f - 1) {
    const int j = __builtin_ctz(f);
    alignas(32) uint16_t column[kMxBlock];
    for (int k = 0; k < kMxBlock; ++k) column[k] = p[k * ld + j];
    uint8_t* sp = scale + j * scale_row;
    if constexpr (kStats) {
      SegmentStats st{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
      mx_encode_as<E, R, DType::Id::bf16>(column, kMxBlock, redone[j], sp, &st);
      st.run.saturated += lane_sum(st.saturated);
      st.run.flushed += lane_sum(st.flushed);
      runs[j].append(st.run);
    } else {
      mx_encode_as<E, R, DType::Id::bf16>(column, kMxBlock, redone[j], sp, nullptr);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    sink(j, __builtin_expect((fallback >> j) & 1u, 0)
                ? _mm256_load_si256(reinterpret_cast<const __m256i*>(redone[j]))
                : x[j]);
}

// The largest magnitude bits of each of N groups of 16 columns over 32 rows from p (ld elements
// apart), into amax[0..N-1], the rows copied into tile (group g's row k at tile + 16 (32 g + k)):
// the encode reads the block from there, contiguous, where the rows themselves (a multiple of
// 4 KiB apart, often) would fall in one L1 set.
template <int N>
[[gnu::always_inline]] inline void column_amax16(const uint16_t* p, int64_t ld, __m256i* amax,
                                                 uint16_t* tile) {
  __m256i m[N];
#pragma GCC unroll 8
  for (int g = 0; g < N; ++g) m[g] = _mm256_setzero_si256();
  for (int k = 0; k < kMxBlock; ++k) {
    const uint16_t* row = p + k * ld;
#pragma GCC unroll 8
    for (int g = 0; g < N; ++g) {
      const __m256i h = load16_bits(row + 16 * g);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tile + 16 * (kMxBlock * g + k)), h);
      m[g] = _mm256_max_epi16(m[g], _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < N; ++g) amax[g] = m[g];
}

// The float32 source's counterparts, 8 columns a vector: the largest magnitude bits (int32) of N
// groups of 16 columns over 32 rows from p, group g's in amax[2 g] (columns 0-7) and
// amax[2 g + 1], the rows copied into tile (group g's row k at tile + 16 (32 g + k)).
template <int N>
[[gnu::always_inline]] inline void column_amax32(const float* p, int64_t ld, __m256i* amax,
                                                 float* tile) {
  __m256i m[2 * N];
#pragma GCC unroll 8
  for (int g = 0; g < 2 * N; ++g) m[g] = _mm256_setzero_si256();
  for (int k = 0; k < kMxBlock; ++k) {
    const float* row = p + k * ld;
#pragma GCC unroll 8
    for (int g = 0; g < 2 * N; ++g) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 8 * g));
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(tile + 16 * (kMxBlock * (g / 2) + k) + 8 * (g % 2)), v);
      m[g] = _mm256_max_epi32(m[g], _mm256_and_si256(v, _mm256_set1_epi32(0x7FFFFFFF)));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < 2 * N; ++g) amax[g] = m[g];
}

// The FP8 magnitude codes (int32) of x * mul (8 columns, each lane its own multiplier, the
// products finite), as encode_block's: |x * mul| clamped to the element max, rounded to nearest
// even (subnormal codes by an FPU add). With kStats, `sat` counts (subtracts -1 in) the lanes
// whose |x * mul| exceeds the max and `flushed` those whose x is nonzero and code 0.
template <Element E, bool kStats>
[[gnu::always_inline]] inline __m256i column_codes32(__m256 x, __m256 mul, __m256i& sat,
                                                     __m256i& flushed) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr int kMant = E == Element::kE4m3 ? 3 : 2, kBias = E == Element::kE4m3 ? 7 : 15;
  constexpr int kDrop = 23 - kMant;
  constexpr int kMinNormalBits = (128 - kBias) << 23;
  constexpr int kMagicBits = (127 + 24 - kBias - kMant) << 23;
  constexpr int kRound = (1 << (kDrop - 1)) - 1 - (((127 - kBias) << kMant) << kDrop);
  const __m256 y =
      _mm256_and_ps(_mm256_mul_ps(x, mul), _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
  if constexpr (kStats)
    sat = _mm256_add_epi32(
        sat, _mm256_castps_si256(_mm256_cmp_ps(y, _mm256_set1_ps(lim.max), _CMP_GT_OQ)));
  const __m256i a = _mm256_castps_si256(_mm256_min_ps(y, _mm256_set1_ps(lim.max)));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, kDrop), _mm256_set1_epi32(1));
  const __m256i normal = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(a, _mm256_set1_epi32(kRound)), lsb), kDrop);
  const __m256i sub = _mm256_sub_epi32(
      _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a),
                                        _mm256_castsi256_ps(_mm256_set1_epi32(kMagicBits)))),
      _mm256_set1_epi32(kMagicBits));
  const __m256i code =
      _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(kMinNormalBits), a));
  if constexpr (kStats)
    flushed = _mm256_add_epi32(
        flushed,
        _mm256_and_si256(_mm256_cmpeq_epi32(code, _mm256_setzero_si256()),
                         _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_OQ))));
  return code;
}

// encode_column_block16 for a float32 source (p: the block's 32 rows of 16 columns, ld apart;
// amax: the columns' largest magnitude bits, 0-7 and 8-15): each row's codes in float32 lanes
// (column_codes32) under the columns' multipliers, then transposed as there. A column whose amax
// is infinite or NaN is encoded from a copy of its block by the row-wise body; with kStats the
// saturated and flushed counts of the others are added to the totals.
template <Element E, E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_column_block32(const float* p, int64_t ld,
                                                         const __m256i* amax, uint8_t* scale,
                                                         int64_t scale_row, Sink sink,
                                                         MxStatsRun* runs, __m256i& sat_total,
                                                         __m256i& flushed_total) {
  constexpr ElementLimits lim = element_limits(E);
  alignas(32) uint32_t bits[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax[0]);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits + 8), amax[1]);
  alignas(32) float mul[16];
  uint8_t s[16];
  unsigned special = block_scales8<E, R>(amax[0], s, mul);
  special |= block_scales8<E, R>(amax[1], s + 8, mul + 8) << 8;
  for (; special; special &= special - 1) {
    const int b = __builtin_ctz(special);
    const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
    s[b] = e8m0_rceil(a, lim.max);
    mul[b] = rceil_multiplier(s[b], a, lim.max);
  }
  for (int j = 0; j < 16; ++j) scale[j * scale_row] = s[j];
  const __m256i bad_lo = _mm256_cmpgt_epi32(amax[0], _mm256_set1_epi32(0x7F7FFFFF));
  const __m256i bad_hi = _mm256_cmpgt_epi32(amax[1], _mm256_set1_epi32(0x7F7FFFFF));
  const unsigned fallback = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad_lo))) |
                            static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad_hi)))
                                << 8;
  // Lanes of the float32 path's columns multiply by 0: their codes are redone below.
  const __m256 m_lo = _mm256_andnot_ps(_mm256_castsi256_ps(bad_lo), _mm256_load_ps(mul));
  const __m256 m_hi = _mm256_andnot_ps(_mm256_castsi256_ps(bad_hi), _mm256_load_ps(mul + 8));
  __m256i sat[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  __m256i flushed[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  __m256i x[16];
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int k = 0; k < 16; ++k) {
    __m256i half[2], sign[2];
    for (int h = 0; h < 2; ++h) {
      const float* row = p + (k + 16 * h) * ld;
      const __m256 xl = _mm256_load_ps(row), xh = _mm256_load_ps(row + 8);
      const __m256i cl = column_codes32<E, kStats>(xl, m_lo, sat[0], flushed[0]);
      const __m256i ch = column_codes32<E, kStats>(xh, m_hi, sat[1], flushed[1]);
      half[h] = _mm256_packus_epi32(cl, ch);  // [cols 0-3, 8-11 | 4-7, 12-15]
      // packs keeps each value's sign in its 16-bit lane's top bit (and then its byte's).
      sign[h] = _mm256_packs_epi32(_mm256_castps_si256(xl), _mm256_castps_si256(xh));
    }
    const __m256i bytes = _mm256_or_si256(
        _mm256_packus_epi16(half[0], half[1]),
        _mm256_and_si256(_mm256_packs_epi16(sign[0], sign[1]), _mm256_set1_epi8(-128)));
    // dwords [k: 0-3, 8-11, k+16: 0-3, 8-11 | k: 4-7, 12-15, k+16: 4-7, 12-15] into row k's 16
    // codes (low 128-bit lane) and row k + 16's (high), as encode_column_block16 lays them.
    x[k] = _mm256_permutevar8x32_epi32(bytes, order);
  }
  transpose16x16_bytes(x);
  if constexpr (kStats) {
    sat_total = _mm256_sub_epi32(sat_total, _mm256_andnot_si256(bad_lo, sat[0]));
    sat_total = _mm256_sub_epi32(sat_total, _mm256_andnot_si256(bad_hi, sat[1]));
    flushed_total = _mm256_sub_epi32(flushed_total, _mm256_andnot_si256(bad_lo, flushed[0]));
    flushed_total = _mm256_sub_epi32(flushed_total, _mm256_andnot_si256(bad_hi, flushed[1]));
    for (int j = 0; j < 16; ++j)
      if (!((fallback >> j) & 1u))
        record_block<E, DType::Id::f32>(runs[j], nullptr, 0, bits[j], s[j], mul[j]);
  }
  alignas(32) uint8_t redone[16][kMxBlock];  // the fallback columns' codes
  for (unsigned f = fallback; f; f &= f - 1) {
    const int j = __builtin_ctz(f);
    alignas(32) float column[kMxBlock];
    for (int k = 0; k < kMxBlock; ++k) column[k] = p[k * ld + j];
    uint8_t* sp = scale + j * scale_row;
    if constexpr (kStats) {
      SegmentStats st{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
      mx_encode_as<E, R, DType::Id::f32>(column, kMxBlock, redone[j], sp, &st);
      st.run.saturated += lane_sum(st.saturated);
      st.run.flushed += lane_sum(st.flushed);
      runs[j].append(st.run);
    } else {
      mx_encode_as<E, R, DType::Id::f32>(column, kMxBlock, redone[j], sp, nullptr);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    sink(j, __builtin_expect((fallback >> j) & 1u, 0)
                ? _mm256_load_si256(reinterpret_cast<const __m256i*>(redone[j]))
                : x[j]);
}

// The E2M1 codes of 16 columns' blocks, column j's 32 in x[j] (one a byte, rows 0-15 in the low
// 128-bit lane), packed two a byte (the even row in the low nibble) for sink(j, its 16 bytes), or
// redone[j] for a fallback column (bit j).
template <typename Sink>
[[gnu::always_inline]] inline void sink_nibbles(const __m256i* x, unsigned fallback,
                                                const uint8_t (*redone)[kMxBlock / 2], Sink sink) {
  // Two codes a byte: even + 16 * odd in 16-bit lanes, then packed to bytes, two columns a step.
  const __m256i pairs = _mm256_set1_epi16(0x1001);
#pragma GCC unroll 8
  for (int j = 0; j < 16; j += 2) {
    const __m256i b =
        _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_maddubs_epi16(x[j], pairs),
                                                     _mm256_maddubs_epi16(x[j + 1], pairs)),
                                 0xD8);
    for (int q = 0; q < 2; ++q) {
      const __m128i v = q ? _mm256_extracti128_si256(b, 1) : _mm256_castsi256_si128(b);
      sink(j + q, __builtin_expect((fallback >> (j + q)) & 1u, 0)
                      ? _mm_load_si128(reinterpret_cast<const __m128i*>(redone[j + q]))
                      : v);
    }
  }
}

// encode_column_block32 for E2M1 codes: each row's codes in float32 lanes as encode_block's
// (x * mul, clamped under rceil, e2m1_codes), transposed as there into a byte per code, then
// each column's 32 codes packed two a byte (sink_nibbles). A column whose amax is infinite or NaN
// is encoded from a copy of its block by the row-wise body.
template <E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_column_block_e2m1(const float* p, const __m256i* amax,
                                                            uint8_t* scale, int64_t scale_row,
                                                            Sink sink, MxStatsRun* runs,
                                                            __m256i& sat_total,
                                                            __m256i& flushed_total) {
  constexpr Element E = Element::kE2m1;
  constexpr ElementLimits lim = element_limits(E);
  constexpr DType::Id kSrc = DType::Id::f32;
  alignas(32) uint32_t bits[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax[0]);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits + 8), amax[1]);
  alignas(32) float mul[16];
  uint8_t s[16];
  unsigned special = block_scales8<E, R>(amax[0], s, mul);
  special |= block_scales8<E, R>(amax[1], s + 8, mul + 8) << 8;
  for (; special; special &= special - 1) {
    const int b = __builtin_ctz(special);
    const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
    s[b] = e8m0_rceil(a, lim.max);
    mul[b] = rceil_multiplier(s[b], a, lim.max);
  }
  for (int j = 0; j < 16; ++j) scale[j * scale_row] = s[j];
  const __m256i bad_lo = _mm256_cmpgt_epi32(amax[0], _mm256_set1_epi32(0x7F7FFFFF));
  const __m256i bad_hi = _mm256_cmpgt_epi32(amax[1], _mm256_set1_epi32(0x7F7FFFFF));
  const unsigned fallback = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad_lo))) |
                            static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad_hi)))
                                << 8;
  // Lanes of the row-wise body's columns multiply by 0: their codes are redone below.
  const __m256 m[2] = {_mm256_andnot_ps(_mm256_castsi256_ps(bad_lo), _mm256_load_ps(mul)),
                       _mm256_andnot_ps(_mm256_castsi256_ps(bad_hi), _mm256_load_ps(mul + 8))};
  __m256i sat[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  __m256i flushed[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  __m256i x[16];
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int k = 0; k < 16; ++k) {
    __m256i half[2];
    for (int h = 0; h < 2; ++h) {
      const float* row = p + (k + 16 * h) * 16;
      __m256i c[2];
      for (int q = 0; q < 2; ++q) {
        const __m256 v = load8(row, DType{kSrc}, 8 * q);
        __m256 y = _mm256_mul_ps(v, m[q]);
        if constexpr (kStats)
          sat[q] = _mm256_sub_epi32(sat[q], _mm256_castps_si256(_mm256_cmp_ps(
                                                abs8(y), _mm256_set1_ps(lim.max), _CMP_GT_OQ)));
        if constexpr (R == E8m0Rounding::kRceil) y = clamp8(y, lim.max);
        c[q] = e2m1_codes(y);
        if constexpr (kStats)
          flushed[q] = _mm256_sub_epi32(
              flushed[q],
              _mm256_and_si256(
                  _mm256_cmpeq_epi32(_mm256_and_si256(c[q], _mm256_set1_epi32(7)),
                                     _mm256_setzero_si256()),
                  _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NEQ_OQ))));
      }
      half[h] = _mm256_packus_epi32(c[0], c[1]);  // [cols 0-3, 8-11 | 4-7, 12-15]
    }
    // Row k's 16 codes in the low 128-bit lane, row k + 16's in the high.
    x[k] = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(half[0], half[1]), order);
  }
  transpose16x16_bytes(x);
  if constexpr (kStats) {
    sat_total = _mm256_add_epi32(sat_total, _mm256_andnot_si256(bad_lo, sat[0]));
    sat_total = _mm256_add_epi32(sat_total, _mm256_andnot_si256(bad_hi, sat[1]));
    flushed_total = _mm256_add_epi32(flushed_total, _mm256_andnot_si256(bad_lo, flushed[0]));
    flushed_total = _mm256_add_epi32(flushed_total, _mm256_andnot_si256(bad_hi, flushed[1]));
    for (int j = 0; j < 16; ++j)
      if (!((fallback >> j) & 1u))
        record_block<E, kSrc>(runs[j], nullptr, 0, bits[j], s[j], mul[j]);
  }
  alignas(16) uint8_t redone[16][kMxBlock / 2];  // the fallback columns' codes
  for (unsigned f = fallback; f; f &= f - 1) {
    const int j = __builtin_ctz(f);
    alignas(32) float column[kMxBlock];
    for (int k = 0; k < kMxBlock; ++k) column[k] = p[k * 16 + j];
    uint8_t* sp = scale + j * scale_row;
    if constexpr (kStats) {
      SegmentStats st{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
      mx_encode_as<E, R, kSrc>(column, kMxBlock, redone[j], sp, &st);
      st.run.saturated += lane_sum(st.saturated);
      st.run.flushed += lane_sum(st.flushed);
      runs[j].append(st.run);
    } else {
      mx_encode_as<E, R, kSrc>(column, kMxBlock, redone[j], sp, nullptr);
    }
  }
  sink_nibbles(x, fallback, redone, sink);
}

// E2M1 codes of a bfloat16 block of 16 columns in 16-bit lanes, as the row cast's
// fast_block_bf16_fp4 takes a block (RowConstants, one column a lane): p is the block's 32 rows
// of 16 columns (16 elements apart), amax their largest magnitude bits (16-bit lanes). Each row's
// codes are the rounded ones of |x| * 2^e, or below 1 the count of the two thresholds it exceeds
// where that is more, at most 7, the sign in bit 3; the 32 x 16 codes are transposed in
// registers and each column's 32 packed two a byte (the even row in the low nibble) for sink(j,
// its 16 bytes). A column whose block is not cast on its bits (RowConstants::slow: an infinite or
// NaN amax, a multiplier that is not a normal power of 2 or above 2^124) is encoded again from a
// copy of its block by the row-wise body. With kStats the saturated (kFloor) and flushed
// elements of the other columns are added to sat_total and flushed_total.
template <E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_column_block_e2m1_bf16(const uint16_t* p, __m256i m,
                                                                 uint8_t* scale, int64_t scale_row,
                                                                 Sink sink, MxStatsRun* runs,
                                                                 __m256i& sat_total,
                                                                 __m256i& flushed_total) {
  constexpr Element E = Element::kE2m1;
  constexpr ElementLimits lim = element_limits(E);
  using K = RowConstants<E, DType::Id::bf16>;
  alignas(32) uint32_t bits[16];
  const __m256i lo_bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(m)), 16);
  const __m256i hi_bits =
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(m, 1)), 16);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits), lo_bits);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits + 8), hi_bits);
  alignas(32) float mul[16];
  uint8_t s[16];
  unsigned special = block_scales8<E, R>(lo_bits, s, mul);
  special |= block_scales8<E, R>(hi_bits, s + 8, mul + 8) << 8;
  for (; special; special &= special - 1) {
    const int b = __builtin_ctz(special);
    const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
    s[b] = e8m0_rceil(a, lim.max);
    mul[b] = rceil_multiplier(s[b], a, lim.max);
  }
  for (int j = 0; j < 16; ++j) scale[j * scale_row] = s[j];
  K k[2];
  k[0].set(lo_bits, mul);
  k[1].set(hi_bits, mul + 8);
  const unsigned fallback = k[0].slow | k[1].slow << 8;
  // The lanes' constants (each fits 16 bits where the column is cast here); packs works within
  // 128-bit lanes, [0-3, 8-11 | 4-7, 12-15] before the permute.
  const auto pack = [&](const int32_t* a, const int32_t* b) {
    return _mm256_permute4x64_epi64(
        _mm256_packs_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(a)),
                           _mm256_load_si256(reinterpret_cast<const __m256i*>(b))),
        0xD8);
  };
  const __m256i add = pack(k[0].add, k[1].add);
  const __m256i quarter = pack(k[0].from_less_1, k[1].from_less_1);
  const __m256i three_quarters = pack(k[0].three_quarters, k[1].three_quarters);
  const __m256i above = pack(k[0].sat_above, k[1].sat_above);
  const __m256i one = _mm256_set1_epi16(1), magnitude = _mm256_set1_epi16(0x7FFF);
  __m256i sat = _mm256_setzero_si256(), kept = _mm256_setzero_si256();
  const auto code = [&](__m256i h) {
    const __m256i a = _mm256_and_si256(h, magnitude);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(a, K::kDrop), one);
    const __m256i rounded =
        _mm256_srai_epi16(_mm256_add_epi16(_mm256_add_epi16(a, lsb), add), K::kDrop);
    const __m256i half = _mm256_cmpgt_epi16(a, quarter);
    const __m256i low = _mm256_sub_epi16(
        _mm256_setzero_si256(), _mm256_add_epi16(half, _mm256_cmpgt_epi16(a, three_quarters)));
    if constexpr (kStats && R == E8m0Rounding::kFloor)
      sat = _mm256_add_epi16(sat, _mm256_cmpgt_epi16(a, above));
    if constexpr (kStats)
      kept = _mm256_add_epi16(kept,
                              _mm256_or_si256(half, _mm256_cmpeq_epi16(a, _mm256_setzero_si256())));
    return _mm256_max_epi16(rounded, low);
  };
  __m256i x[16];  // rows k (low 128-bit lane) and k + 16 (high) as 16 code bytes each
  for (int r = 0; r < 16; ++r) {
    const __m256i h0 = load16_bits(p + r * 16), h1 = load16_bits(p + (r + 16) * 16);
    const __m256i codes =
        _mm256_min_epu8(_mm256_packus_epi16(code(h0), code(h1)), _mm256_set1_epi8(K::kMaxCode));
    // The signs' 0x80 moved to bit 3 of each byte.
    const __m256i signs = _mm256_srli_epi16(
        _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(static_cast<char>(0x80))), 4);
    x[r] = _mm256_permute4x64_epi64(_mm256_or_si256(codes, signs), 0xD8);
  }
  transpose16x16_bytes(x);
  if constexpr (kStats) {
    // The lanes of the columns cast here (the others are counted by the row-wise body): their
    // saturated elements, and their flushed ones, 32 less those kept.
    const __m256i fine = _mm256_cmpeq_epi16(
        _mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(fallback)),
                         _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                           8192, 16384, -32768)),
        _mm256_setzero_si256());
    const __m256i ones = _mm256_set1_epi16(1);
    sat_total = _mm256_sub_epi32(sat_total, _mm256_madd_epi16(_mm256_and_si256(sat, fine), ones));
    flushed_total = _mm256_add_epi32(
        flushed_total,
        _mm256_madd_epi16(
            _mm256_and_si256(_mm256_add_epi16(kept, _mm256_set1_epi16(kMxBlock)), fine), ones));
    for (int j = 0; j < 16; ++j)
      if (!((fallback >> j) & 1u))
        record_block<E, DType::Id::bf16>(runs[j], nullptr, 0, bits[j], s[j], mul[j]);
  }
  alignas(16) uint8_t redone[16][kMxBlock / 2];  // the fallback columns' codes
  for (unsigned f = fallback; f; f &= f - 1) {
    const int j = __builtin_ctz(f);
    alignas(32) uint16_t column[kMxBlock];
    for (int r = 0; r < kMxBlock; ++r) column[r] = p[r * 16 + j];
    uint8_t* sp = scale + j * scale_row;
    if constexpr (kStats) {
      SegmentStats st{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
      mx_encode_as<E, R, DType::Id::bf16>(column, kMxBlock, redone[j], sp, &st);
      st.run.saturated += lane_sum(st.saturated);
      st.run.flushed += lane_sum(st.flushed);
      runs[j].append(st.run);
    } else {
      mx_encode_as<E, R, DType::Id::bf16>(column, kMxBlock, redone[j], sp, nullptr);
    }
  }
  sink_nibbles(x, fallback, redone, sink);
}

// encode_columns_bf16 and encode_columns_f32 (mx_cast.h) for one element format and rounding,
// over chunks of up to kChunkGroups groups of 16 columns, each block row by block row, a tile of
// groups (8 of bfloat16, 4 of float32: 8 KiB) at a time: the tile's amax by integer maxima down
// its rows as they are copied out (column_amax16 / 32), then each group encoded from the copy
// (encode_column_block16 / 32; E2M1: encode_column_block_e2m1_bf16 / encode_column_block_e2m1),
// while a line of each row of the tile's place in the next block row is fetched. Where a column's
// 64 code bytes of two block rows (E2M1: four) make a whole cache line, the codes of all but the
// last wait in `pending` and the last block's write the line past the caches (no line read for
// it).
template <Element E, E8m0Rounding R, bool kStats, typename T>
void encode_columns_as(const T* src, int64_t ld, int64_t rows, int64_t c0, int64_t groups,
                       uint8_t* codes, int64_t code_row, uint8_t* scales, int64_t scale_row,
                       MxStatsRun* runs) {
  constexpr bool kBf16 = sizeof(T) == 2;
  // 1024 columns: 32 KiB of pending codes, and a block row ahead fetched is 64 or 128 KiB.
  constexpr int64_t kChunkGroups = 64;
  constexpr int kTile = kBf16 ? 8 : 4;
  constexpr int kGroupsPerLine = kBf16 ? 2 : 1;
  __m256i sat_total = _mm256_setzero_si256(), flushed_total = _mm256_setzero_si256();
  alignas(32) T tile[kTile * kMxBlock * 16];
  // A column's codes kept until their line is whole: 32 bytes (FP8), 48 (E2M1, in 64).
  struct alignas(32) Codes32 {
    uint8_t b[E == Element::kE2m1 ? 64 : 32];
  };
  std::vector<Codes32> pending(16 * static_cast<size_t>(std::min(kChunkGroups, groups)));
  const bool lines = code_row % 64 == 0;
  for (int64_t g0 = 0; g0 < groups; g0 += kChunkGroups) {
    const int64_t gn = std::min(kChunkGroups, groups - g0);
    for (int64_t r0 = 0; r0 < rows; r0 += kMxBlock) {
      const T* strip = src + r0 * ld + c0 + 16 * g0;
      // This block row's codes: the first half of lines (kept), the second (streamed with the
      // kept half), or neither (stored).
      const auto at = reinterpret_cast<uintptr_t>(codes) + static_cast<uintptr_t>(r0);
      const bool first = lines && at % 64 == 0 && r0 + kMxBlock < rows;
      const bool second = lines && at % 64 == 32 && r0 > 0;
      // E2M1: this block row's quarter of its codes' lines where the line's four block rows all
      // lie in rows, else -1.
      int quarter = -1;
      if (E == Element::kE2m1 && lines) {
        const auto half_at = reinterpret_cast<uintptr_t>(codes) + static_cast<uintptr_t>(r0 / 2);
        if (half_at % 16 == 0) {
          const int q = static_cast<int>(half_at % 64 / 16);
          if (r0 >= q * kMxBlock && r0 + (4 - q) * kMxBlock <= rows) quarter = q;
        }
      }
      const int64_t nr = std::min<int64_t>(kMxBlock, rows - r0 - kMxBlock);  // next block row's
      for (int64_t t = 0; t < gn; t += kTile) {
        const int n = static_cast<int>(std::min<int64_t>(kTile, gn - t));
        __m256i amax[kBf16 ? kTile : 2 * kTile];
        if constexpr (kBf16) {
          if (n == kTile)
            column_amax16<kTile>(strip + 16 * t, ld, amax, tile);
          else
            for (int g = 0; g < n; ++g)
              column_amax16<1>(strip + 16 * (t + g), ld, amax + g, tile + kMxBlock * 16 * g);
        } else {
          if (n == kTile)
            column_amax32<kTile>(strip + 16 * t, ld, amax, tile);
          else
            for (int g = 0; g < n; ++g)
              column_amax32<1>(strip + 16 * (t + g), ld, amax + 2 * g, tile + kMxBlock * 16 * g);
        }
        const T* next = strip + kMxBlock * ld + 16 * t;
        for (int g = 0; g < n; ++g) {
          const int64_t c = c0 + 16 * (g0 + t + g);
          if (g % kGroupsPerLine == 0)
            for (int64_t k = 0; k < nr; ++k) _mm_prefetch(next + k * ld + 16 * g, _MM_HINT_T1);
          if constexpr (E == Element::kE2m1) {
            // 16 bytes a column and block: the first three quarters of a line kept, the last
            // streamed with them, or (no whole line) stored as they come.
            uint8_t* out = codes + c * code_row + r0 / 2;
            uint8_t* kept = pending[16 * (t + g)].b;
            const auto block = [&](auto sink) {
              uint8_t* scale = scales + c * scale_row + r0 / kMxBlock;
              MxStatsRun* column_runs = kStats ? runs + (c - c0) : nullptr;
              if constexpr (kBf16)
                encode_column_block_e2m1_bf16<R, kStats>(tile + kMxBlock * 16 * g, amax[g], scale,
                                                         scale_row, sink, column_runs, sat_total,
                                                         flushed_total);
              else
                encode_column_block_e2m1<R, kStats>(tile + kMxBlock * 16 * g, amax + 2 * g, scale,
                                                    scale_row, sink, column_runs, sat_total,
                                                    flushed_total);
            };
            if (quarter < 0) {
              block([&](int j, __m128i v) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j * code_row), v);
              });
            } else if (quarter < 3) {
              block([&](int j, __m128i v) {
                _mm_store_si128(reinterpret_cast<__m128i*>(kept + 64 * j + 16 * quarter), v);
              });
            } else {
              block([&](int j, __m128i v) {
                auto* o = reinterpret_cast<__m256i*>(out + j * code_row - 48);
                const uint8_t* k = kept + 64 * j;
                _mm256_stream_si256(o, _mm256_load_si256(reinterpret_cast<const __m256i*>(k)));
                _mm256_stream_si256(
                    o + 1,
                    _mm256_set_m128i(v, _mm_load_si128(reinterpret_cast<const __m128i*>(k + 32))));
              });
            }
            continue;
          }
          auto* kept = reinterpret_cast<__m256i*>(pending[16 * (t + g)].b);
          uint8_t* out = codes + c * code_row + r0;
          const auto block = [&](auto sink) {
            uint8_t* scale = scales + c * scale_row + r0 / kMxBlock;
            MxStatsRun* column_runs = kStats ? runs + (c - c0) : nullptr;
            if constexpr (kBf16)
              encode_column_block16<E, R, kStats>(tile + kMxBlock * 16 * g, 16, amax[g], scale,
                                                  scale_row, sink, column_runs, sat_total);
            else
              encode_column_block32<E, R, kStats>(tile + kMxBlock * 16 * g, 16, amax + 2 * g, scale,
                                                  scale_row, sink, column_runs, sat_total,
                                                  flushed_total);
          };
          if (first) {
            block([&](int j, __m256i v) { _mm256_store_si256(kept + j, v); });
          } else if (second) {
            block([&](int j, __m256i v) {
              auto* o = reinterpret_cast<__m256i*>(out + j * code_row - kMxBlock);
              _mm256_stream_si256(o, _mm256_load_si256(kept + j));
              _mm256_stream_si256(o + 1, v);
            });
          } else {
            block([&](int j, __m256i v) {
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * code_row), v);
            });
          }
        }
      }
    }
  }
  _mm_sfence();  // the streamed lines before any later load of them, on any thread
  if (kStats) {
    runs[0].saturated += lane_sum(sat_total);
    runs[0].flushed += lane_sum(flushed_total);
  }
}

template <typename T>
void encode_columns(const T* src, int64_t ld, int64_t rows, int64_t c0, int64_t groups,
                    Element element, E8m0Rounding rounding, uint8_t* codes, int64_t code_row,
                    uint8_t* scales, int64_t scale_row, MxStatsRun* runs) {
  const auto run = [&]<Element E, E8m0Rounding R>() {
    if (runs)
      encode_columns_as<E, R, true>(src, ld, rows, c0, groups, codes, code_row, scales, scale_row,
                                    runs);
    else
      encode_columns_as<E, R, false>(src, ld, rows, c0, groups, codes, code_row, scales, scale_row,
                                     nullptr);
  };
  const bool floor = rounding == E8m0Rounding::kFloor;
  if (element == Element::kE2m1 && floor)
    run.template operator()<Element::kE2m1, E8m0Rounding::kFloor>();
  else if (element == Element::kE2m1)
    run.template operator()<Element::kE2m1, E8m0Rounding::kRceil>();
  else if (element == Element::kE4m3 && floor)
    run.template operator()<Element::kE4m3, E8m0Rounding::kFloor>();
  else if (element == Element::kE4m3)
    run.template operator()<Element::kE4m3, E8m0Rounding::kRceil>();
  else if (floor)
    run.template operator()<Element::kE5m2, E8m0Rounding::kFloor>();
  else
    run.template operator()<Element::kE5m2, E8m0Rounding::kRceil>();
}

// A row cast: whole groups of eight blocks by encode_groups, the rest block by block.
template <Element E, E8m0Rounding R, DType::Id kSrc>
void mx_encode_rows(const void* src, int64_t n, uint8_t* codes, uint8_t* scales, SegmentStats* st) {
  const int64_t done = st ? encode_groups<E, R, kSrc, true>(src, n, codes, scales, st)
                          : encode_groups<E, R, kSrc, false>(src, n, codes, scales, st);
  if (done == n) return;
  const void* rest = at(src, DType{kSrc}, done);
  if constexpr (kSrc == DType::Id::bf16 && E != Element::kE2m1)
    mx_encode_bf16<E, R>(static_cast<const uint16_t*>(rest), n - done, codes + done,
                         scales + done / kMxBlock, st);
  else
    mx_encode_as<E, R, kSrc>(rest, n - done, codes + code_bytes(E, done), scales + done / kMxBlock,
                             st);
}

template <E8m0Rounding R, DType::Id kSrc>
void mx_encode_rounded(const void* src, int64_t n, Element e, uint8_t* codes, uint8_t* scales,
                       SegmentStats* st) {
  if (e == Element::kE4m3)
    return mx_encode_rows<Element::kE4m3, R, kSrc>(src, n, codes, scales, st);
  if (e == Element::kE5m2)
    return mx_encode_rows<Element::kE5m2, R, kSrc>(src, n, codes, scales, st);
  mx_encode_rows<Element::kE2m1, R, kSrc>(src, n, codes, scales, st);
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
  encode_columns(src, ld, rows, c0, groups, element, rounding, codes, code_row, scales, scale_row,
                 runs);
}

void mx_encode_columns_f32_avx2(const float* src, int64_t ld, int64_t rows, int64_t c0,
                                int64_t groups, Element element, E8m0Rounding rounding,
                                uint8_t* codes, int64_t code_row, uint8_t* scales,
                                int64_t scale_row, MxStatsRun* runs) {
  encode_columns(src, ld, rows, c0, groups, element, rounding, codes, code_row, scales, scale_row,
                 runs);
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
                                .encode_columns_bf16 = mx_encode_columns_bf16_avx2,
                                .encode_columns_f32 = mx_encode_columns_f32_avx2};

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
