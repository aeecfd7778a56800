// The statistics of an MX or NVFP4 cast (mx_stats.h), block by block: each block's multiplier
// is the one the cast applied (mx_scalar.h). Full blocks of a float32 or bfloat16 source take an
// AVX2 loop where the CPU has it, reading the source and the packed codes where they lie
// (comparisons and a maximum, no rounding: the plain loop's counts); short blocks are widened to
// float32 (bfloat16: exactly) and their codes unpacked first. A code is flushed when its
// magnitude bits are 0 (+0 or -0). The casts (mx_cast.cpp) count each segment right after
// encoding it, on the thread that encoded it.
#include "kernels/cpu/mx/mx_stats.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "mantissa/core/bfloat16.h"

namespace mantissa::kernels::mx {
namespace {

struct BlockCounts {
  float amax = 0.0f;
  int64_t saturated = 0;
  int64_t flushed = 0;
};

// x: n (at most kMxBlock) widened elements; codes: their codes (one per element, unpacked),
// whose bits under `mask` are the magnitude.
template <int64_t N>
BlockCounts count_block(const float* x, const uint8_t* codes, uint8_t mask, int64_t n, float mult,
                        float max) {
  BlockCounts b;
  const int64_t len = N > 0 ? N : n;
  float amax = 0.0f;
  int sat = 0, flushed = 0;
  for (int64_t k = 0; k < len; ++k) {
    const float a = std::fabs(x[k]);
    amax = a > amax ? a : amax;  // NaN passed over
    sat += a * mult > max ? 1 : 0;
    flushed += (a > 0.0f && (codes[k] & mask) == 0) ? 1 : 0;  // NaN fails a > 0
  }
  b.amax = amax;
  b.saturated = sat;
  b.flushed = flushed;
  return b;
}

// count_block over one full block of N (a multiple of 8) elements with AVX2, read where they lie:
// float32 or bfloat16 (widened exactly by a shift) and one FP8 code a byte or two E2M1 codes a
// byte (`fp4`, the even element in the low nibble).
template <int N>
__attribute__((target("avx2,popcnt"))) BlockCounts count_block_avx2(const void* src, DType dtype,
                                                                    const uint8_t* codes, bool fp4,
                                                                    uint8_t mask, float mult,
                                                                    float max) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 vm = _mm256_set1_ps(mult), vlim = _mm256_set1_ps(max), zero = _mm256_setzero_ps();
  const __m256i vmask = _mm256_set1_epi32(mask);
  const bool f32 = dtype == kFloat32;
  __m256 vmax = zero;
  int sat = 0, flushed = 0;
  for (int k = 0; k < N; k += 8) {
    const __m256 x =
        f32 ? _mm256_loadu_ps(static_cast<const float*>(src) + k)
            : _mm256_castsi256_ps(_mm256_slli_epi32(
                  _mm256_cvtepu16_epi32(_mm_loadu_si128(
                      reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(src) + k))),
                  16));
    const __m256 a = _mm256_and_ps(x, abs_mask);
    vmax = _mm256_max_ps(a, vmax);  // the second operand where a is NaN: NaN passed over
    const __m256 over = _mm256_cmp_ps(_mm256_mul_ps(a, vm), vlim, _CMP_GT_OQ);
    __m128i bytes;
    if (fp4) {
      int word;
      __builtin_memcpy(&word, codes + k / 2, 4);
      const __m128i b = _mm_cvtsi32_si128(word);
      bytes = _mm_unpacklo_epi8(_mm_and_si128(b, _mm_set1_epi8(0x0F)),
                                _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F)));
    } else {
      bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + k));
    }
    const __m256i c = _mm256_and_si256(_mm256_cvtepu8_epi32(bytes), vmask);
    const __m256i zero_code = _mm256_cmpeq_epi32(c, _mm256_setzero_si256());
    const __m256i nonzero = _mm256_castps_si256(_mm256_cmp_ps(a, zero, _CMP_GT_OQ));
    // The lanes' masks counted as bits (no vector of counts to reduce at the end).
    sat += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(over)));
    flushed += __builtin_popcount(static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(zero_code, nonzero)))));
  }
  // The lanes' maximum (none is NaN) by halving shuffles.
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  BlockCounts b;
  b.amax = _mm_cvtss_f32(h);
  b.saturated = sat;
  b.flushed = flushed;
  return b;
}

