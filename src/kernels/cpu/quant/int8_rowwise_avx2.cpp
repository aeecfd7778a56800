// AVX2 int8 x int8 -> int32 product: 16 bytes of a row are sign-extended to int16 and
// multiplied pairwise with _mm256_madd_epi16 (products of int8 fit int16 pairs exactly, so the
// sums are exact and equal the scalar ones). Four rows of `a` share each loaded row of `b`.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/quant/int8_rowwise.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma")))

namespace mantissa::kernels::quant {
namespace {

MANTISSA_AVX2 inline __m256i widen16(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

MANTISSA_AVX2 inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

MANTISSA_AVX2 void int8_gemm_nt_avx2(const int8_t* a, const int8_t* b, int64_t m, int64_t n,
                                     int64_t k, int32_t* c) {
  const int64_t k16 = k / 16 * 16;
#pragma omp parallel for schedule(static) if (m * n * k > (1 << 20))
  for (int64_t i0 = 0; i0 < m; i0 += 4) {
    const int64_t rows = std::min<int64_t>(4, m - i0);
    for (int64_t j = 0; j < n; ++j) {
      const int8_t* bj = b + j * k;
      __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                        _mm256_setzero_si256()};
      for (int64_t p = 0; p < k16; p += 16) {
        const __m256i vb = widen16(bj + p);
        for (int64_t r = 0; r < rows; ++r)
          acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(widen16(a + (i0 + r) * k + p), vb));
      }
      for (int64_t r = 0; r < rows; ++r) {
        int32_t s = hsum(acc[r]);
        const int8_t* ar = a + (i0 + r) * k;
        for (int64_t p = k16; p < k; ++p) s += int32_t{ar[p]} * int32_t{bj[p]};
        c[(i0 + r) * n + j] = s;
      }
    }
  }
}

}  // namespace mantissa::kernels::quant
