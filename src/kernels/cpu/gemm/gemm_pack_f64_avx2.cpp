// Packing for the AVX2 float64 GEMM: copies a panel of A (kMR rows) or B (kNR columns) from any
// strides into the kernel's contiguous, zero-padded [k][width] layout (gemm_f64_avx2_impl.h).
// A panel contiguous along its width (a row-major B, a transposed A) is copied a row of k at a
// time; one contiguous along k (a row-major A, a transposed B: a Linear's W^T, an im2col matrix
// read transposed) is transposed 4 x 4 in ymm registers; other strides element by element.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm/gemm_f64_avx2_impl.h"

#define MANTISSA_GEMM_AVX2 __attribute__((target("avx2,fma")))

namespace mantissa::kernels::gemm_avx2_f64 {
namespace {

// dst[k * W + p] = src[p * ps + k], p < 4, k < 4 (a full 4 x 4 block): four loads along k, an
// in-register transpose, four stores along p.
MANTISSA_GEMM_AVX2 inline void transpose4(const double* src, int64_t ps, double* dst, int W) {
  const __m256d r0 = _mm256_loadu_pd(src);
  const __m256d r1 = _mm256_loadu_pd(src + ps);
  const __m256d r2 = _mm256_loadu_pd(src + 2 * ps);
  const __m256d r3 = _mm256_loadu_pd(src + 3 * ps);
  const __m256d t0 = _mm256_unpacklo_pd(r0, r1);  // r0[0] r1[0] r0[2] r1[2]
  const __m256d t1 = _mm256_unpackhi_pd(r0, r1);  // r0[1] r1[1] r0[3] r1[3]
  const __m256d t2 = _mm256_unpacklo_pd(r2, r3);
  const __m256d t3 = _mm256_unpackhi_pd(r2, r3);
  _mm256_storeu_pd(dst, _mm256_permute2f128_pd(t0, t2, 0x20));
  _mm256_storeu_pd(dst + W, _mm256_permute2f128_pd(t1, t3, 0x20));
  _mm256_storeu_pd(dst + 2 * W, _mm256_permute2f128_pd(t0, t2, 0x31));
  _mm256_storeu_pd(dst + 3 * W, _mm256_permute2f128_pd(t1, t3, 0x31));
}

template <int W>
MANTISSA_GEMM_AVX2 void pack(const double* src, int64_t ps, int64_t ks, int count, int64_t K,
                             double* dst) {
  if (count < W) std::memset(dst, 0, sizeof(double) * static_cast<size_t>(K) * W);
  if (ps == 1) {
    for (int64_t k = 0; k < K; ++k)
      std::memcpy(dst + k * W, src + k * ks, sizeof(double) * static_cast<size_t>(count));
    return;
  }
  if (ks == 1) {
    const int full_p = count / 4 * 4;
    const int64_t full_k = K / 4 * 4;
    for (int p0 = 0; p0 < full_p; p0 += 4)
      for (int64_t k0 = 0; k0 < full_k; k0 += 4)
        transpose4(src + p0 * ps + k0, ps, dst + k0 * W + p0, W);
    // The ragged edges, element by element.
    for (int p = 0; p < count; ++p)
      for (int64_t k = p < full_p ? full_k : 0; k < K; ++k) dst[k * W + p] = src[p * ps + k];
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int p = 0; p < count; ++p) dst[k * W + p] = src[p * ps + k * ks];
}

}  // namespace

void pack_a(const double* src, int64_t ps, int64_t ks, int count, int64_t K, double* dst) {
  pack<kMR>(src, ps, ks, count, K, dst);
}
void pack_b(const double* src, int64_t ps, int64_t ks, int count, int64_t K, double* dst) {
  pack<kNR>(src, ps, ks, count, K, dst);
}

}  // namespace mantissa::kernels::gemm_avx2_f64
