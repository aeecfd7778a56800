// Scalar LLM.int8 kernels and the dispatch (see int8_rowwise.h).
#include "kernels/cpu/quant/int8_rowwise.h"

#include <algorithm>
#include <cmath>

namespace mantissa::kernels::quant {

void int8_rowwise_quantize(const float* a, int64_t rows, int64_t cols, float threshold, int8_t* out,
                           float* row_absmax, std::vector<int64_t>* outlier_cols) {
  std::vector<uint8_t> is_outlier_col(static_cast<size_t>(cols), 0);
  const bool split = threshold > 0.0f;
  auto outlier = [&](float v) { return split && std::fabs(v) >= threshold; };
  if (split)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (outlier(a[i * cols + j])) is_outlier_col[j] = 1;
  for (int64_t i = 0; i < rows; ++i) {
    const float* r = a + i * cols;
    float m = 0.0f;
    for (int64_t j = 0; j < cols; ++j)
      if (!outlier(r[j])) m = std::max(m, std::fabs(r[j]));
    row_absmax[i] = m;
    const float scale = 127.0f / m;
    int8_t* o = out + i * cols;
    for (int64_t j = 0; j < cols; ++j) {
      if (m == 0.0f || outlier(r[j]) || (rows > 1 && is_outlier_col[j])) {
        o[j] = 0;
        continue;
      }
      o[j] = static_cast<int8_t>(std::nearbyint(r[j] * scale));  // default mode: half-even
    }
  }
  if (outlier_cols) {
    outlier_cols->clear();
    for (int64_t j = 0; j < cols; ++j)
      if (is_outlier_col[j]) outlier_cols->push_back(j);
  }
}

namespace {
void int8_gemm_nt_scalar(const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k,
                         int32_t* c) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += int32_t{a[i * k + p]} * int32_t{b[j * k + p]};
      c[i * n + j] = s;
    }
}
}  // namespace

void int8_gemm_nt(const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k, int32_t* c,
                  SimdLevel level) {
  if (level >= SimdLevel::kAvx2)
    int8_gemm_nt_avx2(a, b, m, n, k, c);
  else
    int8_gemm_nt_scalar(a, b, m, n, k, c);
}

}  // namespace mantissa::kernels::quant