// count_block over n elements of a block from element c0 of row r, widened to float32 and its
// codes unpacked first (a short block, or a source dtype the vector loop does not read).
BlockCounts count_block_widened(const void* src, DType src_dtype, int64_t first, int64_t n,
                                const uint8_t* codes, bool fp4, uint8_t mask, float mult,
                                float max) {
  float xb[kMxBlock];
  uint8_t cb[kMxBlock];
  for (int64_t k = 0; k < n; ++k) {
    xb[k] = scalar::load(src, src_dtype, first + k);
    cb[k] = fp4 ? static_cast<uint8_t>((codes[k >> 1] >> ((k & 1) * 4)) & 15u) : codes[k];
  }
  return count_block<0>(xb, cb, mask, n, mult, max);
}

bool use_avx2(DType src_dtype) {
  return simd_level() >= SimdLevel::kAvx2 && (src_dtype == kFloat32 || src_dtype == kBFloat16);
}

}  // namespace

void MxStatsRun::append(const MxStatsRun& next) {
  // next's records that are records of the whole run are those above this run's best: a suffix
  // of next's, so its last scaled record is the whole run's where it lies above `best`.
  if (next.scaled_best > best) {
    scaled_best = next.scaled_best;
    scale = next.scale;
  }
  best = std::max(best, next.best);
  saturated += next.saturated;
  flushed += next.flushed;
  peak = std::max(peak, next.peak);
}

MxCastStats MxStatsRun::finish() const {
  MxCastStats st;
  st.amax = std::max(best, 0.0f);
  st.saturated = saturated;
  st.flushed = flushed;
  st.peak = peak;
  st.scale = scale;
  return st;
}

MxStatsRun mx_run_stats(const void* src, DType src_dtype, int64_t n, Element element,
                        E8m0Rounding rounding, const uint8_t* codes, const uint8_t* scales) {
  const ElementLimits lim = element_limits(element);
  const bool fp4 = element == Element::kE2m1;
  const uint8_t mag_mask = fp4 ? 7u : 0x7Fu;
  const bool avx2 = use_avx2(src_dtype);
  const int64_t item = static_cast<int64_t>(src_dtype.itemsize());
  MxStatsRun run;
  for (int64_t c0 = 0; c0 < n; c0 += kMxBlock) {
    const int64_t len = std::min(kMxBlock, n - c0);
    const uint8_t s = scales[c0 / kMxBlock];
    // The block's codes (c0 is even, so a 4-bit block starts a byte).
    const uint8_t* cp = codes + (fp4 ? c0 / 2 : c0);
    float mult = 0.0f;  // a NaN block (0xFF) saturates nothing
    if (s != kE8m0Nan)
      mult = rounding == E8m0Rounding::kFloor ? 1.0f / scalar::floor_divisor(s)
                                              : scalar::rceil_multiplier(s, 0.0f, lim.max);
    const BlockCounts bc =
        len == kMxBlock && avx2
            ? count_block_avx2<kMxBlock>(static_cast<const char*>(src) + c0 * item, src_dtype, cp,
                                         fp4, mag_mask, mult, lim.max)
            : count_block_widened(src, src_dtype, c0, len, cp, fp4, mag_mask, mult, lim.max);
    run.saturated += bc.saturated;
    run.flushed += bc.flushed;
    if (bc.amax > run.best) {
      run.best = bc.amax;
      if (s != kE8m0Nan) {
        run.scaled_best = bc.amax;
        run.scale = mult;
      }
    }
    if (s != kE8m0Nan) run.peak = std::max(run.peak, static_cast<double>(bc.amax) * mult / lim.max);
  }
  return run;
}

MxStatsRun nvfp4_run_stats(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                           const uint8_t* codes, const uint8_t* scales) {
  const bool avx2 = use_avx2(src_dtype);
  const int64_t item = static_cast<int64_t>(src_dtype.itemsize());
  MxStatsRun run;
  for (int64_t c0 = 0; c0 < n; c0 += kNvfp4Block) {
    // Counted as an MX block is, with the element max 6 (c0 is even: the block starts a byte).
    const int64_t len = std::min(kNvfp4Block, n - c0);
    const uint8_t* cp = codes + c0 / 2;
    const float mult = (1.0f / tensor_scale) / scalar::e4m3_value(scales[c0 / kNvfp4Block]);
    const BlockCounts bc =
        len == kNvfp4Block && avx2
            ? count_block_avx2<kNvfp4Block>(static_cast<const char*>(src) + c0 * item, src_dtype,
                                            cp, true, 7u, mult, kE2m1Max)
            : count_block_widened(src, src_dtype, c0, len, cp, true, 7u, mult, kE2m1Max);
    run.best = std::max(run.best, bc.amax);
    // max of y / 6 is max(y) / 6; a NaN y (a NaN scale) is passed over.
    run.peak = std::max(run.peak, static_cast<double>(bc.amax * mult) / kE2m1Max);
    run.saturated += bc.saturated;
    run.flushed += bc.flushed;
  }
  return run;
}

}  // namespace mantissa::kernels::mx
