// The block recipe's 1x128 tiles of bfloat16 cast to E4M3 on AVX2 (fp8_block.h,
// detail::block_tiles_bf16_e4m3_avx2): each tile's amax from the integer maximum of its
// magnitude bits (NaNs, whose bits lie above infinity's, mapped to 0 first), its scale, then
// its 128 codes from the values still in L1, the saturated and flushed counts kept in vector
// lanes across all the tiles of a call. The same amax, scale, codes and counts as the per-tile
// calls of the delayed-scaling cast (fp8_cast.h) that the other sources and formats take,
// without a call, a second amax and a lane reduction per tile.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/float8.h"

namespace mantissa::kernels::fp8::detail {
namespace {

__attribute__((target("avx2"))) int64_t lane_sum(__m256i v) {
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  int64_t s = 0;
  for (int32_t l : lanes) s += l;
  return s;
}

// The largest magnitude bits among 128 bfloat16 values, NaN passed over.
__attribute__((target("avx2"))) inline uint16_t max_magnitude_128(const uint16_t* s) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF), inf = _mm256_set1_epi16(0x7F80);
  __m256i best = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j) {
    __m256i a =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * j)), abs);
    // a <= inf where min(a, inf) == a; NaNs (above inf) become 0.
    a = _mm256_and_si256(a, _mm256_cmpeq_epi16(_mm256_min_epu16(a, inf), a));
    best = _mm256_max_epu16(best, a);
  }
  // The maximum of eight 16-bit lanes as 0xFFFF less the minimum of their complements.
  const __m128i m = _mm_max_epu16(_mm256_castsi256_si128(best), _mm256_extracti128_si256(best, 1));
  const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
  return static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
}

}  // namespace

__attribute__((target("avx2"))) void block_tiles_bf16_e4m3_avx2(const uint16_t* src,
                                                                int64_t src_step, int64_t count,
                                                                uint8_t* dst, int64_t dst_step,
                                                                float* scale_inv, int64_t inv_step,
                                                                float for_inf, bool power_2,
                                                                float epsilon, BlockCastStats& st) {
  constexpr float kMax = Float8E4M3::kMax;
  const __m256 vmax = _mm256_set1_ps(kMax);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // Lane counts: a compare mask is -1 where true, so subtracting it counts; a lane sees 16
  // elements of a tile, far below 2^31 for any tensor.
  __m256i saturated = _mm256_setzero_si256(), flushed = _mm256_setzero_si256();
  for (int64_t t = 0; t < count; ++t) {
    const uint16_t* s = src + t * src_step;
    const float amax = bf16_bits_to_float(max_magnitude_128(s));
    const float scale = block_scale(amax, kMax, for_inf, power_2, epsilon);
    scale_inv[t * inv_step] = block_scale_inverse(scale);
    st.amax = std::max(st.amax, amax);
    st.peak = std::max(st.peak, block_peak(amax, scale, kMax));
    const __m256 vs = _mm256_set1_ps(scale);
    uint8_t* d = dst + t * dst_step;
    for (int q = 0; q < 4; ++q) {
      __m256i codes[4];
      for (int e = 0; e < 4; ++e) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32 * q + 8 * e));
        const __m256 x = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        const __m256 y = _mm256_mul_ps(x, vs);
        codes[e] = satfinite_codes<3, 7, 0x7e>(y);
        const __m256 sat = _mm256_cmp_ps(_mm256_and_ps(y, abs_mask), vmax, _CMP_GT_OQ);
        const __m256i mag_zero = _mm256_cmpeq_epi32(
            _mm256_and_si256(codes[e], _mm256_set1_epi32(0x7f)), _mm256_setzero_si256());
        const __m256 flush = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_OQ),
                                           _mm256_castsi256_ps(mag_zero));
        saturated = _mm256_sub_epi32(saturated, _mm256_castps_si256(sat));
        flushed = _mm256_sub_epi32(flushed, _mm256_castps_si256(flush));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32 * q),
                          pack32_bytes(codes[0], codes[1], codes[2], codes[3]));
    }
  }
  st.saturated += lane_sum(saturated);
  st.flushed += lane_sum(flushed);
}

}  // namespace mantissa::kernels::fp8::detail
