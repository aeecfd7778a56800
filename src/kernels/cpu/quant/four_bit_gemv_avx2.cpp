// AVX2 level of the 4-bit product for few rows (four_bit_gemv.h), the AVX-512 level's loops
// (four_bit_gemv_avx512.cpp) on 8-wide registers: a block's sixteen values are two ymm (codes
// 0-7 and 8-15), an element is looked up in both with VPERMPS and the one its code's bit 3
// names is kept (VBLENDVPS on that bit moved to the sign); an output's sixteen lanes are two
// accumulators, lanes 0-7 and 8-15.
#include <immintrin.h>

#include <algorithm>

#include "core/convert_avx2_lanes.h"
#include "kernels/cpu/common/sixteen_lane_sum.h"
#include "kernels/cpu/quant/four_bit_gemv.h"
#include "kernels/cpu/quant/four_bit_gemv_lanes.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace mantissa::kernels::quant {
namespace {

struct Table {
  __m256 lo, hi;  // values of codes 0-7, 8-15
};

struct Acc {
  __m256 lo, hi;  // lanes 0-7, 8-15
};

MANTISSA_AVX2 inline __m256 round8(__m256 p, ValueRounding r) {
  if (r == ValueRounding::kBf16)
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(convert_detail::bf16_rne(_mm256_castps_si256(p)), 16));
  if (r == ValueRounding::kF16)
    return _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return p;
}

MANTISSA_AVX2 inline Table block_table(const Table& book, float absmax, ValueRounding r) {
  const __m256 a = _mm256_set1_ps(absmax);
  return {round8(_mm256_mul_ps(book.lo, a), r), round8(_mm256_mul_ps(book.hi, a), r)};
}

// Eight codes (the low bits of each dword index) looked up in the sixteen values.
MANTISSA_AVX2 inline __m256 lookup8(__m256i idx, const Table& t) {
  const __m256 lo = _mm256_permutevar8x32_ps(t.lo, idx);
  const __m256 hi = _mm256_permutevar8x32_ps(t.hi, idx);
  return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

// Sixteen codes as bytes in element order (only each byte's low four bits count).
MANTISSA_AVX2 inline void lookup16(__m128i codes, const Table& t, __m256& lo, __m256& hi) {
  lo = lookup8(_mm256_cvtepu8_epi32(codes), t);
  hi = lookup8(_mm256_cvtepu8_epi32(_mm_srli_si128(codes, 8)), t);
}

// Sixteen elements from eight packed bytes, from an even element (as decode16 at AVX-512).
MANTISSA_AVX2 inline void decode16(const uint8_t* bytes, const Table& t, __m256& lo, __m256& hi) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
  lookup16(_mm_unpacklo_epi8(_mm_srli_epi16(b, 4), b), t, lo, hi);
}

// Rows [n, n + NB) of W against MB input rows, W's rows whole blocks.
template <int NB, int MB>
MANTISSA_AVX2 void rows_whole_blocks(const FourBitMatrix& w, const float* x, const Table& book,
                                     ValueRounding r, int64_t n, float* sums, int64_t ld) {
  const int64_t K = w.cols, bs = w.blocksize, per_row = K / bs;
  const uint8_t* row[NB];
  const float* absmax[NB];
  Acc acc[NB][MB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) {
    row[j] = w.packed + (n + j) * (K / 2);
    absmax[j] = w.absmax + (n + j) * per_row;
#pragma GCC unroll 4
    for (int i = 0; i < MB; ++i) acc[j][i] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  }
  for (int64_t kb = 0; kb < per_row; ++kb) {
    Table table[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) table[j] = block_table(book, absmax[j][kb], r);
    for (int64_t k0 = kb * bs; k0 < (kb + 1) * bs; k0 += 16) {
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) {
        __m256 lo, hi;
        decode16(row[j] + k0 / 2, table[j], lo, hi);
#pragma GCC unroll 4
        for (int i = 0; i < MB; ++i) {
          acc[j][i].lo = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * K + k0), lo, acc[j][i].lo);
          acc[j][i].hi = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * K + k0 + 8), hi, acc[j][i].hi);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
    for (int i = 0; i < MB; ++i)
      sums[i * ld + j] = sixteen_lane_sum_avx2(acc[j][i].lo, acc[j][i].hi);
}

