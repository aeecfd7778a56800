#pragma once
// The AVX2 MX block encode shared by the row casts (mx_rows_fp8_avx2.cpp, mx_rows_e2m1_avx2.cpp)
// and the column casts (mx_columns_*_avx2.cpp): eight blocks' scales from their amax bits
// (block_scales8), a block in float32 lanes (encode_block) or the scalar body, a row segment block
// by block (mx_encode_as), bfloat16 blocks in 16-bit lanes under power-of-2 multipliers
// (mx_encode_bf16), with their statistics, and the per-block constants of a cast on the source's
// bits (RowConstants). A file includes it last, after <immintrin.h>, <algorithm>, <cmath>,
// fp8_codes_avx2.h, mx_cast.h and mx_lanes_avx2.h and after `#pragma GCC target("avx2,fma,f16c")`
// (or a target holding it: the AVX-512 FP8 rows), so that no library code is built for the ISA.

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

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

// block_scales8 with the lanes it leaves taken from mx_scalar.h (e8m0_rceil, rceil_multiplier,
// a NaN amax as the quiet NaN): every block's code and multiplier set.
template <Element E, E8m0Rounding R>
[[gnu::always_inline]] inline void all_block_scales8(__m256i amax_bits, uint8_t* code, float* mul) {
  constexpr ElementLimits lim = element_limits(E);
  unsigned special = block_scales8<E, R>(amax_bits, code, mul);
  if (!special) return;
  alignas(32) uint32_t bits[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax_bits);
  for (; special; special &= special - 1) {
    const int b = __builtin_ctz(special);
    const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
    code[b] = e8m0_rceil(a, lim.max);
    mul[b] = rceil_multiplier(code[b], a, lim.max);
  }
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
// encode_groups): its amax by integer maxima of the
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

}  // namespace
}  // namespace mantissa::kernels::mx::detail
