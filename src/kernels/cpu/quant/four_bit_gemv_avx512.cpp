// AVX-512 level of the 4-bit product for few rows (four_bit_gemv.h): one zmm holds a block's
// sixteen values, VPERMPS looks up sixteen elements at once, one zmm accumulator holds the
// sixteen lanes of an output. Where every row of W is whole blocks of a multiple of 32 elements
// (in_features a multiple of the blocksize, as in every model) four rows of W go together, 32
// elements a step, so x is loaded once for four outputs and four FMA chains run side by side;
// other shapes take a row at a time, with masked loads where a block or a row starts or ends
// inside sixteen elements.
// GCC 12 warns -W(maybe-)uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#include "core/bf16_rne_avx512.h"
#include "kernels/cpu/common/sixteen_lane_sum.h"
#include "kernels/cpu/quant/four_bit_gemv.h"
#include "kernels/cpu/quant/four_bit_gemv_lanes.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace mantissa::kernels::quant {
namespace {

// The block's sixteen values: the code book times absmax, rounded as dequantize rounds them.
MANTISSA_AVX512 inline __m512 block_table(__m512 book, float absmax, ValueRounding r) {
  const __m512 p = _mm512_mul_ps(book, _mm512_set1_ps(absmax));
  if (r == ValueRounding::kBf16)
    return _mm512_castsi512_ps(_mm512_slli_epi32(bf16_rne(_mm512_castps_si512(p)), 16));
  if (r == ValueRounding::kF16)
    return _mm512_cvtph_ps(_mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return p;
}

// Sixteen elements from eight packed bytes (from an even element): each byte's high nibble then
// its low one, as bytes in element order. VPERMPS reads only an index's low four bits, so
// neither nibble needs masking: a 16-bit shift by 4 leaves the high nibble in the low bits.
MANTISSA_AVX512 inline __m512 decode16(const uint8_t* bytes, __m512 table) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
  const __m128i codes = _mm_unpacklo_epi8(_mm_srli_epi16(b, 4), b);
  return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(codes), table);
}

// Thirty-two elements from sixteen packed bytes (from an even element), as two decode16.
MANTISSA_AVX512 inline void decode32(const uint8_t* bytes, __m512 table, __m512& first,
                                     __m512& second) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  const __m128i high = _mm_srli_epi16(b, 4);
  first = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(high, b)), table);
  second = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(high, b)), table);
}

// Rows [n, n + NB) of W against MB input rows, W's rows whole blocks of a multiple of 32
// elements: 32 elements a step, the first sixteen then the second into the same lanes.
template <int NB, int MB>
MANTISSA_AVX512 void rows_whole_blocks(const FourBitMatrix& w, const float* x, __m512 book,
                                       ValueRounding r, int64_t n, float* sums, int64_t ld) {
  const int64_t K = w.cols, bs = w.blocksize, per_row = K / bs;
  const uint8_t* row[NB];
  const float* absmax[NB];
  __m512 acc[NB][MB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) {
    row[j] = w.packed + (n + j) * (K / 2);
    absmax[j] = w.absmax + (n + j) * per_row;
#pragma GCC unroll 4
    for (int i = 0; i < MB; ++i) acc[j][i] = _mm512_setzero_ps();
  }
  for (int64_t kb = 0; kb < per_row; ++kb) {
    __m512 table[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) table[j] = block_table(book, absmax[j][kb], r);
    for (int64_t k0 = kb * bs; k0 < (kb + 1) * bs; k0 += 32) {
      __m512 x0[MB], x1[MB];
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) {
        x0[i] = _mm512_loadu_ps(x + i * K + k0);
        x1[i] = _mm512_loadu_ps(x + i * K + k0 + 16);
      }
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        __m512 v0, v1;
        decode32(row[j] + k0 / 2, table[j], v0, v1);
#pragma GCC unroll 4
        for (int i = 0; i < MB; ++i)
          acc[j][i] = _mm512_fmadd_ps(x1[i], v1, _mm512_fmadd_ps(x0[i], v0, acc[j][i]));
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
    for (int i = 0; i < MB; ++i) sums[i * ld + j] = sixteen_lane_sum_avx512(acc[j][i]);
}

// Row n of W against MB input rows, any shape: each block's part of the row in steps of sixteen
// k aligned to sixteen (lane k % 16), the lanes outside the part masked off.
template <int MB>
MANTISSA_AVX512 void row_any_shape(const FourBitMatrix& w, const float* x, __m512 book,
                                   ValueRounding r, int64_t n, float* sums, int64_t ld) {
  const int64_t K = w.cols, bs = w.blocksize, flat0 = n * K;
  __m512 acc[MB];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K;) {
    const int64_t block = (flat0 + k) / bs;
    const int64_t end = std::min(K, (block + 1) * bs - flat0);
    const __m512 table = block_table(book, w.absmax[block], r);
    for (int64_t k0 = k / 16 * 16; k0 < end; k0 += 16) {
      const int64_t lo = std::max(k, k0) - k0, hi = std::min(end, k0 + 16) - k0;
      const __mmask16 mask = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
      __m512 v;
      if (mask == 0xFFFF && (flat0 + k0) % 2 == 0) {
        v = decode16(w.packed + (flat0 + k0) / 2, table);
      } else {
        alignas(16) uint8_t codes[16] = {};
        for (int64_t l = lo; l < hi; ++l)
          codes[l] = static_cast<uint8_t>(four_bit_code_at(w.packed, flat0 + k0 + l));
        const __m128i c = _mm_load_si128(reinterpret_cast<const __m128i*>(codes));
        v = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(c), table);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) {
        const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * K + k0);
        acc[i] = _mm512_mask3_fmadd_ps(xv, v, acc[i], mask);
      }
    }
    k = end;
  }
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i) sums[i * ld] = sixteen_lane_sum_avx512(acc[i]);
}

