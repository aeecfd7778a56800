#include "kernels/cpu/quant/int8_epilogue.h"

#include <immintrin.h>

#include <algorithm>

#include "mantissa/core/convert.h"

// Only AVX2, not FMA: the products and sums round one by one, as the scalar loops' do.
#define MANTISSA_AVX2 __attribute__((target("avx2")))

namespace mantissa::kernels::quant {
namespace {

constexpr float kInv127 = 1.0f / 127.0f;
constexpr float kInv127Squared = 1.0f / 16129.0f;

// Rows in parallel when the output is large enough to pay for the threads.
template <typename F>
void over_rows(int64_t rows, int64_t n, F&& row) {
  const bool parallel = rows * n > (int64_t{1} << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < rows; ++i) row(i);
}

// Columns [j0, n) of one row's outlier products (w's rows have n entries).
void outlier_columns_scalar(const float* xr, const int64_t* cols, int64_t ncols, const float* w,
                            int64_t j0, int64_t n, float* out) {
  for (int64_t j = j0; j < n; ++j) {
    float add = 0.0f;
    for (int64_t c = 0; c < ncols; ++c) add += xr[cols[c]] * w[c * n + j];
    out[j] = add;
  }
}

void outlier_row_scalar(const float* xr, const int64_t* cols, int64_t ncols, const float* w,
                        int64_t n, float* out) {
  outlier_columns_scalar(xr, cols, ncols, w, 0, n, out);
}

MANTISSA_AVX2 void outlier_row_avx2(const float* xr, const int64_t* cols, int64_t ncols,
                                    const float* w, int64_t n, float* out) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 add = _mm256_setzero_ps();
    for (int64_t c = 0; c < ncols; ++c)
      add = _mm256_add_ps(
          add, _mm256_mul_ps(_mm256_set1_ps(xr[cols[c]]), _mm256_loadu_ps(w + c * n + j)));
    _mm256_storeu_ps(out + j, add);
  }
  outlier_columns_scalar(xr, cols, ncols, w, j, n, out);
}

void epilogue_row_scalar(const int32_t* acc, float sa, const float* sb, const float* add,
                         const float* bias, int64_t n, float* y) {
  for (int64_t j = 0; j < n; ++j) {
    float v = static_cast<float>(acc[j]) * (sa * sb[j]) * kInv127Squared;
    if (add) v += add[j];
    if (bias) v += bias[j];
    y[j] = v;
  }
}

MANTISSA_AVX2 void epilogue_row_avx2(const int32_t* acc, float sa, const float* sb,
                                     const float* add, const float* bias, int64_t n, float* y) {
  const __m256 vsa = _mm256_set1_ps(sa), k = _mm256_set1_ps(kInv127Squared);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 a =
        _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)));
    __m256 v = _mm256_mul_ps(_mm256_mul_ps(a, _mm256_mul_ps(vsa, _mm256_loadu_ps(sb + j))), k);
    if (add) v = _mm256_add_ps(v, _mm256_loadu_ps(add + j));
    if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + j));
    _mm256_storeu_ps(y + j, v);
  }
  epilogue_row_scalar(acc + j, sa, sb + j, add ? add + j : nullptr, bias ? bias + j : nullptr,
                      n - j, y + j);
}

void dequantize_row_scalar(const int8_t* c, float s, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(c[j]) * s * kInv127;
}

MANTISSA_AVX2 void dequantize_row_avx2(const int8_t* c, float s, int64_t n, float* out) {
  const __m256 vs = _mm256_set1_ps(s), k = _mm256_set1_ps(kInv127);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + j))));
    _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_mul_ps(v, vs), k));
  }
  dequantize_row_scalar(c + j, s, n - j, out + j);
}

// out (rows x cols, bf16 or f16) filled row by row in chunks that stay in L1: fill(i, j0, n, buf)
// writes the fp32 values of row i's columns [j0, j0 + n) into buf, which are then rounded into
// out.
template <typename Fill>
void narrow_rows(int64_t rows, int64_t cols, DType half, uint16_t* out, Fill fill) {
  const auto narrow = half == kBFloat16 ? convert_f32_to_bf16 : convert_f32_to_f16;
  over_rows(rows, cols, [&](int64_t i) {
    constexpr int64_t kChunk = 1024;
    float buf[kChunk];
    for (int64_t j0 = 0; j0 < cols; j0 += kChunk) {
      const int64_t n = std::min(kChunk, cols - j0);
      fill(i, j0, n, buf);
      narrow(buf, out + i * cols + j0, n);
    }
  });
}

}  // namespace

void int8_dequantize_rows(const int8_t* codes, const float* absmax, int64_t rows, int64_t cols,
                          float* out, SimdLevel level) {
  const auto row_fn = level >= SimdLevel::kAvx2 && simd_level() >= SimdLevel::kAvx2
                          ? dequantize_row_avx2
                          : dequantize_row_scalar;
  over_rows(rows, cols,
            [&](int64_t i) { row_fn(codes + i * cols, absmax[i], cols, out + i * cols); });
}

void int8_dequantize_rows_to_half(const int8_t* codes, const float* absmax, int64_t rows,
                                  int64_t cols, DType half, uint16_t* out, SimdLevel level) {
  const auto row_fn = level >= SimdLevel::kAvx2 && simd_level() >= SimdLevel::kAvx2
                          ? dequantize_row_avx2
                          : dequantize_row_scalar;
  narrow_rows(rows, cols, half, out, [&](int64_t i, int64_t j0, int64_t n, float* buf) {
    row_fn(codes + i * cols + j0, absmax[i], n, buf);
  });
}

void int8_outlier_products(const float* x, int64_t ld_x, const int64_t* cols, int64_t ncols,
                           const float* w, int64_t rows, int64_t n, float* add, SimdLevel level) {
  const auto row_fn = level >= SimdLevel::kAvx2 && simd_level() >= SimdLevel::kAvx2
                          ? outlier_row_avx2
                          : outlier_row_scalar;
  over_rows(rows, n, [&](int64_t i) { row_fn(x + i * ld_x, cols, ncols, w, n, add + i * n); });
}

void int8_dequant_epilogue(const int32_t* acc, const float* sa, const float* sb, const float* add,
                           const float* bias, int64_t rows, int64_t n, float* y, SimdLevel level) {
  const auto row_fn = level >= SimdLevel::kAvx2 && simd_level() >= SimdLevel::kAvx2
                          ? epilogue_row_avx2
                          : epilogue_row_scalar;
  over_rows(rows, n, [&](int64_t i) {
    row_fn(acc + i * n, sa[i], sb, add ? add + i * n : nullptr, bias, n, y + i * n);
  });
}

void int8_dequant_epilogue_to_half(const int32_t* acc, const float* sa, const float* sb,
                                   const float* add, const float* bias, int64_t rows, int64_t n,
                                   DType half, uint16_t* y, SimdLevel level) {
  const auto row_fn = level >= SimdLevel::kAvx2 && simd_level() >= SimdLevel::kAvx2
                          ? epilogue_row_avx2
                          : epilogue_row_scalar;
  narrow_rows(rows, n, half, y, [&](int64_t i, int64_t j0, int64_t len, float* buf) {
    const int64_t at = i * n + j0;
    row_fn(acc + at, sa[i], sb + j0, add ? add + at : nullptr, bias ? bias + j0 : nullptr, len,
           buf);
  });
}

}  // namespace mantissa::kernels::quant
