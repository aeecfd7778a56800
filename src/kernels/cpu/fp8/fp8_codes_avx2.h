#pragma once
// The AVX2 FP8 encode shared by the delayed-scaling cast (fp8_cast_avx2.cpp), the block
// recipe's tile cast (fp8_block_avx2.cpp) and the rowwise recipes' casts (rowwise_cast_avx2.cpp):
// saturating RNE codes of 8 float32 lanes, the codes of 16 bfloat16 lanes under a power-of-2
// scale (also the MX casts', mx_blocks_avx2.h), and 32 codes packed into bytes in element order.
// The arithmetic mirrors float8.cpp: normal values round by integer adds on the float32 bits;
// subnormal FP8 values come from adding a power of two whose ulp is the FP8 subnormal quantum,
// which the FPU rounds to nearest even (MXCSR's default mode, which mantissa never changes).
#include <immintrin.h>

#include <bit>
#include <cstdint>

namespace mantissa::kernels::fp8::detail {

// The exponent e of scale = 2^e, a normal float32; false for any other scale.
inline bool pow2_exponent(float scale, int* e) {
  const uint32_t b = std::bit_cast<uint32_t>(scale);
  const uint32_t field = b >> 23;  // 256 and above: negative
  if ((b & 0x007FFFFFu) != 0 || field == 0 || field >= 255) return false;
  *e = static_cast<int>(field) - 127;
  return true;
}

// Saturating codes (sign included, NaN -> 0x7F) of 8 float32 values, in 32-bit lanes.
template <int kMant, int kBias, int kMaxCode>
__attribute__((target("avx2"))) inline __m256i satfinite_codes(__m256 v) {
  constexpr int kDrop = 23 - kMant;
  constexpr int kMinNormalBits = (128 - kBias) << 23;
  constexpr int kMagicBits = (127 + 24 - kBias - kMant) << 23;
  const __m256i x = _mm256_castps_si256(v);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), _mm256_set1_epi32(0x80));
  const __m256i a = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  // Normal range: RNE on the dropped mantissa bits, then rebias (inf lands above kMaxCode).
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, kDrop), _mm256_set1_epi32(1));
  const __m256i r =
      _mm256_add_epi32(a, _mm256_add_epi32(lsb, _mm256_set1_epi32((1 << (kDrop - 1)) - 1)));
  const __m256i normal =
      _mm256_sub_epi32(_mm256_srli_epi32(r, kDrop), _mm256_set1_epi32((127 - kBias) << kMant));
  // Subnormal range: |v| + 2^e with ulp(2^e) = the FP8 quantum; the low bits are the code.
  const __m256 magic = _mm256_castsi256_ps(_mm256_set1_epi32(kMagicBits));
  const __m256 sum = _mm256_add_ps(_mm256_castsi256_ps(a), magic);
  const __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(sum), _mm256_set1_epi32(kMagicBits));
  const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(kMinNormalBits), a);
  __m256i code = _mm256_blendv_epi8(normal, sub, is_sub);
  code = _mm256_min_epi32(code, _mm256_set1_epi32(kMaxCode));  // saturate (inf too)
  code = _mm256_or_si256(code, sign);
  const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7f), nan);
}

// Lane-wise element counts kept in int32 vectors: a compare mask is -1 where true, so
// subtracting it counts. A lane sees one element in 8, so it stays below 2^31 for any call
// shorter than 2^34 elements (the dispatchers hand over chunks of 2^16).
struct LaneCounts {
  __m256i saturated;
  __m256i flushed;
};

__attribute__((target("avx2"))) inline int64_t lane_sum(__m256i v) {
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  int64_t s = 0;
  for (int32_t l : lanes) s += l;
  return s;
}

// satfinite_codes of y = x * scale, counting the elements whose |y| exceeds max_value
// (saturated) and the nonzero x whose code has magnitude 0 (flushed).
template <int kMant, int kBias, int kMaxCode>
__attribute__((target("avx2"))) inline __m256i counted_codes(__m256 x, __m256 y, __m256 max_value,
                                                             LaneCounts& counts) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i codes = satfinite_codes<kMant, kBias, kMaxCode>(y);
  const __m256 sat = _mm256_cmp_ps(_mm256_and_ps(y, abs_mask), max_value, _CMP_GT_OQ);
  const __m256i mag_zero =
      _mm256_cmpeq_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(0x7f)), _mm256_setzero_si256());
  const __m256 flush = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_OQ),
                                     _mm256_castsi256_ps(mag_zero));
  counts.saturated = _mm256_sub_epi32(counts.saturated, _mm256_castps_si256(sat));
  counts.flushed = _mm256_sub_epi32(counts.flushed, _mm256_castps_si256(flush));
  return codes;
}

