// AVX-512 building blocks of the GEMM packing (gemm_pack.cpp): a 16x16 transpose of 32-bit
// elements (f32 values, or the bf16 k-pairs that are adjacent in a row-major A or a transposed
// B) and the interleave of two bf16 rows into VNNI pairs. Only called on CPUs with AVX-512,
// which the native GEMM requires anyway.
// GCC 12 warns -W(maybe-)uninitialized about the _mm512_undefined_* placeholders inside
// AVX-512 intrinsics (bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "kernels/cpu/gemm/gemm_pack_avx512.h"

#define MANTISSA_PACK_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace mantissa::kernels::gemm {

MANTISSA_PACK_AVX512 void transpose32_avx512(const uint32_t* src, int64_t ld, int rows, int cols,
                                             uint32_t* dst, int64_t dst_ld) {
  const __mmask16 col_mask = static_cast<__mmask16>((1u << cols) - 1u);
  const __mmask16 row_mask = static_cast<__mmask16>((1u << rows) - 1u);
  __m512i r[16];
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_maskz_loadu_epi32(col_mask, src + i * ld) : _mm512_setzero_si512();
  // Three rounds of shuffles: 32-bit pairs, 64-bit pairs, then 128-bit lanes (twice).
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
  // r[c] now holds column c.
  for (int c = 0; c < cols; ++c) _mm512_mask_storeu_epi32(dst + c * dst_ld, row_mask, r[c]);
}

MANTISSA_PACK_AVX512 void interleave_bf16_avx512(const uint16_t* r0, const uint16_t* r1, int count,
                                                 uint16_t* dst) {
  const __mmask32 m = count >= 32 ? 0xffffffffu : (1u << count) - 1u;
  const __m512i a = _mm512_maskz_loadu_epi16(m, r0);
  const __m512i b = r1 != nullptr ? _mm512_maskz_loadu_epi16(m, r1) : _mm512_setzero_si512();
  // Word j of the result: a[j/2] for even j, b[j/2] for odd j (b is table entries 32..63).
  alignas(64) static constexpr uint16_t kLo[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                   37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                   11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static constexpr uint16_t kHi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21,
                                                   53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58,
                                                   27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i lo = _mm512_permutex2var_epi16(a, _mm512_load_si512(kLo), b);
  const __m512i hi = _mm512_permutex2var_epi16(a, _mm512_load_si512(kHi), b);
  const uint64_t words = 2 * static_cast<uint64_t>(count);
  const __mmask32 m_lo = words >= 32 ? 0xffffffffu : static_cast<__mmask32>((1ull << words) - 1);
  const __mmask32 m_hi = words >= 64   ? 0xffffffffu
                         : words <= 32 ? 0
                                       : static_cast<__mmask32>((1ull << (words - 32)) - 1);
  _mm512_mask_storeu_epi16(dst, m_lo, lo);
  _mm512_mask_storeu_epi16(dst + 32, m_hi, hi);
}

}  // namespace mantissa::kernels::gemm
