// Portable level of the tile products and the run-time choice of level (see tile_gemm.h).
#include "kernels/cpu/gemm/tile_gemm.h"

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels {
namespace {

template <typename A>
void tile_gemm_portable(int64_t m, int64_t n, int64_t k, const A* a, int64_t a_rs, int64_t a_cs,
                        const A* b, int64_t ldb, A* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    A* cr = c + i * ldc;
    if (!accumulate)
      for (int64_t j = 0; j < n; ++j) cr[j] = A(0);
    for (int64_t p = 0; p < k; ++p) {
      const A av = a[i * a_rs + p * a_cs];
      const A* br = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) cr[j] += av * br[j];
    }
  }
}

}  // namespace

void tile_gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
               const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  static const SimdLevel level = simd_level();
  if (level >= SimdLevel::kAvx512) {
    tile_gemm_f32_avx512(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  } else if (level >= SimdLevel::kAvx2) {
    tile_gemm_f32_avx2(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  } else {
    tile_gemm_portable(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
  }
}

void tile_gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t a_rs, int64_t a_cs,
               const double* b, int64_t ldb, double* c, int64_t ldc, bool accumulate) {
  tile_gemm_portable(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

}  // namespace mantissa::kernels
