#pragma once
// Internal: byte_transpose_avx2.h's in-lane 16 x 16 byte transpose on sixteen AVX-512 vectors
// (four independent transposes, one per 128-bit lane): the AVX-512 transposed cast of MX
// (mx/mx_columns_avx512.cpp). Carries its target and is always inlined, so only the AVX-512
// files that call it compile it.
#include <immintrin.h>

namespace mantissa::kernels {

// Byte j of x[i] (per 128-bit lane) becomes byte i of x[j]. Unrolled whole, so that the
// temporaries stay in registers.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void transpose16x16_bytes(
    __m512i* x) {
  __m512i a[16], b[16];
#pragma GCC unroll 16
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm512_unpacklo_epi8(x[2 * k], x[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi8(x[2 * k], x[2 * k + 1]);
  }
#pragma GCC unroll 16
  for (int g = 0; g < 4; ++g) {
    b[4 * g] = _mm512_unpacklo_epi16(a[4 * g], a[4 * g + 2]);
    b[4 * g + 1] = _mm512_unpackhi_epi16(a[4 * g], a[4 * g + 2]);
    b[4 * g + 2] = _mm512_unpacklo_epi16(a[4 * g + 1], a[4 * g + 3]);
    b[4 * g + 3] = _mm512_unpackhi_epi16(a[4 * g + 1], a[4 * g + 3]);
  }
#pragma GCC unroll 16
  for (int h = 0; h < 2; ++h)
#pragma GCC unroll 16
    for (int q = 0; q < 4; ++q) {
      a[8 * h + 2 * q] = _mm512_unpacklo_epi32(b[8 * h + q], b[8 * h + 4 + q]);
      a[8 * h + 2 * q + 1] = _mm512_unpackhi_epi32(b[8 * h + q], b[8 * h + 4 + q]);
    }
#pragma GCC unroll 16
  for (int q = 0; q < 4; ++q)
#pragma GCC unroll 16
    for (int p = 0; p < 2; ++p) {
      x[4 * q + 2 * p] = _mm512_unpacklo_epi64(a[2 * q + p], a[8 + 2 * q + p]);
      x[4 * q + 2 * p + 1] = _mm512_unpackhi_epi64(a[2 * q + p], a[8 + 2 * q + p]);
    }
}

}  // namespace mantissa::kernels
