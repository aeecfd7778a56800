// AVX2 (+FMA, F16C) bodies of the block-format casts, 8 lanes at a time: one MX block is four
// vectors, one NVFP4 block two. The arithmetic is the AVX-512 body's (mx_cast_avx512.cpp) with
// blends for masks; blocks whose multiplier is NaN, and a row's short last block, run the
// scalar body. A bfloat16 source's MXFP8 blocks are cast 16 lanes at a time in 16-bit lanes
// where their multiplier is a normal power of 2 (an exponent add and integer rounding, the same
// codes), and the transposed cast's columns are cast down the rows without a transpose of the
// source, their codes transposed in registers.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/cpu/common/e2m1_eight_avx2.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/hadamard_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "kernels/cpu/mx/philox.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;

inline __m256 load8(const void* src, DType dtype, int64_t i) {
  if (dtype == kFloat32) return _mm256_loadu_ps(static_cast<const float*>(src) + i);
  const __m128i h =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(src) + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline __m256 abs8(__m256 x) {
  return _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7FFFFFFF)));
}

inline bool any_nan(__m256 x) { return _mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0; }

inline float hmax(__m256 m) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

inline __m256 clamp8(__m256 y, float max) {
  return _mm256_min_ps(_mm256_set1_ps(max), _mm256_max_ps(_mm256_set1_ps(-max), y));
}

template <int kMant, int kBias>
inline __m256i fp8_codes(__m256 y) {
  constexpr int kDrop = 23 - kMant;
  constexpr int kMinNormalBits = (128 - kBias) << 23;
  constexpr int kMagicBits = (127 + 24 - kBias - kMant) << 23;
  const __m256i x = _mm256_castps_si256(y);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), _mm256_set1_epi32(0x80));
  const __m256i a = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, kDrop), _mm256_set1_epi32(1));
  const __m256i r =
      _mm256_add_epi32(a, _mm256_add_epi32(lsb, _mm256_set1_epi32((1 << (kDrop - 1)) - 1)));
  const __m256i normal =
      _mm256_sub_epi32(_mm256_srli_epi32(r, kDrop), _mm256_set1_epi32((127 - kBias) << kMant));
  const __m256 sum =
      _mm256_add_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(_mm256_set1_epi32(kMagicBits)));
  const __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(sum), _mm256_set1_epi32(kMagicBits));
  const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(kMinNormalBits), a);
  __m256i code = _mm256_blendv_epi8(normal, sub, is_sub);
  const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000));
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7F), nan);
  return _mm256_or_si256(code, sign);
}

inline __m256i e2m1_codes(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 28), _mm256_set1_epi32(8));
  const __m256i a = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256 af = _mm256_castsi256_ps(a);
  const __m256i sat = _mm256_castps_si256(_mm256_cmp_ps(af, _mm256_set1_ps(kE2m1Max), _CMP_GE_OQ));
  const __m256i den = _mm256_castps_si256(_mm256_cmp_ps(af, _mm256_set1_ps(1.0f), _CMP_LT_OQ));
  const __m256i dcode =
      _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(af, _mm256_set1_ps(0x1p22f))),
                       _mm256_set1_epi32(149 << 23));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(a, 22), _mm256_set1_epi32(1));
  const __m256i biased = _mm256_add_epi32(
      _mm256_add_epi32(a, _mm256_set1_epi32(static_cast<int>(0xC1000000u + 0x1FFFFFu))), odd);
  const __m256i ncode = _mm256_and_si256(_mm256_srli_epi32(biased, 22), _mm256_set1_epi32(0xFF));
  __m256i code = _mm256_blendv_epi8(ncode, dcode, den);
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(7), sat);
  return _mm256_or_si256(code, sign);
}

// 8 int32 codes (each <= 0xFF) -> 8 bytes in the low half of the result.
inline __m128i bytes_of(__m256i codes) {
  const __m128i p16 =
      _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
  return _mm_packus_epi16(p16, p16);
}