// Lanes [lo, hi) of eight starting at lane `first`, as an all-ones mask per lane.
MANTISSA_AVX2 inline __m256i lane_mask(int64_t first, int64_t lo, int64_t hi) {
  const __m256i lane = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                        _mm256_set1_epi32(static_cast<int>(first)));
  return _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(lo) - 1)),
                          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lane));
}

MANTISSA_AVX2 inline __m256 masked_fma(const float* x, __m256i mask, __m256 v, __m256 acc) {
  const __m256 f = _mm256_fmadd_ps(_mm256_maskload_ps(x, mask), v, acc);
  return _mm256_blendv_ps(acc, f, _mm256_castsi256_ps(mask));
}

template <int MB>
MANTISSA_AVX2 void row_any_shape(const FourBitMatrix& w, const float* x, const Table& book,
                                 ValueRounding r, int64_t n, float* sums, int64_t ld) {
  const int64_t K = w.cols, bs = w.blocksize, flat0 = n * K;
  Acc acc[MB];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i) acc[i] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t k = 0; k < K;) {
    const int64_t block = (flat0 + k) / bs;
    const int64_t end = std::min(K, (block + 1) * bs - flat0);
    const Table table = block_table(book, w.absmax[block], r);
    for (int64_t k0 = k / 16 * 16; k0 < end; k0 += 16) {
      const int64_t lo = std::max(k, k0) - k0, hi = std::min(end, k0 + 16) - k0;
      __m256 vlo, vhi;
      if (lo == 0 && hi == 16 && (flat0 + k0) % 2 == 0) {
        decode16(w.packed + (flat0 + k0) / 2, table, vlo, vhi);
#pragma GCC unroll 4
        for (int i = 0; i < MB; ++i) {
          acc[i].lo = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * K + k0), vlo, acc[i].lo);
          acc[i].hi = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * K + k0 + 8), vhi, acc[i].hi);
        }
        continue;
      }
      alignas(16) uint8_t codes[16] = {};
      for (int64_t l = lo; l < hi; ++l)
        codes[l] = static_cast<uint8_t>(four_bit_code_at(w.packed, flat0 + k0 + l));
      lookup16(_mm_load_si128(reinterpret_cast<const __m128i*>(codes)), table, vlo, vhi);
      const __m256i mlo = lane_mask(0, lo, hi), mhi = lane_mask(8, lo, hi);
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) {
        acc[i].lo = masked_fma(x + i * K + k0, mlo, vlo, acc[i].lo);
        acc[i].hi = masked_fma(x + i * K + k0 + 8, mhi, vhi, acc[i].hi);
      }
    }
    k = end;
  }
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i) sums[i * ld] = sixteen_lane_sum_avx2(acc[i].lo, acc[i].hi);
}

template <int NB>
MANTISSA_AVX2 void whole_blocks(int mb, const FourBitMatrix& w, const float* x, const Table& book,
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

MANTISSA_AVX2 void any_shape(int mb, const FourBitMatrix& w, const float* x, const Table& book,
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

MANTISSA_AVX2 void four_bit_gemv_rows_avx2(const FourBitMatrix& w, const float* x, int64_t m,
                                           DType w_round, int64_t n0, int64_t n1, float* sums,
                                           int64_t ld) {
  const float* values = four_bit_codebook(w.format).dequant_values.data();
  const Table book{_mm256_loadu_ps(values), _mm256_loadu_ps(values + 8)};
  const ValueRounding r = value_rounding(w_round);
  const bool whole = w.cols % w.blocksize == 0 && w.blocksize % 16 == 0;
  for (int64_t n = n0; n < n1;) {
    // Four rows of W by up to two input rows: sixteen accumulators, as many as AVX2 has.
    const int nb = whole && n1 - n >= 4 ? 4 : 1;
    const int64_t step = nb == 4 ? 2 : 4;
    for (int64_t i0 = 0; i0 < m; i0 += step) {
      const int mb = static_cast<int>(std::min<int64_t>(step, m - i0));
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
