// Driver of the AVX2 float64 GEMM (gemm_f64.h): hands out (batch, N block, M chunk) tasks to the
// OpenMP threads, as the fp32 AVX2 driver does (gemm_native_avx2.cpp). For each K block a task
// packs its N block's B panels (they stay in this core's L2 while the M blocks sweep past them),
// then packs and multiplies each M block of its chunk. Every C element is one fixed sequence of
// FMAs over k, K blocks in order, whichever thread computes it: the bits do not depend on the
// thread count.
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/common/growable_buffer.h"
#include "kernels/cpu/gemm/gemm_blocking.h"
#include "kernels/cpu/gemm/gemm_f64.h"
#include "kernels/cpu/gemm/gemm_f64_avx2_impl.h"

namespace mantissa::kernels {
namespace {

using gemm_avx2_f64::kKc;
using gemm_avx2_f64::kMcMax;
using gemm_avx2_f64::kMR;
using gemm_avx2_f64::kNcMax;
using gemm_avx2_f64::kNR;

thread_local GrowableBuffer packed_a, packed_b;

using gemm_blocking::block_size;
using gemm_blocking::ceil_div;

int64_t offset(const int64_t* offsets, int64_t i) { return offsets ? offsets[i] : 0; }

// Below this many multiply-adds a product runs on the calling thread: waking the team costs
// more than it saves (the ViT's per-head products, a gradient check's tiny matrices).
constexpr int64_t kParallelMinFmas = int64_t{1} << 16;

}  // namespace

void gemm_f64_avx2(const GemmF64Args& g) {
  const int64_t batch = g.batch, M = g.M, N = g.N, K = g.K;
  const int64_t ldc = g.ldc > 0 ? g.ldc : N;
  const int64_t threads = omp_get_max_threads();
  const int64_t mc = block_size(M, kMcMax, kMR);
  const int64_t kc = block_size(K, kKc, 1);
  const int64_t nc = block_size(N, kNcMax, kNR);
  const int64_t n_blocks = ceil_div(N, nc);

  // Tasks as the fp32 driver's: (batch entry, N block) pairs over row chunks.
  const int64_t pairs = batch * n_blocks;
  const auto [chunk_rows, m_chunks] = gemm_blocking::row_chunks(pairs, M, kMR, threads);
  const int64_t tasks = pairs * m_chunks;
  const bool parallel = tasks > 1 && batch * M * N * K >= kParallelMinFmas;

#pragma omp parallel if (parallel)
  {
    // Per thread: one packed A block (mc x kc) and one packed B block (kc x nc).
    const char* op = "gemm_f64";
    auto* pa = static_cast<double*>(packed_a.get(sizeof(double) * mc * kc, op));
    auto* pb = static_cast<double*>(packed_b.get(sizeof(double) * kc * nc, op));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bi = task / (n_blocks * m_chunks);
      const int64_t n0 = task / m_chunks % n_blocks * nc, n1 = std::min(N, n0 + nc);
      const int64_t m_lo = task % m_chunks * chunk_rows, m_hi = std::min(M, m_lo + chunk_rows);
      const double* a = g.a.data + offset(g.a_offsets, bi);
      const double* b = g.b.data + offset(g.b_offsets, bi);
      double* c = g.c + (g.c_offsets ? g.c_offsets[bi] : bi * M * ldc);
      for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t kcur = std::min(kc, K - k0);
        for (int64_t col = n0; col < n1; col += kNR)
          gemm_avx2_f64::pack_b(b + col * g.b.col_stride + k0 * g.b.row_stride, g.b.col_stride,
                                g.b.row_stride, static_cast<int>(std::min<int64_t>(kNR, N - col)),
                                kcur, pb + (col - n0) * kcur);
        gemm_avx2_f64::Tile t;
        t.ldc = ldc;
        t.load = k0 > 0 || g.accumulate;
        for (int64_t m0 = m_lo; m0 < m_hi; m0 += mc) {
          const int64_t m1 = std::min(m_hi, m0 + mc);
          for (int64_t row = m0; row < m1; row += kMR)
            gemm_avx2_f64::pack_a(
                a + row * g.a.row_stride + k0 * g.a.col_stride, g.a.row_stride, g.a.col_stride,
                static_cast<int>(std::min<int64_t>(kMR, m1 - row)), kcur, pa + (row - m0) * kcur);
          // Column panels outside, rows inside: one B micro-panel stays in L1 while the M block's
          // A panels stream past it from L2.
          for (int64_t col = n0; col < n1; col += kNR) {
            t.n = static_cast<int>(std::min<int64_t>(kNR, n1 - col));
            for (int64_t row = m0; row < m1; row += kMR) {
              t.m = static_cast<int>(std::min<int64_t>(kMR, m1 - row));
              t.c = c + row * ldc + col;
              gemm_avx2_f64::kernel_f64_avx2(kcur, pa + (row - m0) * kcur, pb + (col - n0) * kcur,
                                             t);
            }
          }
        }
      }
    }
  }
}

}  // namespace mantissa::kernels
