#pragma once
// Internal: what the block recipe's AVX2 files (fp8_block_avx2.cpp for bfloat16,
// fp8_block_f32_avx2.cpp for float32) and the column walk (fp8_block_columns.h) share. The scales
// of eight tiles at once in float32 lanes (block_scale, block_scale_inverse, block_peak's
// numerator and lanes_of's test), for the column casts, which find 32 columns' maxima together
// and would otherwise take each column's scale through a scalar chain of two divisions; a tile's
// peak folded into the running maximum; the float32 column casts' rare step and the column
// casts' statistics' end; the group casts' loads ahead of their prefetches. Carries its target
// and is always inlined, so only the files that call it compile it.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/float8.h"

namespace mantissa::kernels::fp8::detail {

// Eight tiles' scales from their amax (a NaN's lanes give nothing the caller keeps: it finds that
// tile's amax again): block_scale's scale into scale_of, f32(1 / f64(scale)) into inv, amax into
// amax_acc and amax * scale (in double; an inf's product measures nothing) into top_acc as maxima
// over the lanes without a NaN. Returns the lanes' exponents e of scale = 2^e and, in `fast`,
// all ones where the integer codes apply: scale a normal 2^e with e <= 120, amax * scale at most
// E4M3's largest value, no NaN.
__attribute__((target("avx2"), always_inline)) inline __m256i block_scales8(
    __m256 amax, __m256i nan, float for_inf, bool power_2, float epsilon, float* scale_of,
    float* inv, __m256& amax_acc, __m256d& top_acc, __m256i& fast) {
  constexpr float kMax = Float8E4M3::kMax;
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 eps = _mm256_set1_ps(epsilon);
  // block_scale, lane by lane (a NaN amax fails the comparison and is caught as special).
  const __m256 a = _mm256_blendv_ps(amax, eps, _mm256_cmp_ps(amax, eps, _CMP_LT_OQ));
  const __m256 special =
      _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(a, inf, _CMP_EQ_OQ),
                                _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_EQ_OQ)),
                   _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  __m256 scale = _mm256_div_ps(_mm256_set1_ps(kMax), a);
  scale = _mm256_blendv_ps(scale, _mm256_set1_ps(for_inf), _mm256_cmp_ps(scale, inf, _CMP_EQ_OQ));
  if (power_2)
    scale =
        _mm256_and_ps(scale, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0xFF800000u))));
  scale = _mm256_blendv_ps(scale, _mm256_set1_ps(1.0f), special);
  _mm256_storeu_ps(scale_of, scale);
  // f32(1 / f64(scale)) and amax * scale in double, four lanes at a time.
  for (int q = 0; q < 2; ++q) {
    const __m128 s4 = q ? _mm256_extractf128_ps(scale, 1) : _mm256_castps256_ps128(scale);
    const __m128 a4 = q ? _mm256_extractf128_ps(amax, 1) : _mm256_castps256_ps128(amax);
    const __m256d sd = _mm256_cvtps_pd(s4);
    _mm_storeu_ps(inv + 4 * q, _mm256_cvtpd_ps(_mm256_div_pd(_mm256_set1_pd(1.0), sd)));
    // A NaN's or an inf's product fails the comparison.
    const __m256d t = _mm256_mul_pd(_mm256_cvtps_pd(a4), sd);
    const __m256d finite =
        _mm256_cmp_pd(t, _mm256_set1_pd(std::numeric_limits<double>::max()), _CMP_LE_OQ);
    top_acc = _mm256_max_pd(top_acc, _mm256_and_pd(t, finite));
  }
  // max_ps returns its second operand where the first is NaN.
  amax_acc = _mm256_max_ps(amax, amax_acc);
  // lanes_of: scale a normal 2^e (scale is positive), e <= 120, amax * scale <= kMax.
  const __m256i sb = _mm256_castps_si256(scale);
  const __m256i field = _mm256_srli_epi32(sb, 23);
  const __m256i e = _mm256_sub_epi32(field, _mm256_set1_epi32(127));
  __m256i ok = _mm256_cmpeq_epi32(_mm256_and_si256(sb, _mm256_set1_epi32(0x007FFFFF)),
                                  _mm256_setzero_si256());
  ok = _mm256_and_si256(ok, _mm256_cmpgt_epi32(field, _mm256_setzero_si256()));
  ok = _mm256_and_si256(ok, _mm256_cmpgt_epi32(_mm256_set1_epi32(121), e));
  ok = _mm256_and_si256(ok, _mm256_castps_si256(_mm256_cmp_ps(_mm256_mul_ps(amax, scale),
                                                              _mm256_set1_ps(kMax), _CMP_LE_OQ)));
  fast = _mm256_andnot_si256(nan, ok);
  return e;
}

// A tile's amax * scale (block_peak's numerator, exact in double) into the running maximum; an
// inf amax (scale 1) measures nothing.
inline void fold_top(float amax, float scale, double& top_max) {
  const double top = static_cast<double>(amax) * scale;
  if (top <= std::numeric_limits<double>::max()) top_max = std::max(top_max, top);
}

// A demand load every 4 KiB of [p, p + bytes), a row of the next group, ahead of the group casts'
// software prefetches of its lines into L2. Measured on Zen 4 (4 KiB pages), 128x128 of a 4096 x
// 4096 source: without these loads a quarter more CPU time for bfloat16 and a fifth for float32;
// a load at each page boundary instead helps float32 alike but not bfloat16.
inline void touch_pages(const void* p, int64_t bytes) {
  const auto* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 4096) (void)*reinterpret_cast<const volatile char*>(c + b);
}

// The codes of 32 float32 values at p into d through float32 lanes under each one's scale
// (scale_of, 32 floats): satfinite_codes of f32(x * scale), the saturated and flushed elements
// counted. The float32 column casts' rare step (fp8_block_columns.h).
__attribute__((target("avx2"), always_inline)) inline void column_codes32_f32_lanes(
    const float* p, const float* scale_of, uint8_t* d, LaneCounts& counts) {
  const __m256 max = _mm256_set1_ps(Float8E4M3::kMax);
  __m256i code[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m256 x = _mm256_loadu_ps(p + 8 * q);
    code[q] = counted_codes<3, 7, 0x7e>(x, _mm256_mul_ps(x, _mm256_load_ps(scale_of + 8 * q)), max,
                                        counts);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d),
                      pack32_bytes(code[0], code[1], code[2], code[3]));
}

// The end of a column cast: the lanes' amax and peak maxima, with the scalar ones of the
// columns found again (a NaN's), and the counts into st.
__attribute__((target("avx2"), always_inline)) inline void finish_columns(
    __m256 amax_acc, __m256d top_acc, float amax_max, double top_max, const LaneCounts& counts,
    BlockCastStats& st) {
  alignas(32) float amaxes[8];
  alignas(32) double tops[4];
  _mm256_store_ps(amaxes, amax_acc);
  _mm256_store_pd(tops, top_acc);
  for (const float a : amaxes) amax_max = std::max(amax_max, a);
  for (const double t : tops) top_max = std::max(top_max, t);
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / Float8E4M3::kMax);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}

}  // namespace mantissa::kernels::fp8::detail
