// The statistics of an MX or NVFP4 cast (mx_stats.h), block by block: each block's multiplier
// is the one the cast applied (mx_scalar.h). Full blocks of a float32 or bfloat16 source take an
// AVX2 loop where the CPU has it, reading the source and the packed codes where they lie
// (comparisons and a maximum, no rounding: the plain loop's counts); short blocks are widened to
// float32 (bfloat16: exactly) and their codes unpacked first. A code is flushed when its
// magnitude bits are 0 (+0 or -0). Rows are split over threads.
#include "kernels/cpu/mx/mx_stats.h"

#include <immintrin.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

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
__attribute__((target("avx2"))) BlockCounts count_block_avx2(const void* src, DType dtype,
                                                             const uint8_t* codes, bool fp4,
                                                             uint8_t mask, float mult, float max) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 vm = _mm256_set1_ps(mult), vlim = _mm256_set1_ps(max), zero = _mm256_setzero_ps();
  const __m256i vmask = _mm256_set1_epi32(mask);
  const bool f32 = dtype == kFloat32;
  __m256 vmax = zero;
  __m256i sat = _mm256_setzero_si256(), flushed = _mm256_setzero_si256();
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
    sat = _mm256_sub_epi32(sat, _mm256_castps_si256(over));
    flushed = _mm256_sub_epi32(flushed, _mm256_and_si256(zero_code, nonzero));
  }
  alignas(32) float m[8];
  alignas(32) int32_t sv[8], fv[8];
  _mm256_store_ps(m, vmax);
  _mm256_store_si256(reinterpret_cast<__m256i*>(sv), sat);
  _mm256_store_si256(reinterpret_cast<__m256i*>(fv), flushed);
  BlockCounts b;
  for (int i = 0; i < 8; ++i) {
    b.amax = m[i] > b.amax ? m[i] : b.amax;
    b.saturated += sv[i];
    b.flushed += fv[i];
  }
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

}  // namespace

namespace {

// The statistics of rows [r0, r1); `best` is the largest block amax seen (-1: none yet).
void stats_of_rows(const void* src, DType src_dtype, int64_t r0, int64_t r1, int64_t cols,
                   Element element, E8m0Rounding rounding, const uint8_t* codes,
                   const uint8_t* scales, MxCastStats& st, float& best) {
  const ElementLimits lim = element_limits(element);
  const int64_t nb = (cols + kMxBlock - 1) / kMxBlock;
  const int64_t code_row = code_bytes(element, cols);
  const bool fp4 = element == Element::kE2m1;
  const uint8_t mag_mask = fp4 ? 7u : 0x7Fu;
  const bool avx2 =
      simd_level() >= SimdLevel::kAvx2 && (src_dtype == kFloat32 || src_dtype == kBFloat16);
  const int64_t item = static_cast<int64_t>(src_dtype.itemsize());
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * kMxBlock, len = std::min(kMxBlock, cols - c0);
      const uint8_t s = scales[r * nb + b];
      // The block's codes (c0 is even, so a 4-bit block starts a byte).
      const uint8_t* cp = codes + r * code_row + (fp4 ? c0 / 2 : c0);
      float mult = 0.0f;  // a NaN block (0xFF) saturates nothing
      if (s != kE8m0Nan)
        mult = rounding == E8m0Rounding::kFloor ? 1.0f / scalar::floor_divisor(s)
                                                : scalar::rceil_multiplier(s, 0.0f, lim.max);
      const BlockCounts bc =
          len == kMxBlock && avx2
              ? count_block_avx2<kMxBlock>(static_cast<const char*>(src) + (r * cols + c0) * item,
                                           src_dtype, cp, fp4, mag_mask, mult, lim.max)
              : count_block_widened(src, src_dtype, r * cols + c0, len, cp, fp4, mag_mask, mult,
                                    lim.max);
      st.saturated += bc.saturated;
      st.flushed += bc.flushed;
      if (bc.amax > best) {
        best = bc.amax;
        if (s != kE8m0Nan) st.scale = mult;
      }
      if (s != kE8m0Nan) st.peak = std::max(st.peak, static_cast<double>(bc.amax) * mult / lim.max);
    }
  }
}

}  // namespace

// Rows are split over threads in contiguous ranges, merged in row order (the scale is that of
// the first block holding the amax, whatever the threads).
MxCastStats mx_cast_stats(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                          Element element, E8m0Rounding rounding, const uint8_t* codes,
                          const uint8_t* scales) {
  const int64_t parts =
      rows * cols > (1 << 16) ? std::min<int64_t>(omp_get_max_threads(), rows) : 1;
  std::vector<MxCastStats> part(static_cast<size_t>(std::max<int64_t>(parts, 1)));
  std::vector<float> best(part.size(), -1.0f);
#pragma omp parallel for schedule(static, 1) if (parts > 1)
  for (int64_t p = 0; p < parts; ++p)
    stats_of_rows(src, src_dtype, rows * p / parts, rows * (p + 1) / parts, cols, element, rounding,
                  codes, scales, part[p], best[p]);
  MxCastStats st;
  float top = -1.0f;
  for (size_t p = 0; p < part.size(); ++p) {
    st.saturated += part[p].saturated;
    st.flushed += part[p].flushed;
    st.peak = std::max(st.peak, part[p].peak);
    if (best[p] > top) {
      top = best[p];
      st.scale = part[p].scale;
    }
  }
  st.amax = std::max(top, 0.0f);
  return st;
}

MxCastStats nvfp4_cast_stats(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                             float tensor_scale, const uint8_t* codes, const uint8_t* scales) {
  const int64_t nb = (cols + kNvfp4Block - 1) / kNvfp4Block, code_row = (cols + 1) / 2;
  const bool avx2 =
      simd_level() >= SimdLevel::kAvx2 && (src_dtype == kFloat32 || src_dtype == kBFloat16);
  const int64_t item = static_cast<int64_t>(src_dtype.itemsize());
  float amax = 0.0f, ymax = 0.0f;
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(max : amax, ymax) \
    reduction(+ : saturated, flushed) if (rows * cols >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      // Counted as an MX block is, with the element max 6 (c0 is even: the block starts a byte).
      const int64_t c0 = b * kNvfp4Block, len = std::min(kNvfp4Block, cols - c0);
      const uint8_t* cp = codes + r * code_row + c0 / 2;
      const float mult = (1.0f / tensor_scale) / scalar::e4m3_value(scales[r * nb + b]);
      const BlockCounts bc = len == kNvfp4Block && avx2
                                 ? count_block_avx2<kNvfp4Block>(
                                       static_cast<const char*>(src) + (r * cols + c0) * item,
                                       src_dtype, cp, true, 7u, mult, kE2m1Max)
                                 : count_block_widened(src, src_dtype, r * cols + c0, len, cp, true,
                                                       7u, mult, kE2m1Max);
      amax = std::max(amax, bc.amax);
      const float y = bc.amax * mult;
      ymax = y > ymax ? y : ymax;  // NaN (a NaN scale) passed over
      saturated += bc.saturated;
      flushed += bc.flushed;
    }
  }
  MxCastStats st;
  st.amax = amax;
  st.peak = static_cast<double>(ymax) / kE2m1Max;
  st.saturated = saturated;
  st.flushed = flushed;
  st.scale = 1.0f / tensor_scale;
  return st;
}

}  // namespace mantissa::kernels::mx
