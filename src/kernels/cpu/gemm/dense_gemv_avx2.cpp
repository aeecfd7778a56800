// AVX2 level of the float32 product for few rows (dense_gemv.h), the AVX-512 level's loop on
// 8-wide registers: an output's sixteen lanes are two accumulators (lanes 0-7 and 8-15); four of
// W's rows share each load of x, and a row's last partial vectors are read through masks (the
// lanes past k add 0 * 0).
#include <immintrin.h>

#include "kernels/cpu/common/sixteen_lane_sum.h"
#include "kernels/cpu/gemm/dense_gemv.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma")))

namespace mantissa::kernels {
namespace {

struct Acc {
  __m256 lo, hi;  // lanes 0-7, 8-15
};

// The lanes [first, first + 8) that are below `count`, as a maskload mask.
MANTISSA_AVX2 inline __m256i lanes_below(int64_t count, int first) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count) - first), idx);
}

template <int NB>
MANTISSA_AVX2 void rows_of(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n,
                           float* sums) {
  Acc acc[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) acc[j] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const __m256 xlo = _mm256_loadu_ps(x + p), xhi = _mm256_loadu_ps(x + p + 8);
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      const float* r = w + (n + j) * ldw + p;
      acc[j].lo = _mm256_fmadd_ps(xlo, _mm256_loadu_ps(r), acc[j].lo);
      acc[j].hi = _mm256_fmadd_ps(xhi, _mm256_loadu_ps(r + 8), acc[j].hi);
    }
  }
  if (p < k) {
    const __m256i mlo = lanes_below(k - p, 0), mhi = lanes_below(k - p, 8);
    const __m256 xlo = _mm256_maskload_ps(x + p, mlo), xhi = _mm256_maskload_ps(x + p + 8, mhi);
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      const float* r = w + (n + j) * ldw + p;
      acc[j].lo = _mm256_fmadd_ps(xlo, _mm256_maskload_ps(r, mlo), acc[j].lo);
      acc[j].hi = _mm256_fmadd_ps(xhi, _mm256_maskload_ps(r + 8, mhi), acc[j].hi);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) sums[j] = sixteen_lane_sum_avx2(acc[j].lo, acc[j].hi);
}

}  // namespace

void dense_gemv_rows_avx2(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n0,
                          int64_t n1, float* sums) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) rows_of<4>(w, ldw, k, x, n, sums + (n - n0));
  for (; n < n1; ++n) rows_of<1>(w, ldw, k, x, n, sums + (n - n0));
}

}  // namespace mantissa::kernels