// 8 E2M1 codes -> 4 bytes, even element in the low nibble.
inline void store_e2m1(uint8_t* dst, __m256i codes) {
  const __m128i p16 =
      _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
  const __m128i pairs = _mm_madd_epi16(p16, _mm_set1_epi32(0x00100001));  // even + 16 * odd
  const __m128i b = _mm_packus_epi16(_mm_packus_epi32(pairs, pairs), _mm_setzero_si128());
  const int word = _mm_cvtsi128_si32(b);
  __builtin_memcpy(dst, &word, 4);
}

inline void store_codes(uint8_t* codes, int64_t i, __m256 y, Element e) {
  if (e == Element::kE2m1) {
    store_e2m1(codes + i / 2, e2m1_codes(y));
    return;
  }
  const __m256i c = e == Element::kE4m3 ? fp8_codes<3, 7>(y) : fp8_codes<2, 15>(y);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i), bytes_of(c));
}

const char* at(const void* src, DType dtype, int64_t i) {
  return static_cast<const char*>(src) + i * static_cast<int64_t>(dtype.itemsize());
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

// Per 128-bit half: [max(a0, a1), max(a2, a3), max(b0, b1), max(b2, b3)].
inline __m256i pair_max(__m256i a, __m256i b) {
  const __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
  return _mm256_max_epi32(_mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0))),
                          _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1))));
}

// Lane b of the result: the largest of v[b]'s 8 lanes (non-negative int32).
inline __m256i transposed_max8(const __m256i* v) {
  const __m256i lo = pair_max(pair_max(v[0], v[1]), pair_max(v[2], v[3]));  // v[0..3] per half
  const __m256i hi = pair_max(pair_max(v[4], v[5]), pair_max(v[6], v[7]));  // v[4..7] per half
  return _mm256_max_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),
                          _mm256_permute2x128_si256(lo, hi, 0x31));
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

// Lane b (32-bit) of the result: the largest of m[b]'s 16 lanes (non-negative int16) as
// float32 bits (shifted into the high half).
inline __m256i transposed_max8_16(const __m256i* m) {
  __m256i t[4], u[2];
  // Each step halves the lanes per vector and doubles the vectors per lane group.
  for (int k = 0; k < 4; ++k)
    t[k] = _mm256_max_epi16(_mm256_unpacklo_epi16(m[2 * k], m[2 * k + 1]),
                            _mm256_unpackhi_epi16(m[2 * k], m[2 * k + 1]));
  for (int k = 0; k < 2; ++k)
    u[k] = _mm256_max_epi16(_mm256_unpacklo_epi32(t[2 * k], t[2 * k + 1]),
                            _mm256_unpackhi_epi32(t[2 * k], t[2 * k + 1]));
  const __m256i v =
      _mm256_max_epi16(_mm256_unpacklo_epi64(u[0], u[1]), _mm256_unpackhi_epi64(u[0], u[1]));
  const __m128i w = _mm_max_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm256_slli_epi32(_mm256_cvtepu16_epi32(w), 16);
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

// 8 E2M1 codes from 4 bytes -> their values.
inline __m256 e2m1_values(const uint8_t* src) {
  uint32_t word;
  __builtin_memcpy(&word, src, 4);
  return e2m1_eight(word);
}

// The values of 8 E4M3 codes without a table (as mx_cast_avx512.cpp's e4m3_values).
inline __m256 e4m3_values(__m256i c) {
  const __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(0x7F));
  const __m256i sign = _mm256_and_si256(c, _mm256_set1_epi32(0x80));
  const __m256i half = _mm256_or_si256(_mm256_slli_epi32(mag, 7), _mm256_slli_epi32(sign, 8));
  const __m128i halves =
      _mm_packus_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(halves), _mm256_set1_ps(256.0f));
  const __m256i nan = _mm256_or_si256(_mm256_slli_epi32(sign, 24), _mm256_set1_epi32(0x7FF00000));
  return _mm256_blendv_ps(v, _mm256_castsi256_ps(nan),
                          _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F))));
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

