// AVX-512 row of LLM.int8's row-wise quantization (int8_rowwise.h): the scalar row's steps on
// sixteen lanes. The absmax skips outliers; a NaN among the rest makes it NaN (MAXPS would drop
// it, so NaN lanes are flagged apart) and, like an infinite absmax, gives a row of 0 codes. The
// codes round with VCVTPS2DQ in the default rounding mode (to nearest, ties to even, as
// std::nearbyint).
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/quant/int8_rowwise.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace mantissa::kernels::quant {
namespace {

MANTISSA_AVX512 inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << left) - 1);
}

// Lanes that count: within the row (m) and, with a threshold, not outliers (|v| >= threshold).
MANTISSA_AVX512 inline __mmask16 inliers(__m512 av, __mmask16 m, bool split, __m512 thr) {
  return split ? _mm512_mask_cmp_ps_mask(m, av, thr, _CMP_NGE_UQ) : m;
}

}  // namespace

MANTISSA_AVX512 float int8_quantize_row_avx512(const float* r, int64_t cols, float threshold,
                                               const uint8_t* zero_cols, int8_t* o) {
  const bool split = threshold > 0.0f;
  const __m512 thr = _mm512_set1_ps(threshold);
  __m512 vmax = _mm512_setzero_ps();
  __mmask16 nan = 0;
  for (int64_t j = 0; j < cols; j += 16) {
    const __mmask16 m = tail_mask(cols - j);
    const __m512 av = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, r + j));
    const __mmask16 in = inliers(av, m, split, thr);
    vmax = _mm512_mask_max_ps(vmax, in, av, vmax);  // (MAXPS drops a NaN: flagged apart)
    nan |= _mm512_mask_cmp_ps_mask(in, av, av, _CMP_UNORD_Q);
  }
  const float mx = nan != 0 ? std::numeric_limits<float>::quiet_NaN() : _mm512_reduce_max_ps(vmax);
  if (mx == 0.0f || !std::isfinite(mx)) {
    for (int64_t j = 0; j < cols; ++j) o[j] = 0;
    return mx;
  }
  const __m512 scale = _mm512_set1_ps(int8_row_scale(mx));
  for (int64_t j = 0; j < cols; j += 16) {
    const __mmask16 m = tail_mask(cols - j);
    const __m512 v = _mm512_maskz_loadu_ps(m, r + j);
    __mmask16 keep = inliers(_mm512_abs_ps(v), m, split, thr);
    if (zero_cols) {
      const __m128i z = _mm_maskz_loadu_epi8(m, zero_cols + j);
      keep &= _mm_cmpeq_epi8_mask(z, _mm_setzero_si128());
    }
    const __m512i q = _mm512_maskz_mov_epi32(keep, _mm512_cvtps_epi32(_mm512_mul_ps(v, scale)));
    _mm_mask_storeu_epi8(o + j, m, _mm512_cvtepi32_epi8(q));
  }
  return mx;
}

}  // namespace mantissa::kernels::quant
