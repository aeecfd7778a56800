// AVX2 level of the NF4/FP4 kernels. Same bytes and float bits as the scalar level: the
// scaling is the same single float32 multiply, the code is the same count of boundaries the
// value exceeds (NaN exceeds all), and dequantization is one float32 multiply per element.
// No multiply feeds an add here, so FMA contraction cannot change a result.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/quant/four_bit.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma")))

namespace mantissa::kernels::quant {
namespace {

constexpr float kMinAbsmax = 1e-38f;

// max |x| over a block whose length is a multiple of 8; NaN when any element is NaN.
MANTISSA_AVX2 float block_absmax_avx2(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  __m256 nan = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    m = _mm256_max_ps(m, a);
  }
  if (_mm256_movemask_ps(nan)) return std::numeric_limits<float>::quiet_NaN();
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  return *std::max_element(lanes, lanes + 8);
}

// Sorted slot of 8 scaled values: the number of boundaries each is not <= (NaN: all 15).
MANTISSA_AVX2 __m256i slots8(__m256 v, const float* bounds) {
  __m256i slot = _mm256_setzero_si256();
  for (int b = 0; b < 15; ++b) {
    const __m256 gt = _mm256_cmp_ps(v, _mm256_set1_ps(bounds[b]), _CMP_NLE_UQ);
    slot = _mm256_sub_epi32(slot, _mm256_castps_si256(gt));  // mask is -1 where true
  }
  return slot;
}

// A 16-entry int or float table lookup with 8 indices in 0..15.
MANTISSA_AVX2 __m256 lookup16(__m256 lo, __m256 hi, __m256i idx) {
  const __m256 a = _mm256_permutevar8x32_ps(lo, idx);
  const __m256 b = _mm256_permutevar8x32_ps(hi, idx);
  const __m256 use_hi = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));  // bit 3 -> sign bit
  return _mm256_blendv_ps(a, b, use_hi);
}

}  // namespace

MANTISSA_AVX2 void quantize_4bit_avx2(const float* x, int64_t first, int64_t count, int64_t total,
                                      int64_t blocksize, FormatId format, uint8_t* packed,
                                      float* absmax) {
  const FourBitCodebook& book = four_bit_codebook(format);
  const float* bounds = book.bounds.data();
  alignas(32) float to_code[16];
  for (int i = 0; i < 16; ++i) to_code[i] = static_cast<float>(book.sorted_to_code[i]);
  const __m256 code_lo = _mm256_load_ps(to_code), code_hi = _mm256_load_ps(to_code + 8);
  alignas(32) int32_t codes[8];
  for (int64_t start = first; start < first + count; start += blocksize) {
    const int64_t len = std::min(blocksize, total - start);
    const float* xb = x + (start - first);
    uint8_t* dst = packed + start / 2;
    if (len < blocksize || len % 8) {  // the partial last block: divides, as the scalar level
      uint8_t c[4096 + 1];
      const float am0 = block_absmax_scalar(xb, len);
      const float am = std::isnan(am0) ? am0 : std::max(am0, kMinAbsmax);
      quantize_block_scalar(xb, len, true, am, format, c);
      absmax[start / blocksize] = am;
      int64_t n = len;
      if (n % 2) c[n++] = four_bit_code(0.0f, book);
      for (int64_t i = 0; i < n; i += 2) dst[i / 2] = static_cast<uint8_t>(c[i] << 4 | c[i + 1]);
      continue;
    }
    const float am = block_absmax_avx2(xb, len);
    absmax[start / blocksize] = am;
    const float clamped = std::isnan(am) ? am : std::max(am, kMinAbsmax);
    const __m256 inv = _mm256_set1_ps(1.0f / clamped);
    for (int64_t i = 0; i < len; i += 8) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + i), inv);
      const __m256i slot = slots8(v, bounds);
      const __m256i code = _mm256_cvttps_epi32(lookup16(code_lo, code_hi, slot));
      _mm256_store_si256(reinterpret_cast<__m256i*>(codes), code);
      for (int j = 0; j < 8; j += 2)
        dst[(i + j) / 2] = static_cast<uint8_t>(codes[j] << 4 | codes[j + 1]);
    }
  }
}

MANTISSA_AVX2 void dequantize_4bit_avx2(const uint8_t* packed, const float* absmax, int64_t first,
                                        int64_t count, int64_t blocksize, FormatId format,
                                        float* out) {
  const int64_t end = first + count;
  int64_t k = first;
  // Scalar head up to a multiple of 16: then 16 elements never straddle a block (every
  // blocksize is a multiple of 16) and start on a whole byte.
  const int64_t head_end = std::min(end, (first + 15) / 16 * 16);
  if (blocksize % 16 != 0) {
    dequantize_4bit_scalar(packed, absmax, first, count, blocksize, format, out);
    return;
  }
  dequantize_4bit_scalar(packed, absmax, k, head_end - k, blocksize, format, out);
  k = head_end;
  const auto& table = four_bit_codebook(format).dequant_values;
  const __m256 lo = _mm256_loadu_ps(table.data()), hi = _mm256_loadu_ps(table.data() + 8);
  const __m256i nib = _mm256_set1_epi32(0xF);
  for (; k + 16 <= end; k += 16) {
    const __m256i bytes =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed + k / 2)));
    const __m256 vh = lookup16(lo, hi, _mm256_srli_epi32(bytes, 4));   // even elements
    const __m256 vl = lookup16(lo, hi, _mm256_and_si256(bytes, nib));  // odd elements
    const __m256 a = _mm256_unpacklo_ps(vh, vl);  // e0 e1 e2 e3 | e8 e9 e10 e11
    const __m256 b = _mm256_unpackhi_ps(vh, vl);  // e4 e5 e6 e7 | e12 e13 e14 e15
    const __m256 scale = _mm256_set1_ps(absmax[k / blocksize]);
    float* o = out + (k - first);
    _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_permute2f128_ps(a, b, 0x20), scale));
    _mm256_storeu_ps(o + 8, _mm256_mul_ps(_mm256_permute2f128_ps(a, b, 0x31), scale));
  }
  dequantize_4bit_scalar(packed, absmax, k, end - k, blocksize, format, out + (k - first));
}

}  // namespace mantissa::kernels::quant