// scalar::nvfp4_block_scale for 8 blocks at once: their E4M3 codes and factors.
inline __m256 nvfp4_block_scales(__m256 amax, float tensor_scale, __m256i& code) {
  __m256 s =
      _mm256_div_ps(_mm256_div_ps(amax, _mm256_set1_ps(kE2m1Max)), _mm256_set1_ps(tensor_scale));
  s = _mm256_min_ps(_mm256_set1_ps(kE4m3Max), _mm256_max_ps(_mm256_set1_ps(0x1p-6f), s));
  code = fp8_codes<3, 7>(s);
  return _mm256_div_ps(_mm256_set1_ps(1.0f / tensor_scale), e4m3_values(code));
}
inline void nvfp4_block_scales(const float* amax, float tensor_scale, uint8_t* code,
                               float* factor) {
  __m256i c;
  _mm256_storeu_ps(factor, nvfp4_block_scales(_mm256_loadu_ps(amax), tensor_scale, c));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(code), bytes_of(c));
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

// Philox4x32-10 on 8 lanes (kernels/cpu/mx/philox.h).
inline void mulhilo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  lo = _mm256_mullo_epi32(a, m);
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, m), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(even, odd, 0xAA);
}

// The ten rounds' keys of `seed`, each word in every lane and as a scalar (one stream's keys,
// made once).
struct PhiloxKeys8 {
  __m256i k[10][2];
  uint32_t s[10][2];
  explicit PhiloxKeys8(uint64_t seed) {
    PhiloxKey key = sr_key(seed);
    for (int round = 0; round < 10; ++round) {
      s[round][0] = key[0];
      s[round][1] = key[1];
      k[round][0] = _mm256_set1_epi32(static_cast<int>(key[0]));
      k[round][1] = _mm256_set1_epi32(static_cast<int>(key[1]));
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
  }
};

constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;

// c[k] holds word k of 8 counters, one a lane, after kFirst rounds; on return, word k of what
// Philox makes of them. The rounds are unrolled on local copies, so the four words stay in
// registers (through memory, each round would load and store them).
template <int kFirst>
inline void philox8(const PhiloxKeys8& keys, __m256i* c) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxMul0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxMul1));
  __m256i w0 = c[0], w1 = c[1], w2 = c[2], w3 = c[3];
#pragma GCC unroll 10
  for (int round = kFirst; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo(w0, m0, hi0, lo0);
    mulhilo(w2, m1, hi1, lo1);
    w0 = _mm256_xor_si256(_mm256_xor_si256(hi1, w1), keys.k[round][0]);
    w1 = lo1;
    w2 = _mm256_xor_si256(_mm256_xor_si256(hi0, w3), keys.k[round][1]);
    w3 = lo0;
  }
  c[0] = w0;
  c[1] = w1;
  c[2] = w2;
  c[3] = w3;
}

inline __m256i splat(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }

// A round's product of a word the same in every lane, in scalar: {high, low} 32 bits.
inline std::pair<uint32_t, uint32_t> mulhilo(uint32_t a, uint32_t m) {
  const uint64_t p = static_cast<uint64_t>(m) * a;
  return {static_cast<uint32_t>(p >> 32), static_cast<uint32_t>(p)};
}

// philox8 of counters (c0 + lane, c1, c2, c3): words 1-3 the same in every lane, so round 0's
// product of word 2 and round 1's of word 0 are taken once, in scalar.
inline void philox8_lanes_in_word0(const PhiloxKeys8& keys, __m256i c0, uint32_t c1, uint32_t c2,
                                   uint32_t c3, __m256i* out) {
  const __m256i m0 = splat(kPhiloxMul0), m1 = splat(kPhiloxMul1);
  __m256i hi, lo;
  // Round 0: (hi(c2) ^ c1 ^ k, lo(c2), hi(c0) ^ c3 ^ k, lo(c0)), the first two uniform.
  const auto [h2, l2] = mulhilo(c2, kPhiloxMul1);
  mulhilo(c0, m0, hi, lo);
  const uint32_t u0 = h2 ^ c1 ^ keys.s[0][0], u1 = l2;
  const __m256i v2 = _mm256_xor_si256(hi, splat(c3 ^ keys.s[0][1])), v3 = lo;
  // Round 1: word 0's product uniform.
  const auto [h0, l0] = mulhilo(u0, kPhiloxMul0);
  mulhilo(v2, m1, hi, lo);
  out[0] = _mm256_xor_si256(hi, splat(u1 ^ keys.s[1][0]));
  out[1] = lo;
  out[2] = _mm256_xor_si256(splat(h0 ^ keys.s[1][1]), v3);
  out[3] = splat(l0);
  philox8<2>(keys, out);
}

