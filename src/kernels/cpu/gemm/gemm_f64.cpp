// Dispatch of the float64 GEMM (gemm_f64.h): the AVX2+FMA kernel where the CPU has it, else the
// blocked reference, which writes a contiguous C of its own; strided or accumulating outputs go
// through a scratch copy there (only CPUs without AVX2, and the tests, take that path).
#include "kernels/cpu/gemm/gemm_f64.h"

#include <vector>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {

bool gemm_f64_avx2_path() {
  return simd_level() >= SimdLevel::kAvx2 &&
         !gemm_f64_reference_forced().load(std::memory_order_relaxed);
}

void gemm_f64(const GemmF64Args& g) {
  MANTISSA_CHECK(g.batch >= 1 && g.M >= 1 && g.N >= 1 && g.K >= 1, "gemm_f64",
                 "expected positive sizes, got batch {} M {} N {} K {}", g.batch, g.M, g.N, g.K);
  if (gemm_f64_avx2_path()) {
    gemm_f64_avx2(g);
    return;
  }
  const int64_t M = g.M, N = g.N, ldc = g.ldc > 0 ? g.ldc : N;
  const std::vector<int64_t> zeros(static_cast<size_t>(g.batch), 0);
  const int64_t* a_off = g.a_offsets ? g.a_offsets : zeros.data();
  const int64_t* b_off = g.b_offsets ? g.b_offsets : zeros.data();
  const bool direct = !g.accumulate && ldc == N && g.c_offsets == nullptr;
  if (direct) {
    gemm_f64_batched(g.batch, M, N, g.K, g.a, a_off, g.b, b_off, g.c);
    return;
  }
  std::vector<double> tmp(static_cast<size_t>(g.batch * M * N));
  gemm_f64_batched(g.batch, M, N, g.K, g.a, a_off, g.b, b_off, tmp.data());
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    double* c = g.c + (g.c_offsets ? g.c_offsets[bi] : bi * M * ldc);
    const double* t = tmp.data() + bi * M * N;
    for (int64_t r = 0; r < M; ++r)
      for (int64_t j = 0; j < N; ++j)
        c[r * ldc + j] = (g.accumulate ? c[r * ldc + j] : 0.0) + t[r * N + j];
  }
}

}  // namespace mantissa::kernels
