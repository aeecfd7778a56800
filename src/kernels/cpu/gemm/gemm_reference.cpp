#include "kernels/cpu/gemm/gemm_reference.h"

#include <algorithm>
#include <vector>

namespace mantissa::kernels {
namespace {

// Tile sizes: a KB x NB panel of B (256 KiB of doubles) stays in L2 while a block of MB rows
// of A streams over it.
constexpr int64_t kMB = 32;
constexpr int64_t kKB = 128;
constexpr int64_t kNB = 256;

// C[rows i0..i1) of one batch entry. B panels are packed row-major so the inner loop is a
// unit-stride axpy whatever B's layout (transposed views arrive here without a copy).
// An AVX2 clone doubles the vector width; AVX2 without FMA (unlike an AVX-512 clone, where GCC
// would contract into fused multiply-adds) keeps the result bit-identical on every x86-64.
__attribute__((target_clones("avx2", "default"))) void gemm_rows(
    int64_t i0, int64_t i1, int64_t N, int64_t K, const double* A, int64_t ars, int64_t acs,
    const double* B, int64_t brs, int64_t bcs, double* C, std::vector<double>& panel) {
  std::fill(C + i0 * N, C + i1 * N, 0.0);
  for (int64_t n0 = 0; n0 < N; n0 += kNB) {
    const int64_t nb = std::min(kNB, N - n0);
    for (int64_t k0 = 0; k0 < K; k0 += kKB) {
      const int64_t kb = std::min(kKB, K - k0);
      panel.resize(static_cast<size_t>(kb * nb));
      for (int64_t k = 0; k < kb; ++k) {
        const double* src = B + (k0 + k) * brs + n0 * bcs;
        double* dst = panel.data() + k * nb;
        for (int64_t j = 0; j < nb; ++j) dst[j] = src[j * bcs];
      }
      for (int64_t i = i0; i < i1; ++i) {
        double* crow = C + i * N + n0;
        const double* arow = A + i * ars + k0 * acs;
        for (int64_t k = 0; k < kb; ++k) {
          const double aik = arow[k * acs];
          const double* brow = panel.data() + k * nb;
#pragma omp simd
          for (int64_t j = 0; j < nb; ++j) crow[j] += aik * brow[j];
        }
      }
    }
  }
}

}  // namespace

void gemm_f64_batched(int64_t batch, int64_t M, int64_t N, int64_t K, StridedMatrix a,
                      const int64_t* a_offsets, StridedMatrix b, const int64_t* b_offsets,
                      double* c) {
  const int64_t row_blocks = (M + kMB - 1) / kMB;
  const int64_t tiles = batch * row_blocks;
  const bool parallel = tiles > 1 && batch * M * N * K > (1 << 15);
#pragma omp parallel if (parallel)
  {
    std::vector<double> panel;  // per thread
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t bi = t / row_blocks;
      const int64_t i0 = (t % row_blocks) * kMB;
      const int64_t i1 = std::min(M, i0 + kMB);
      gemm_rows(i0, i1, N, K, a.data + a_offsets[bi], a.row_stride, a.col_stride,
                b.data + b_offsets[bi], b.row_stride, b.col_stride, c + bi * M * N, panel);
    }
  }
}

}  // namespace mantissa::kernels
