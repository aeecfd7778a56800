#pragma once
// Internal: an in-lane 16 x 16 byte transpose of sixteen AVX2 vectors, which turns the codes of
// 16 columns cast row by row into each column's codes in a row: the MX transposed cast
// (mx/mx_columns_avx2.cpp). Carries its target and is always inlined, so only the AVX2 files that
// call it compile it.
#include <immintrin.h>

namespace mantissa::kernels {

// Byte j of x[i] (per 128-bit lane) becomes byte i of x[j].
__attribute__((target("avx2"), always_inline)) inline void transpose16x16_bytes(__m256i* x) {
  __m256i a[16], b[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm256_unpacklo_epi8(x[2 * k], x[2 * k + 1]);
    a[2 * k + 1] = _mm256_unpackhi_epi8(x[2 * k], x[2 * k + 1]);
  }
  // a[2k]: words w = rows 2k, 2k + 1 at byte w; a[2k + 1]: at byte w + 8.
  for (int g = 0; g < 4; ++g) {
    b[4 * g] = _mm256_unpacklo_epi16(a[4 * g], a[4 * g + 2]);
    b[4 * g + 1] = _mm256_unpackhi_epi16(a[4 * g], a[4 * g + 2]);
    b[4 * g + 2] = _mm256_unpacklo_epi16(a[4 * g + 1], a[4 * g + 3]);
    b[4 * g + 3] = _mm256_unpackhi_epi16(a[4 * g + 1], a[4 * g + 3]);
  }
  // b[4g + q]: dword d = rows 4g..4g + 3 at byte 4q + d.
  for (int h = 0; h < 2; ++h)
    for (int q = 0; q < 4; ++q) {
      a[8 * h + 2 * q] = _mm256_unpacklo_epi32(b[8 * h + q], b[8 * h + 4 + q]);
      a[8 * h + 2 * q + 1] = _mm256_unpackhi_epi32(b[8 * h + q], b[8 * h + 4 + q]);
    }
  // a[8h + 2q + p]: qword w = rows 8h..8h + 7 at byte 4q + 2p + w.
  for (int q = 0; q < 4; ++q)
    for (int p = 0; p < 2; ++p) {
      x[4 * q + 2 * p] = _mm256_unpacklo_epi64(a[2 * q + p], a[8 + 2 * q + p]);
      x[4 * q + 2 * p + 1] = _mm256_unpackhi_epi64(a[2 * q + p], a[8 + 2 * q + p]);
    }
}

}  // namespace mantissa::kernels