// philox8 of counters (c0, c1 + lane, c2, c3): round 0 is uniform, and so are round 1's product
// of word 2 and round 2's of word 0, all taken once, in scalar.
inline void philox8_lanes_in_word1(const PhiloxKeys8& keys, uint32_t c0, __m256i c1, uint32_t c2,
                                   uint32_t c3, __m256i* out) {
  const __m256i m0 = splat(kPhiloxMul0), m1 = splat(kPhiloxMul1);
  __m256i hi, lo;
  // Round 0: only word 0 of the result varies (by c1).
  const auto [h0, l0] = mulhilo(c0, kPhiloxMul0);
  const auto [h2, l2] = mulhilo(c2, kPhiloxMul1);
  const __m256i v0 = _mm256_xor_si256(splat(h2 ^ keys.s[0][0]), c1);
  const uint32_t u1 = l2, u2 = h0 ^ c3 ^ keys.s[0][1], u3 = l0;
  // Round 1: words 0 and 1 of the result uniform.
  mulhilo(v0, m0, hi, lo);
  const auto [g2, k2] = mulhilo(u2, kPhiloxMul1);
  const uint32_t w0 = g2 ^ u1 ^ keys.s[1][0], w1 = k2;
  const __m256i x2 = _mm256_xor_si256(hi, splat(u3 ^ keys.s[1][1])), x3 = lo;
  // Round 2: word 0's product uniform.
  const auto [g0, k0] = mulhilo(w0, kPhiloxMul0);
  mulhilo(x2, m1, hi, lo);
  out[0] = _mm256_xor_si256(hi, splat(w1 ^ keys.s[2][0]));
  out[1] = lo;
  out[2] = _mm256_xor_si256(splat(g0 ^ keys.s[2][1]), x3);
  out[3] = splat(k0);
  philox8<3>(keys, out);
}

