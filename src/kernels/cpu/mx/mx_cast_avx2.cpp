// AVX2 (+FMA, F16C) level of the MX casts: its row casts by element type (mx_rows_fp8_avx2.cpp,
// mx_rows_e2m1_avx2.cpp) and decode, which the AVX-512 level runs too. The column-wise cast's
// bodies are mx_columns_*_avx2.cpp's, the NVFP4 and MXFP4-SR bodies nvfp4_rows_avx2.cpp's; this
// file's table (kAvx2Kernels) names them all.
#include <immintrin.h>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_columns_levels.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mx_rows_levels.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;
using avx2_lanes::e4m3_values;  // beside the overload on code bytes below

MxStatsRun encode_rows(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                       uint8_t* codes, uint8_t* scales, bool stats, bool stream) {
  if (e == Element::kE2m1)
    return avx2::mx_rows_e2m1(src, dtype, n, r, codes, scales, stats, stream);
  return avx2::mx_rows_fp8(src, dtype, n, e, r, codes, scales, stats, stream);
}

void mx_encode(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r, uint8_t* codes,
               uint8_t* scales) {
  encode_rows(src, dtype, n, e, r, codes, scales, false, false);
}

MxStatsRun mx_encode_streamed(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                              uint8_t* codes, uint8_t* scales, bool stats) {
  return encode_rows(src, dtype, n, e, r, codes, scales, stats, true);
}

MxStatsRun mx_encode_stats(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                           uint8_t* codes, uint8_t* scales) {
  return encode_rows(src, dtype, n, e, r, codes, scales, true, false);
}

// The values of 8 E5M2 codes: each is the high byte of a half (scalar::e5m2_value).
inline __m256 e5m2_values(const uint8_t* src) {
  const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
  const __m256i half = _mm256_slli_epi32(c, 8);
  return _mm256_cvtph_ps(
      _mm_packus_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1)));
}
inline __m256 e4m3_values(const uint8_t* src) {
  return e4m3_values(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src))));
}

void mx_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, Element e, float* out) {
  const int64_t full = n / kMxBlock * kMxBlock;
  for (int64_t i = 0; i < full; i += kMxBlock) {
    const __m256 s = _mm256_set1_ps(e8m0_value(scales[i / kMxBlock]));
    for (int64_t j = i; j < i + kMxBlock; j += 8) {
      __m256 v;
      if (e == Element::kE4m3) {
        v = e4m3_values(codes + j);
      } else if (e == Element::kE5m2) {
        v = e5m2_values(codes + j);
      } else {
        v = e2m1_values(codes + j / 2);
      }
      _mm256_storeu_ps(out + j, _mm256_mul_ps(v, s));
    }
  }
  if (full < n)
    kScalarKernels.decode(codes + code_bytes(e, full), scales + full / kMxBlock, n - full, e,
                          out + full);
}

}  // namespace

const MxKernels kAvx2Kernels = {.encode = mx_encode,
                                .encode_stats = mx_encode_stats,
                                .decode = mx_decode,
                                .encode_streamed = mx_encode_streamed,
                                .nvfp4_encode = avx2::nvfp4_encode,
                                .nvfp4_encode_sr = avx2::nvfp4_encode_sr,
                                .nvfp4_decode = avx2::nvfp4_decode,
                                .amax = avx2::amax,
                                .nvfp4_encode_stats = avx2::nvfp4_encode_stats,
                                .mxfp4_encode_sr = avx2::mxfp4_encode_sr,
                                .encode_column_band = avx2::encode_column_band};

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
