#pragma once
// Internal: the 8-lane helpers that the AVX2 block-format casts share, the MX ones
// (mx_*_avx2.cpp) and the NVFP4 and MXFP4-SR ones (nvfp4_*_avx2.cpp): loads of float32 or
// bfloat16 sources, FP8 (E4M3, E5M2) and E2M1 codes of float32 lanes and their packing into
// bytes, the values of E2M1 and E4M3 codes, and the lane maxima of eight vectors at once. Each
// carries its target and is always inlined, so only the AVX2 files that call it compile it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/common/e2m1_eight_avx2.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "mantissa/core/dtype.h"

#define MX_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace mantissa::kernels::mx::avx2_lanes {

MX_AVX2 __m256 load8(const void* src, DType dtype, int64_t i) {
  if (dtype == kFloat32) return _mm256_loadu_ps(static_cast<const float*>(src) + i);
  const __m128i h =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(src) + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

MX_AVX2 __m256 abs8(__m256 x) {
  return _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7FFFFFFF)));
}

MX_AVX2 bool any_nan(__m256 x) {
  return _mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0;
}

MX_AVX2 float hmax(__m256 m) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

template <int kMant, int kBias>
MX_AVX2 __m256i fp8_codes(__m256 y) {
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

MX_AVX2 __m256i e2m1_codes(__m256 v) {
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
MX_AVX2 __m128i bytes_of(__m256i codes) {
  const __m128i p16 =
      _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
  return _mm_packus_epi16(p16, p16);
}

// 8 E2M1 codes -> 4 bytes, even element in the low nibble.
MX_AVX2 void store_e2m1(uint8_t* dst, __m256i codes) {
  const __m128i p16 =
      _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
  const __m128i pairs = _mm_madd_epi16(p16, _mm_set1_epi32(0x00100001));  // even + 16 * odd
  const __m128i b = _mm_packus_epi16(_mm_packus_epi32(pairs, pairs), _mm_setzero_si128());
  const int word = _mm_cvtsi128_si32(b);
  __builtin_memcpy(dst, &word, 4);
}

MX_AVX2 const char* at(const void* src, DType dtype, int64_t i) {
  return static_cast<const char*>(src) + i * static_cast<int64_t>(dtype.itemsize());
}

// 8 E2M1 codes from 4 bytes -> their values.
MX_AVX2 __m256 e2m1_values(const uint8_t* src) {
  uint32_t word;
  __builtin_memcpy(&word, src, 4);
  return e2m1_eight(word);
}

// The values of 8 E4M3 codes without a table (as mx_cast_avx512.cpp's e4m3_values).
MX_AVX2 __m256 e4m3_values(__m256i c) {
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

// Per 128-bit half: [max(a0, a1), max(a2, a3), max(b0, b1), max(b2, b3)].
MX_AVX2 __m256i pair_max(__m256i a, __m256i b) {
  const __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
  return _mm256_max_epi32(_mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0))),
                          _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1))));
}

// Lane b of the result: the largest of v[b]'s 8 lanes (non-negative int32).
MX_AVX2 __m256i transposed_max8(const __m256i* v) {
  const __m256i lo = pair_max(pair_max(v[0], v[1]), pair_max(v[2], v[3]));  // v[0..3] per half
  const __m256i hi = pair_max(pair_max(v[4], v[5]), pair_max(v[6], v[7]));  // v[4..7] per half
  return _mm256_max_epi32(_mm256_permute2x128_si256(lo, hi, 0x20),
                          _mm256_permute2x128_si256(lo, hi, 0x31));
}

// Lane b (16-bit) of the result: the largest of m[b]'s 16 lanes (non-negative int16), for
// kBlocks = 8 (in the low 128 bits) or 16 vectors. Each step halves the lanes a vector holds in
// each 128-bit half and doubles the vectors (unrolled, so the steps stay in registers); the
// last takes the two halves' maxima.
template <int kBlocks>
MX_AVX2 __m256i transposed_max16(const __m256i* m) {
  static_assert(kBlocks == 8 || kBlocks == 16);
  __m256i t[kBlocks / 2], u[kBlocks / 4], w[kBlocks / 8];
#pragma GCC unroll 8
  for (int k = 0; k < kBlocks / 2; ++k)
    t[k] = _mm256_max_epi16(_mm256_unpacklo_epi16(m[2 * k], m[2 * k + 1]),
                            _mm256_unpackhi_epi16(m[2 * k], m[2 * k + 1]));
#pragma GCC unroll 4
  for (int k = 0; k < kBlocks / 4; ++k)
    u[k] = _mm256_max_epi16(_mm256_unpacklo_epi32(t[2 * k], t[2 * k + 1]),
                            _mm256_unpackhi_epi32(t[2 * k], t[2 * k + 1]));
#pragma GCC unroll 2
  for (int k = 0; k < kBlocks / 8; ++k)
    w[k] = _mm256_max_epi16(_mm256_unpacklo_epi64(u[2 * k], u[2 * k + 1]),
                            _mm256_unpackhi_epi64(u[2 * k], u[2 * k + 1]));
  if constexpr (kBlocks == 16)
    return _mm256_max_epi16(_mm256_permute2x128_si256(w[0], w[1], 0x20),
                            _mm256_permute2x128_si256(w[0], w[1], 0x31));
  else
    return _mm256_castsi128_si256(
        _mm_max_epi16(_mm256_castsi256_si128(w[0]), _mm256_extracti128_si256(w[0], 1)));
}

// Lane b (32-bit) of the result: the largest of m[b]'s 16 lanes (non-negative int16) as
// float32 bits (shifted into the high half).
MX_AVX2 __m256i transposed_max8_16(const __m256i* m) {
  return _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(transposed_max16<8>(m))),
                           16);
}

// pair_max's unsigned minima.
MX_AVX2 __m256i pair_min_u32(__m256i a, __m256i b) {
  const __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
  return _mm256_min_epu32(_mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0))),
                          _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1))));
}

// Lane b of the result: the smallest of v[b]'s 8 lanes as unsigned int32.
MX_AVX2 __m256i transposed_min8_u32(const __m256i* v) {
  const __m256i lo = pair_min_u32(pair_min_u32(v[0], v[1]), pair_min_u32(v[2], v[3]));
  const __m256i hi = pair_min_u32(pair_min_u32(v[4], v[5]), pair_min_u32(v[6], v[7]));
  return _mm256_min_epu32(_mm256_permute2x128_si256(lo, hi, 0x20),
                          _mm256_permute2x128_si256(lo, hi, 0x31));
}

// Lane b (32-bit) of the result: the smallest of m[b]'s 16 lanes as unsigned int16.
MX_AVX2 __m256i transposed_min8_u16(const __m256i* m) {
  __m256i t[4], u[2];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k)
    t[k] = _mm256_min_epu16(_mm256_unpacklo_epi16(m[2 * k], m[2 * k + 1]),
                            _mm256_unpackhi_epi16(m[2 * k], m[2 * k + 1]));
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k)
    u[k] = _mm256_min_epu16(_mm256_unpacklo_epi32(t[2 * k], t[2 * k + 1]),
                            _mm256_unpackhi_epi32(t[2 * k], t[2 * k + 1]));
  const __m256i v =
      _mm256_min_epu16(_mm256_unpacklo_epi64(u[0], u[1]), _mm256_unpackhi_epi64(u[0], u[1]));
  return _mm256_cvtepu16_epi32(
      _mm_min_epu16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

}  // namespace mantissa::kernels::mx::avx2_lanes

#undef MX_AVX2
