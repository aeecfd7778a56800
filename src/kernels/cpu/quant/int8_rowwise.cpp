// Scalar LLM.int8 kernels and the dispatch (see int8_rowwise.h).
#include "kernels/cpu/quant/int8_rowwise.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/onednn/onednn_matmul.h"
#include "mantissa/core/convert.h"

namespace mantissa::kernels::quant {

namespace {

// Round half to even for |x| <= 2^22 (here |x| <= 127): adding and subtracting 1.5 * 2^23 leaves
// the integer nearest x, ties to even, as std::nearbyint in the default mode does -- without a
// libm call per element.
inline float round_half_even(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return std::fabs(x) <= 4194304.0f ? (x + kMagic) - kMagic : std::nearbyint(x);
}

}  // namespace

float int8_quantize_row_scalar(const float* r, int64_t cols, float threshold,
                               const uint8_t* zero_cols, int8_t* o) {
  const bool split = threshold > 0.0f;
  auto outlier = [&](float v) { return split && std::fabs(v) >= threshold; };
  float m = 0.0f;
  bool nan = false;
  for (int64_t j = 0; j < cols; ++j) {
    if (outlier(r[j])) continue;  // (NaN is not an outlier)
    nan |= std::isnan(r[j]);
    m = std::max(m, std::fabs(r[j]));
  }
  if (nan) m = std::numeric_limits<float>::quiet_NaN();
  const float scale = int8_row_scale(m);
  const bool no_codes = m == 0.0f || !std::isfinite(m);
  for (int64_t j = 0; j < cols; ++j) {
    if (no_codes || outlier(r[j]) || (zero_cols && zero_cols[j])) {
      o[j] = 0;
      continue;
    }
    o[j] = static_cast<int8_t>(round_half_even(r[j] * scale));
  }
  return m;
}

namespace {

// f[j] = 1 where |row[j]| >= threshold (NaN is not an outlier: the comparison is false).
void flag_outliers_scalar(const float* row, int64_t cols, float threshold, uint8_t* f) {
  for (int64_t j = 0; j < cols; ++j)
    if (std::fabs(row[j]) >= threshold) f[j] = 1;
}

// Eight values a compare; outliers are rare, so a vector with none costs a compare and a test.
__attribute__((target("avx2"))) void flag_outliers_avx2(const float* row, int64_t cols,
                                                        float threshold, uint8_t* f) {
  const __m256 thr = _mm256_set1_ps(threshold);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(row + j), abs_mask);
    unsigned m = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, thr, _CMP_GE_OQ)));
    for (; m != 0; m &= m - 1) f[j + __builtin_ctz(m)] = 1;
  }
  flag_outliers_scalar(row + j, cols - j, threshold, f + j);
}

}  // namespace

namespace {

// Row i of a float32 matrix, read in place.
struct Float32Rows {
  const float* a;
  int64_t cols;
  const float* row(int64_t i) const { return a + i * cols; }
};

// Row i of a bfloat16/float16 matrix, widened exactly into the calling thread's buffer (valid
// until its next row): the rows are quantized without a float32 copy of the whole matrix.
struct HalfRows {
  const uint16_t* a;
  int64_t cols;
  DType half;
  const float* row(int64_t i) const {
    thread_local std::vector<float> buf;
    buf.resize(static_cast<size_t>(cols));
    if (half == kBFloat16)
      convert_bf16_to_f32(a + i * cols, buf.data(), cols);
    else
      convert_f16_to_f32(a + i * cols, buf.data(), cols);
    return buf.data();
  }
};

template <typename Rows>
void quantize_rows(const Rows& src, int64_t rows, int64_t cols, float threshold, int8_t* out,
                   float* row_absmax, std::vector<int64_t>* outlier_cols, SimdLevel level) {
  std::vector<uint8_t> is_outlier_col(static_cast<size_t>(cols), 0);
  const bool split = threshold > 0.0f;
  const bool parallel = rows > 1 && rows * cols > (int64_t{1} << 15);
  const int threads = parallel ? omp_get_max_threads() : 1;
  // Each thread flags columns in its own array; the arrays are OR-ed together before any row is
  // quantized. One parallel region for both passes (on a busy machine each region's fork and
  // join can wait a time slice for a descheduled thread).
  std::vector<uint8_t> flags(split ? static_cast<size_t>(threads) * static_cast<size_t>(cols) : 0);
  const auto flag_fn = level >= SimdLevel::kAvx2 && simd_level() >= SimdLevel::kAvx2
                           ? flag_outliers_avx2
                           : flag_outliers_scalar;
  // With one row, its outlier columns are only its outliers (bitsandbytes' rule).
  const uint8_t* zero_cols = rows > 1 && split ? is_outlier_col.data() : nullptr;
  const SimdLevel at = std::min(level, simd_level());
  const auto row_fn = at >= SimdLevel::kAvx512 ? int8_quantize_row_avx512
                      : at >= SimdLevel::kAvx2 ? int8_quantize_row_avx2
                                               : int8_quantize_row_scalar;
#pragma omp parallel num_threads(threads) if (parallel)
  {
    if (split) {
      uint8_t* f = flags.data() + static_cast<size_t>(omp_get_thread_num()) * cols;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < rows; ++i) flag_fn(src.row(i), cols, threshold, f);
#pragma omp single
      for (int t = 0; t < omp_get_num_threads(); ++t)
        for (int64_t j = 0; j < cols; ++j) is_outlier_col[j] |= flags[t * cols + j];
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows; ++i)
      row_absmax[i] = row_fn(src.row(i), cols, threshold, zero_cols, out + i * cols);
  }
  if (outlier_cols) {
    outlier_cols->clear();
    for (int64_t j = 0; j < cols; ++j)
      if (is_outlier_col[j]) outlier_cols->push_back(j);
  }
}

}  // namespace

void int8_rowwise_quantize(const float* a, int64_t rows, int64_t cols, float threshold, int8_t* out,
                           float* row_absmax, std::vector<int64_t>* outlier_cols, SimdLevel level) {
  quantize_rows(Float32Rows{a, cols}, rows, cols, threshold, out, row_absmax, outlier_cols, level);
}

void int8_rowwise_quantize_half(const uint16_t* a, DType half, int64_t rows, int64_t cols,
                                float threshold, int8_t* out, float* row_absmax,
                                std::vector<int64_t>* outlier_cols, SimdLevel level) {
  quantize_rows(HalfRows{a, cols, half}, rows, cols, threshold, out, row_absmax, outlier_cols,
                level);
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
  if (level >= SimdLevel::kAvx512 && simd_level() >= SimdLevel::kAvx512 &&
      cpu_features().avx512_vnni && m > 0 && n > 0 && k > 0) {
    // a (m, k) row-major; b (n, k) row-major read as the (k, n) weights.
    onednn_matmul(kInt8, {a, {m, k}, {k, 1}}, {b, {k, n}, {1, k}}, nullptr, kInt32, c, {m, n},
                  kInt32);
  } else if (level >= SimdLevel::kAvx2)
    int8_gemm_nt_avx2(a, b, m, n, k, c);
  else
    int8_gemm_nt_scalar(a, b, m, n, k, c);
}

}  // namespace mantissa::kernels::quant