// The 16 counter blocks first_block.. of `row` (philox.h, sr_counter): out[h][k] holds word k of
// blocks first_block + 8h + lane.
inline void philox16(const PhiloxKeys8& keys, uint64_t offset, uint64_t row, uint64_t first_block,
                     __m256i (&out)[2][4]) {
  const PhiloxCounter base = sr_counter(first_block, row, offset);
  for (int h = 0; h < 2; ++h)
    philox8_lanes_in_word0(
        keys, _mm256_add_epi32(splat(base[0] + 8 * h), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
        base[1], base[2], base[3], out[h]);
}

// scalar::e2m1_code_stochastic on 8 lanes, in integers on the bits of a = min(|v|, 6) where the
// grid allows. From 1 up the grid's step is the unit of a's mantissa bit 22: lo is a with the
// 22 bits below cleared, its code (a >> 22) - 252, and frac * 2^24 those 22 bits times 4. In
// [0.5, 1) lo is 0.5 (code 1) and frac * 2^24 is a's 23-bit mantissa times 2. Both are
// (a << 10 or 9) >> 8, whole numbers, so `random >> 8 < frac * 2^24` is an integer compare.
// Below 0.5, lo is 0 and frac * 2^24 = a * 2^25 (exact), compared in float as the scalar code
// does. Rounding up adds one to the code. NaN lanes take e2m1_codes' answer.
inline __m256i e2m1_codes_stochastic(__m256 v, __m256i random) {
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256i sign =
      _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 28), _mm256_set1_epi32(8));
  const __m256 af = _mm256_min_ps(abs8(v), _mm256_set1_ps(kE2m1Max));
  const __m256i a = _mm256_castps_si256(af);
  const __m256i u = _mm256_srli_epi32(random, 8);
  const __m256i from1 = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3F7FFFFF));
  const __m256i below_half = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3F000000), a);
  const __m256i frac24 =
      _mm256_srli_epi32(_mm256_sllv_epi32(a, _mm256_sub_epi32(_mm256_set1_epi32(9), from1)), 8);
  const __m256i up_grid = _mm256_cmpgt_epi32(frac24, u);
  const __m256i up_small = _mm256_castps_si256(
      _mm256_cmp_ps(_mm256_cvtepi32_ps(u), _mm256_mul_ps(af, _mm256_set1_ps(0x1p25f)), _CMP_LT_OQ));
  const __m256i up = _mm256_blendv_epi8(up_grid, up_small, below_half);  // -1 where rounding up
  const __m256i lo_code = _mm256_andnot_si256(
      below_half, _mm256_blendv_epi8(
                      _mm256_set1_epi32(1),
                      _mm256_sub_epi32(_mm256_srli_epi32(a, 22), _mm256_set1_epi32(252)), from1));
  const __m256i code = _mm256_or_si256(_mm256_sub_epi32(lo_code, up), sign);
  if (_mm256_movemask_ps(nan) == 0) return code;
  return _mm256_blendv_epi8(code, e2m1_codes(v), _mm256_castps_si256(nan));
}

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
    for (int q = 0; q < 4; ++q) {
      x[q] = load8(src, dtype, i + 8 * q);
      nan |= any_nan(x[q]);
      m = _mm256_max_ps(abs8(x[q]), m);
    }
    const uint8_t s = nan ? kE8m0Nan : e8m0_floor(hmax(m), element_limits(Element::kE2m1).max_pow2);
    scales[i / kMxBlock] = s;
    const __m256 r = _mm256_set1_ps(floor_reciprocal(s));
    for (int q = 0; q < 4; ++q) {
      const int64_t c = col + 8 * q;  // column 64 g + 16 k + l: word k of lane l's counter
      store_e2m1(codes + i / 2 + 4 * q,
                 e2m1_codes_stochastic(_mm256_mul_ps(_mm256_mul_ps(x[q], r), prescale),
                                       words[(c >> 3) & 1][(c >> 4) & 3]));
    }
  }
}

// Lane k: the largest lane of m[k] (no lane NaN).
inline __m256 lane_maxima(const __m256* m) {
  const __m256 t0 = _mm256_max_ps(_mm256_permute2f128_ps(m[0], m[4], 0x20),
                                  _mm256_permute2f128_ps(m[0], m[4], 0x31));
  const __m256 t1 = _mm256_max_ps(_mm256_permute2f128_ps(m[1], m[5], 0x20),
                                  _mm256_permute2f128_ps(m[1], m[5], 0x31));
  const __m256 t2 = _mm256_max_ps(_mm256_permute2f128_ps(m[2], m[6], 0x20),
                                  _mm256_permute2f128_ps(m[2], m[6], 0x31));
  const __m256 t3 = _mm256_max_ps(_mm256_permute2f128_ps(m[3], m[7], 0x20),
                                  _mm256_permute2f128_ps(m[3], m[7], 0x31));
  const __m256 u0 = _mm256_max_ps(_mm256_unpacklo_ps(t0, t1), _mm256_unpackhi_ps(t0, t1));
  const __m256 u1 = _mm256_max_ps(_mm256_unpacklo_ps(t2, t3), _mm256_unpackhi_ps(t2, t3));
  return _mm256_max_ps(_mm256_shuffle_ps(u0, u1, 0x44), _mm256_shuffle_ps(u0, u1, 0xEE));
}