template <int NB>
MANTISSA_AVX512 void whole_blocks(int mb, const FourBitMatrix& w, const float* x, __m512 book,
                                  ValueRounding r, int64_t n, float* sums, int64_t ld) {
  switch (mb) {
    case 1:
      return rows_whole_blocks<NB, 1>(w, x, book, r, n, sums, ld);
    case 2:
      return rows_whole_blocks<NB, 2>(w, x, book, r, n, sums, ld);
    case 3:
      return rows_whole_blocks<NB, 3>(w, x, book, r, n, sums, ld);
    default:
      return rows_whole_blocks<NB, 4>(w, x, book, r, n, sums, ld);
  }
}

MANTISSA_AVX512 void any_shape(int mb, const FourBitMatrix& w, const float* x, __m512 book,
                               ValueRounding r, int64_t n, float* sums, int64_t ld) {
  switch (mb) {
    case 1:
      return row_any_shape<1>(w, x, book, r, n, sums, ld);
    case 2:
      return row_any_shape<2>(w, x, book, r, n, sums, ld);
    case 3:
      return row_any_shape<3>(w, x, book, r, n, sums, ld);
    default:
      return row_any_shape<4>(w, x, book, r, n, sums, ld);
  }
}

}  // namespace

MANTISSA_AVX512 void four_bit_gemv_rows_avx512(const FourBitMatrix& w, const float* x, int64_t m,
                                               DType w_round, int64_t n0, int64_t n1, float* sums,
                                               int64_t ld) {
  const __m512 book = _mm512_loadu_ps(four_bit_codebook(w.format).dequant_values.data());
  const ValueRounding r = value_rounding(w_round);
  const bool whole = w.cols % w.blocksize == 0 && w.blocksize % 32 == 0;
  for (int64_t n = n0; n < n1;) {
    const int nb = whole && n1 - n >= 4 ? 4 : 1;
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      const int mb = static_cast<int>(std::min<int64_t>(4, m - i0));
      const float* xi = x + i0 * w.cols;
      float* s = sums + i0 * ld + (n - n0);
      if (nb == 4)
        whole_blocks<4>(mb, w, xi, book, r, n, s, ld);
      else if (whole)
        whole_blocks<1>(mb, w, xi, book, r, n, s, ld);
      else
        any_shape(mb, w, xi, book, r, n, s, ld);
    }
    n += nb;
  }
}

}  // namespace mantissa::kernels::quant
