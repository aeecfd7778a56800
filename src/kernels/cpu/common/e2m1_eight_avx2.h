#pragma once
// Internal: eight E2M1 (FP4) codes, packed two a byte (low nibble first) in 4 bytes, to their
// float values in one AVX2 vector: the MX casts' decoder (mx/mx_cast_avx2.cpp) and the code
// panels' (gemm/code_panels.cpp). The magnitude is looked up among the format's eight values and
// bit 3 of the code becomes the sign, so -0 (code 8) decodes to -0.0f. Carries its target and is
// always inlined, so only the AVX2 files that call it compile it.
#include <immintrin.h>

#include <cstdint>

namespace mantissa::kernels {

inline constexpr float kE2m1Magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

__attribute__((target("avx2"), always_inline)) inline __m256 e2m1_eight(uint32_t packed) {
  const __m128i b = _mm_cvtsi32_si128(static_cast<int>(packed));
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0F));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
  const __m256i code = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
  const __m256 mag = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kE2m1Magnitudes),
                                              _mm256_and_si256(code, _mm256_set1_epi32(7)));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, _mm256_set1_epi32(8)), 28);
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(mag), sign));
}

}  // namespace mantissa::kernels