// The NVFP4 cast of a segment, 8 blocks at a time: their amax (each block's own, NaN where it
// holds one, or block_amax_in's), scales and factors as one vector, then each block's codes,
// rounded to nearest or (kSr) stochastically. With kStats it returns nvfp4_run_stats's counts of
// the segment, taken from the vectors the cast holds: a block's amax with NaN passed over is
// the lane maximum the cast takes anyway, |x * factor| > 6 is the saturation test, and a code
// whose magnitude bits are 0 from x != 0 (not NaN) is flushed. Blocks whose factor is NaN, and a
// row's short last block, run the scalar body and are counted by nvfp4_run_stats.
template <bool kSr, bool kStats>
MxStatsRun nvfp4_encode_body(const void* src, DType dtype, int64_t n, float tensor_scale,
                             const float* block_amax_in, uint64_t seed, uint64_t offset,
                             int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  const int64_t blocks = n / kNvfp4Block, full = blocks * kNvfp4Block;
  const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(kE2m1Max);
  const __m256i magnitude = _mm256_set1_epi32(7);
  __m256 best = zero, peak = zero;  // lane maxima of block amaxes and of amax * factor
  __m256i saturated = _mm256_setzero_si256(), flushed = saturated;  // counts less -1 mask lanes
  MxStatsRun run;
  __m256i words[2][4];  // lanes 0-7 and 8-15 of the column group's 16 counter blocks
  int64_t group = -1;
  std::optional<PhiloxKeys8> keys;
  if constexpr (kSr) keys.emplace(seed);
  auto scalar_block = [&](int64_t b, int64_t i, int64_t len) {
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
  for (int64_t b0 = 0; b0 < blocks; b0 += 8) {
    const int count = static_cast<int>(std::min<int64_t>(8, blocks - b0));
    __m256 m[8];
    int nan_blocks = 0;
    for (int k = 0; k < 8; ++k) {
      if (k >= count) {
        m[k] = zero;
        continue;
      }
      const int64_t i = (b0 + k) * kNvfp4Block;
      const __m256 x0 = load8(src, dtype, i), x1 = load8(src, dtype, i + 8);
      // max's second operand where the first is NaN: NaN passed over.
      m[k] = _mm256_max_ps(abs8(x1), _mm256_max_ps(abs8(x0), zero));
      nan_blocks |= (_mm256_movemask_ps(_mm256_cmp_ps(x0, x1, _CMP_UNORD_Q)) != 0) << k;
    }
    const __m256 own = lane_maxima(m);
    alignas(32) float amaxes[8];
    if (block_amax_in) {
      for (int k = 0; k < 8; ++k) amaxes[k] = k < count ? block_amax_in[b0 + k] : 0.0f;
    } else {
      const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
      const __m256i nan_lane =
          _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(nan_blocks), bit), bit);
      _mm256_store_ps(
          amaxes,
          _mm256_blendv_ps(own, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(kQuietNan))),
                           _mm256_castsi256_ps(nan_lane)));
    }
    alignas(32) float factors[8];
    uint8_t scale_codes[8];
    nvfp4_block_scales(amaxes, tensor_scale, scale_codes, factors);
    if constexpr (kStats) {
      best = _mm256_max_ps(own, best);
      peak = _mm256_max_ps(_mm256_mul_ps(own, _mm256_load_ps(factors)), peak);  // NaN passed over
    }
    for (int k = 0; k < count; ++k) {
      const int64_t b = b0 + k, i = b * kNvfp4Block;
      const float factor = factors[k];
      if (factor != factor) {  // NaN factor: the scalar body keeps each NaN's sign
        scalar_block(b, i, kNvfp4Block);
        continue;
      }
      scales[b] = scale_codes[k];
      const int64_t col = first_col + i;
      if constexpr (kSr) {
        if (col >> 6 != group) {
          group = col >> 6;
          philox16(*keys, offset, static_cast<uint64_t>(row), 16 * static_cast<uint64_t>(group),
                   words);
        }
      }
      const __m256 f = _mm256_set1_ps(factor);
      for (int h = 0; h < 2; ++h) {
        const __m256 x = load8(src, dtype, i + 8 * h);
        const __m256 y = _mm256_mul_ps(x, f);
        __m256i code;
        if constexpr (kSr) {
          code = e2m1_codes_stochastic(y, words[h][(col >> 4) & 3]);
        } else {
          code = e2m1_codes(y);
        }
        store_e2m1(codes + i / 2 + 4 * h, code);
        if constexpr (kStats) {
          saturated = _mm256_sub_epi32(
              saturated, _mm256_castps_si256(_mm256_cmp_ps(abs8(y), six, _CMP_GT_OQ)));
          const __m256i zero_code =
              _mm256_cmpeq_epi32(_mm256_and_si256(code, magnitude), _mm256_setzero_si256());
          const __m256 nonzero = _mm256_cmp_ps(x, zero, _CMP_NEQ_OQ);
          flushed =
              _mm256_sub_epi32(flushed, _mm256_and_si256(zero_code, _mm256_castps_si256(nonzero)));
        }
      }
    }
  }
  if (full < n) scalar_block(blocks, full, n - full);
  if constexpr (kStats) {
    if (blocks > 0) {
      run.best = std::max(run.best, hmax(best));
      // max of amax * factor / 6 over the blocks is their max over 6 (division is monotonic).
      run.peak = std::max(run.peak, static_cast<double>(hmax(peak)) / kE2m1Max);
    }
    alignas(32) int32_t lanes[2][8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[0]), saturated);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[1]), flushed);
    for (int k = 0; k < 8; ++k) {
      run.saturated += lanes[0][k];
      run.flushed += lanes[1][k];
    }
  }
  return run;
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