// FP8 codes (sign included) of 16 bfloat16 values (bits h, 16-bit lanes) times a power of two
// 2^e, in 16-bit lanes: |x| * 2^e has the bits |h| + (e << 7) while it is normal, and its code
// drops 7 - kMant of bfloat16's seven mantissa bits, rounded to nearest even by integer adds as
// satfinite_codes rounds float32's; a code above kMaxCode saturates to it. exponent_add: e << 7
// in each lane; normal_from: max((128 - kBias - e) << 7, 0x80), the smallest |h| whose product
// is a normal FP8 value from a normal x. Lanes below it get code 0 (with x's sign); `slow` is all
// ones in the lanes of those that are not zero, whose codes (subnormal, or 0 for a flushed value)
// must come from the float32 cast; `saturated`, when given, all ones where the product exceeds
// the format's largest value.
template <int kMant, int kBias, int kMaxCode>
__attribute__((target("avx2"))) inline __m256i codes16_pow2(__m256i h, __m256i exponent_add,
                                                            __m256i normal_from, __m256i* slow,
                                                            __m256i* saturated = nullptr) {
  constexpr int kDrop = 7 - kMant;
  // The bfloat16 bits of the largest value: its code rebiased from kBias to 127.
  constexpr int kMaxBits = (kMaxCode + ((127 - kBias) << kMant)) << kDrop;
  const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  const __m256i y = _mm256_add_epi16(a, exponent_add);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(y, kDrop), _mm256_set1_epi16(1));
  const __m256i r =
      _mm256_add_epi16(y, _mm256_add_epi16(lsb, _mm256_set1_epi16((1 << (kDrop - 1)) - 1)));
  __m256i code =
      _mm256_sub_epi16(_mm256_srli_epi16(r, kDrop), _mm256_set1_epi16((127 - kBias) << kMant));
  code = _mm256_min_epi16(code, _mm256_set1_epi16(kMaxCode));
  const __m256i below = _mm256_cmpgt_epi16(normal_from, a);
  *slow = _mm256_andnot_si256(_mm256_cmpeq_epi16(a, _mm256_setzero_si256()), below);
  // Lanes below normal_from have y below the smallest normal (or negative), never above the max.
  if (saturated) *saturated = _mm256_cmpgt_epi16(y, _mm256_set1_epi16(kMaxBits));
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi16(h, 8), _mm256_set1_epi16(0x80));
  return _mm256_or_si256(_mm256_andnot_si256(below, code), sign);
}

// codes16_pow2 in fewer operations where no product exceeds the format's largest value (amax *
// 2^e at most that) and e <= 127 - kBias: rebias, (127 - kBias - e) << 7 in each lane, is
// subtracted from |h| with unsigned saturation, so
// that x = 0 gives code 0 without a mask and every x whose product is a normal FP8 value gets
// codes16_pow2's code. The other lanes (0 < |h| < normal_from: a subnormal or flushed code) get
// no valid code: `low` takes the minimum of |h| - 1 (0 wraps to 0xFFFF) over the vectors, and
// any_below(low, normal_from) says whether one of them held such a lane.
template <int kMant, int kBias>
__attribute__((target("avx2"))) inline __m256i codes16_pow2_in_range(__m256i h, __m256i rebias,
                                                                     __m256i* low) {
  constexpr int kDrop = 7 - kMant;
  const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  *low = _mm256_min_epu16(*low, _mm256_sub_epi16(a, _mm256_set1_epi16(1)));
  const __m256i y = _mm256_subs_epu16(a, rebias);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(y, kDrop), _mm256_set1_epi16(1));
  const __m256i r =
      _mm256_add_epi16(_mm256_add_epi16(y, _mm256_set1_epi16((1 << (kDrop - 1)) - 1)), lsb);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi16(h, 8), _mm256_set1_epi16(0x80));
  return _mm256_or_si256(_mm256_srli_epi16(r, kDrop), sign);
}
// Whether a `low` of codes16_pow2_in_range saw a lane with 0 < |h| < normal_from.
__attribute__((target("avx2"))) inline bool any_below(__m256i low, __m256i normal_from) {
  const __m256i d = _mm256_subs_epu16(_mm256_sub_epi16(normal_from, _mm256_set1_epi16(1)), low);
  return !_mm256_testz_si256(d, d);
}

// The 32 codes of two vectors of 16 (in 16-bit lanes, each below 256), in element order.
__attribute__((target("avx2"))) inline __m256i pack32_bytes16(__m256i a, __m256i b) {
  // packus works within 128-bit lanes: bytes [a0-7 b0-7 | a8-15 b8-15].
  return _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), 0xD8);
}

// The 32 codes of four vectors of 8 (in 32-bit lanes, each below 256), in element order.
__attribute__((target("avx2"))) inline __m256i pack32_bytes(__m256i a, __m256i b, __m256i c,
                                                            __m256i d) {
  // packus works within 128-bit lanes: bytes [a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7].
  const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace mantissa::kernels::fp8::detail
