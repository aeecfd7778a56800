// AVX-512 level of the float32 product for few rows (dense_gemv.h): an output's sixteen lanes
// are one zmm; four of W's rows share each load of x, and a row's last partial vector is read
// through a mask (the lanes past k add 0 * 0).
// GCC 12 warns -W(maybe-)uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "kernels/cpu/common/sixteen_lane_sum.h"
#include "kernels/cpu/gemm/dense_gemv.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f")))

namespace mantissa::kernels {
namespace {

template <int NB>
MANTISSA_AVX512 void rows_of(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n,
                             float* sums) {
  __m512 acc[NB];
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) acc[j] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const __m512 xv = _mm512_loadu_ps(x + p);
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j)
      acc[j] = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w + (n + j) * ldw + p), acc[j]);
  }
  if (p < k) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (k - p)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(mask, x + p);
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j)
      acc[j] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(mask, w + (n + j) * ldw + p), acc[j]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < NB; ++j) sums[j] = sixteen_lane_sum_avx512(acc[j]);
}

}  // namespace

void dense_gemv_rows_avx512(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n0,
                            int64_t n1, float* sums) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) rows_of<4>(w, ldw, k, x, n, sums + (n - n0));
  for (; n < n1; ++n) rows_of<1>(w, ldw, k, x, n, sums + (n - n0));
}

}  // namespace mantissa::kernels