float amax(const void* src, DType dtype, int64_t n) {
  const int64_t full = n / 8 * 8;
  __m256 m = _mm256_setzero_ps();
  __m256 nan = _mm256_setzero_ps();
  for (int64_t i = 0; i < full; i += 8) {
    const __m256 x = load8(src, dtype, i);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    m = _mm256_max_ps(m, abs8(x));
  }
  if (_mm256_movemask_ps(nan) != 0) return float_of(kQuietNan);
  const float vec = hmax(m);
  const float tail = kScalarKernels.amax(at(src, dtype, full), dtype, n - full);
  return tail != tail ? tail : (tail > vec ? tail : vec);
}

// The codes of 8 blocks held across registers (lane k of y[i]: element i of block k) as each
// block's 8 bytes, the even element in the low nibble: block k's at dst[k * stride].
inline void store_e2m1_columns(const __m256i* c, uint8_t* dst, int64_t stride) {
  __m256i p[8];
  for (int j = 0; j < 8; ++j) p[j] = _mm256_or_si256(c[2 * j], _mm256_slli_epi32(c[2 * j + 1], 4));
  // Per 128-bit half h: byte 4j + k' is pair j of block 4h + k' (pairs 0-3, then 4-7).
  const __m256i lo =
      _mm256_packus_epi16(_mm256_packus_epi32(p[0], p[1]), _mm256_packus_epi32(p[2], p[3]));
  const __m256i hi =
      _mm256_packus_epi16(_mm256_packus_epi32(p[4], p[5]), _mm256_packus_epi32(p[6], p[7]));
  // 4x4 byte transposes: dword k' becomes block 4h + k''s four pairs.
  const __m256i order = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4,
                                         8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i a = _mm256_shuffle_epi8(lo, order), b = _mm256_shuffle_epi8(hi, order);
  const __m256i q01 = _mm256_unpacklo_epi32(a, b);  // per half: blocks 4h, 4h + 1
  const __m256i q23 = _mm256_unpackhi_epi32(a, b);  // per half: blocks 4h + 2, 4h + 3
  const __m128i r[4] = {_mm256_castsi256_si128(q01), _mm256_castsi256_si128(q23),
                        _mm256_extracti128_si256(q01, 1), _mm256_extracti128_si256(q23, 1)};
  for (int t = 0; t < 4; ++t) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * t) * stride), r[t]);
    _mm_storeh_pd(reinterpret_cast<double*>(dst + (2 * t + 1) * stride), _mm_castsi128_pd(r[t]));
  }
}

}  // namespace

