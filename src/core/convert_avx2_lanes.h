#pragma once
// Internal: the AVX2 lane conversions of convert_avx2.cpp, inline, for kernels that round their
// own registers (the AVX2 GEMM's bf16/f16 epilogue) instead of storing fp32 and calling a bulk
// conversion per row. The same instructions as the bulk kernels, so the same bits as
// Tensor::to.
#include <immintrin.h>

#include <cstdint>

namespace mantissa::convert_detail {

// float32 bits -> bf16 bits (low half of each lane), round to nearest even, NaN made quiet
// (sign and top payload kept); see bfloat16.h. Signed compares are safe: both sides are below
// 2^31.
__attribute__((target("avx2"), always_inline)) inline __m256i bf16_rne(__m256i x) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
  const __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// Sixteen floats (two vectors) rounded to bf16, in order in one vector.
__attribute__((target("avx2"), always_inline)) inline __m256i bf16x16(__m256 lo, __m256 hi) {
  const __m256i a = bf16_rne(_mm256_castps_si256(lo));
  const __m256i b = bf16_rne(_mm256_castps_si256(hi));
  // packus works within 128-bit lanes; the permute restores element order.
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
}

// Sixteen floats (two vectors) rounded to bf16 and stored in order.
__attribute__((target("avx2"), always_inline)) inline void store_bf16x16(uint16_t* dst, __m256 lo,
                                                                         __m256 hi) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), bf16x16(lo, hi));
}

// Sixteen floats rounded to f16 (F16C, round to nearest even) and stored in order.
__attribute__((target("avx2,f16c"), always_inline)) inline void store_f16x16(uint16_t* dst,
                                                                             __m256 lo, __m256 hi) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 8),
                   _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace mantissa::convert_detail
