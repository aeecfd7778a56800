// The float32 product for few input rows (dense_gemv.h): the threads' split of W's rows, the
// bias, and the scalar level the SIMD levels reproduce bit for bit.
#include "kernels/cpu/gemm/dense_gemv.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/cpu/common/sixteen_lane_sum.h"

namespace mantissa::kernels {
namespace {

// Rows of W per task.
constexpr int64_t kTileRows = 64;
// Below this many multiply-adds the product runs on one thread.
constexpr int64_t kSerialBelow = int64_t{1} << 16;

}  // namespace

void dense_gemv_rows_scalar(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n0,
                            int64_t n1, float* sums) {
  for (int64_t j = n0; j < n1; ++j) {
    std::array<float, 16> lanes{};
    const float* row = w + j * ldw;
    for (int64_t p = 0; p < k; ++p) lanes[p % 16] = std::fma(x[p], row[p], lanes[p % 16]);
    sums[j - n0] = sixteen_lane_sum(lanes.data());
  }
}

namespace {

using RowsFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*);

RowsFn rows_at(SimdLevel level) {
  const SimdLevel cpu = simd_level();
  return level >= SimdLevel::kAvx512 && cpu >= SimdLevel::kAvx512 ? dense_gemv_rows_avx512
         : level >= SimdLevel::kAvx2 && cpu >= SimdLevel::kAvx2   ? dense_gemv_rows_avx2
                                                                  : dense_gemv_rows_scalar;
}

}  // namespace

void dense_gemv_rows(const float* w, int64_t ldw, int64_t k, const float* x, int64_t n0, int64_t n1,
                     float* sums, SimdLevel level) {
  rows_at(level)(w, ldw, k, x, n0, n1, sums);
}

void dense_gemv_f32(const float* w, int64_t ldw, int64_t n, int64_t k, const float* x, int64_t ldx,
                    int64_t m, const float* bias, float* y, int64_t ldy, SimdLevel level) {
  const RowsFn rows = rows_at(level);
  const int64_t tiles = (n + kTileRows - 1) / kTileRows;
  const bool parallel = m * n * k >= kSerialBelow && tiles > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t n0 = t * kTileRows, n1 = std::min(n, n0 + kTileRows);
    for (int64_t i = 0; i < m; ++i) {
      float* out = y + i * ldy;
      rows(w, ldw, k, x + i * ldx, n0, n1, out + n0);
      if (bias != nullptr)
        for (int64_t j = n0; j < n1; ++j) out[j] += bias[j];
    }
  }
}

}  // namespace mantissa::kernels