void nvfp4_rht_columns_avx2(const void* src, DType dtype, int64_t cols, int64_t c0, int64_t m_begin,
                            int64_t m_end, const Nvfp4Encoding& e, uint8_t* codes, int64_t code_row,
                            uint8_t* scales, int64_t scale_row) {
  const bool sr = e.rounding == Fp4Rounding::kStochastic;
  const float ts = e.tensor_scale;
  std::optional<PhiloxKeys8> keys;
  if (sr) keys.emplace(e.seed);
  const PhiloxCounter base = sr_counter(0, static_cast<uint64_t>(c0), e.offset);
  const __m256i rows_of_lanes = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base[1])),
                                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i words[kRhtSize][4];  // element i's word q of the 64-column group, lane: the row
  int64_t group = -1;
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  for (int64_t m0 = m_begin; m0 < m_end; m0 += kRhtSize) {
    __m256 v[kRhtSize];
    rht_avx2::butterflies8(src, dtype, cols, m0, c0, v);
    __m256i bits = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int64_t i = 0; i < kRhtSize; ++i) {
      v[i] = _mm256_mul_ps(v[i], _mm256_set1_ps(0.25f));
      bits = _mm256_max_epu32(bits, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
    }
    const __m256i nan = _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(0x7F800000));
    const __m256 amax = _mm256_castsi256_ps(
        _mm256_blendv_epi8(bits, _mm256_set1_epi32(static_cast<int>(kQuietNan)), nan));
    __m256i scale_codes;
    const __m256 factor = nvfp4_block_scales(amax, ts, scale_codes);
    uint8_t* cp = codes + c0 * code_row + m0 / 2;
    uint8_t* sp = scales + c0 * scale_row + m0 / kNvfp4Block;
    if (_mm256_movemask_ps(_mm256_cmp_ps(factor, factor, _CMP_UNORD_Q)) != 0) {
      // A NaN factor: the blocks from the transform's rows, by the scalar body.
      rht_avx2::transpose8(v);
      rht_avx2::transpose8(v + 8);
      alignas(32) float rows[8][kRhtSize];
      for (int k = 0; k < 8; ++k) {
        _mm256_store_ps(rows[k], v[k]);
        _mm256_store_ps(rows[k] + 8, v[8 + k]);
        if (sr) {
          kScalarKernels.nvfp4_encode_sr(rows[k], kFloat32, kRhtSize, ts, nullptr, e.seed, e.offset,
                                         c0 + k, m0, cp + k * code_row, sp + k * scale_row);
        } else {
          kScalarKernels.nvfp4_encode(rows[k], kFloat32, kRhtSize, ts, nullptr, cp + k * code_row,
                                      sp + k * scale_row);
        }
      }
      continue;
    }
    alignas(16) uint8_t sb[16];
    _mm_storel_epi64(reinterpret_cast<__m128i*>(sb), bytes_of(scale_codes));
    for (int k = 0; k < 8; ++k) sp[k * scale_row] = sb[k];
    __m256i c[kRhtSize];
    if (sr) {
      if (m0 >> 6 != group) {
        // Element i of every block of the group reads counter block 16 * group + i.
        group = m0 >> 6;
        for (int64_t i = 0; i < kRhtSize; ++i)
          philox8_lanes_in_word1(*keys, static_cast<uint32_t>(16 * group + i), rows_of_lanes,
                                 base[2], base[3], words[i]);
      }
      const int q = static_cast<int>((m0 >> 4) & 3);
#pragma GCC unroll 16
      for (int64_t i = 0; i < kRhtSize; ++i)
        c[i] = e2m1_codes_stochastic(_mm256_mul_ps(v[i], factor), words[i][q]);
    } else {
#pragma GCC unroll 16
      for (int64_t i = 0; i < kRhtSize; ++i) c[i] = e2m1_codes(_mm256_mul_ps(v[i], factor));
    }
    store_e2m1_columns(c, cp, code_row);
  }
}

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
                                .nvfp4_encode = nvfp4_encode,
                                .nvfp4_encode_sr = nvfp4_encode_sr,
                                .nvfp4_decode = nvfp4_decode,
                                .amax = amax,
                                .nvfp4_encode_stats = nvfp4_encode_stats,
                                .mxfp4_encode_sr = mxfp4_encode_sr,
                                .encode_columns_bf16 = mx_encode_columns_bf16_avx2};

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
