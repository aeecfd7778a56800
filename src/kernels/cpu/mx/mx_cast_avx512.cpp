// AVX-512 (F, BW, VL) level of the MX casts: its decode, 16 lanes at a time (one MX block is
// two vectors). Its row casts of bfloat16 to FP8 are mx_rows_fp8_avx512.cpp's, to E2M1 under the
// floor scale (with VBMI) mx_rows_e2m1_avx512.cpp's; float32's to FP8 and the other E2M1 casts
// are the AVX2 bodies' (mx_rows_fp8_avx2.cpp, mx_rows_e2m1_avx2.cpp), which cast each block on
// the source's bits, 8 or 16 elements a vector. The column-wise casts run the AVX2
// bodies (mx_columns_*_avx2.cpp). Its NVFP4 and MXFP4-SR bodies are nvfp4_cast_avx512.cpp's.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_columns_levels.h"
#include "kernels/cpu/mx/mx_lanes_avx512.h"
#include "kernels/cpu/mx/mx_rows_levels.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx512_lanes;
using avx512_lanes::e4m3_values;  // beside the overload on code bytes below

// The row casts: FP8 by mx_rows_fp8_avx512.cpp (its own body for bfloat16), E2M1 by
// mx_rows_e2m1_avx512.cpp (its own body under the floor scale with VBMI).
MxStatsRun encode_rows(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                       uint8_t* codes, uint8_t* scales, bool stats, bool stream) {
  if (e == Element::kE2m1)
    return avx512::mx_rows_e2m1(src, dtype, n, r, codes, scales, stats, stream);
  return avx512::mx_rows_fp8(src, dtype, n, e, r, codes, scales, stats, stream);
}

void mx_encode(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r, uint8_t* codes,
               uint8_t* scales) {
  encode_rows(src, dtype, n, e, r, codes, scales, false, false);
}

MxStatsRun mx_encode_stats(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                           uint8_t* codes, uint8_t* scales) {
  return encode_rows(src, dtype, n, e, r, codes, scales, true, false);
}

MxStatsRun mx_encode_streamed(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                              uint8_t* codes, uint8_t* scales, bool stats) {
  return encode_rows(src, dtype, n, e, r, codes, scales, stats, true);
}

// The values of 16 E5M2 codes: each is the high byte of a half (scalar::e5m2_value).
inline __m512 e5m2_values(const uint8_t* src) {
  const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_slli_epi32(c, 8)));
}
inline __m512 e4m3_values(const uint8_t* src) {
  return e4m3_values(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
}

void mx_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, Element e, float* out) {
  const int64_t full = n / kMxBlock * kMxBlock;
  const __m512 table = e2m1_table();
  for (int64_t i = 0; i < full; i += kMxBlock) {
    const __m512 s = _mm512_set1_ps(e8m0_value(scales[i / kMxBlock]));
    for (int64_t j = i; j < i + kMxBlock; j += 16) {
      __m512 v;
      if (e == Element::kE4m3) {
        v = e4m3_values(codes + j);
      } else if (e == Element::kE5m2) {
        v = e5m2_values(codes + j);
      } else {
        v = _mm512_permutexvar_ps(unpack_e2m1(codes + j / 2), table);
      }
      _mm512_storeu_ps(out + j, _mm512_mul_ps(v, s));
    }
  }
  if (full < n)
    kScalarKernels.decode(codes + code_bytes(e, full), scales + full / kMxBlock, n - full, e,
                          out + full);
}

}  // namespace

const MxKernels kAvx512Kernels = {.encode = mx_encode,
                                  .encode_stats = mx_encode_stats,
                                  .decode = mx_decode,
                                  .encode_streamed = mx_encode_streamed,
                                  .nvfp4_encode = avx512::nvfp4_encode,
                                  .nvfp4_encode_sr = avx512::nvfp4_encode_sr,
                                  .nvfp4_decode = avx512::nvfp4_decode,
                                  .amax = avx512::amax,
                                  .nvfp4_encode_stats = avx512::nvfp4_encode_stats,
                                  .mxfp4_encode_sr = avx512::mxfp4_encode_sr,
                                  .encode_column_band = avx512::encode_column_band};

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
