// The micro-kernel of the AVX2 float64 GEMM: a 6x8 C tile in 12 ymm accumulators, one broadcast
// of A times two ymm of B per row and k step. Edge tiles go through a 6x8 buffer so the hot loop
// never needs masks. Compiled with a per-function target; the driver runs it only on CPUs with
// AVX2 and FMA.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/gemm/gemm_f64_avx2_impl.h"

#define MANTISSA_GEMM_AVX2 __attribute__((target("avx2,fma")))

namespace mantissa::kernels::gemm_avx2_f64 {

MANTISSA_GEMM_AVX2 void kernel_f64_avx2(int64_t kc, const double* a, const double* b,
                                        const Tile& t) {
  const bool full = t.m == kMR && t.n == kNR;
  alignas(32) double edge[kMR][kNR];
  __m256d acc[kMR][2];
  if (!t.load) {
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      acc[i][0] = _mm256_setzero_pd();
      acc[i][1] = _mm256_setzero_pd();
    }
  } else {
    const double* src = t.c;
    int64_t ld = t.ldc;
    if (!full) {
      // Rows and columns past the edge are padding: their sums are computed and dropped.
      std::memset(edge, 0, sizeof edge);
      for (int i = 0; i < t.m; ++i) std::memcpy(edge[i], t.c + i * t.ldc, sizeof(double) * t.n);
      src = &edge[0][0];
      ld = kNR;
    }
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      acc[i][0] = _mm256_loadu_pd(src + i * ld);
      acc[i][1] = _mm256_loadu_pd(src + i * ld + 4);
    }
  }

#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    const __m256d b0 = _mm256_load_pd(b);
    const __m256d b1 = _mm256_load_pd(b + 4);
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      const __m256d ai = _mm256_broadcast_sd(a + i);
      acc[i][0] = _mm256_fmadd_pd(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_pd(ai, b1, acc[i][1]);
    }
    a += kMR;
    b += kNR;
  }

  if (full) {
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      _mm256_storeu_pd(t.c + i * t.ldc, acc[i][0]);
      _mm256_storeu_pd(t.c + i * t.ldc + 4, acc[i][1]);
    }
    return;
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) {
    _mm256_store_pd(edge[i], acc[i][0]);
    _mm256_store_pd(edge[i] + 4, acc[i][1]);
  }
  for (int i = 0; i < t.m; ++i) std::memcpy(t.c + i * t.ldc, edge[i], sizeof(double) * t.n);
}

}  // namespace mantissa::kernels::gemm_avx2_f64
