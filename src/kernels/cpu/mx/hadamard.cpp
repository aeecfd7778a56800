#include "kernels/cpu/mx/hadamard.h"

#include <algorithm>

#include "mantissa/core/bfloat16.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

constexpr const char* kWhere = "random Hadamard transform";
// Columns transformed side by side (one vector register of float32 on AVX-512).
constexpr int64_t kStrip = 16;
// Below this many elements one thread does the whole transform.
constexpr int64_t kParallelFrom = 1 << 16;

// The transform of 16 blocks at once: v[i][k] is element i of block k. Sign, four butterfly
// stages, 1/4; each statement runs over k, which the compiler vectorizes.
void transform16(float (&v)[kRhtSize][kStrip]) {
  for (int64_t i = 0; i < kRhtSize; ++i)
    for (int64_t k = 0; k < kStrip; ++k) v[i][k] *= kRhtSigns[i];
  for (int64_t h = 1; h < kRhtSize; h *= 2) {
    for (int64_t i = 0; i < kRhtSize; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        for (int64_t k = 0; k < kStrip; ++k) {
          const float a = v[j][k], b = v[j + h][k];
          v[j][k] = a + b;
          v[j + h][k] = a - b;
        }
      }
    }
  }
  for (int64_t i = 0; i < kRhtSize; ++i)
    for (int64_t k = 0; k < kStrip; ++k) v[i][k] *= 0.25f;
}

}  // namespace

void rht_blocks(float* x, int64_t n) {
  MANTISSA_CHECK(n >= 0 && n % kRhtSize == 0, kWhere,
                 "{} elements are not whole blocks of {} (pad the rows to a multiple of {})", n,
                 kRhtSize, kRhtSize);
  const int64_t blocks = n / kRhtSize;
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
  for (int64_t b0 = 0; b0 < blocks; b0 += kStrip) {
    const int64_t count = std::min(kStrip, blocks - b0);
    float v[kRhtSize][kStrip] = {};
    for (int64_t k = 0; k < count; ++k)
      for (int64_t i = 0; i < kRhtSize; ++i) v[i][k] = x[(b0 + k) * kRhtSize + i];
    transform16(v);
    for (int64_t k = 0; k < count; ++k)
      for (int64_t i = 0; i < kRhtSize; ++i) x[(b0 + k) * kRhtSize + i] = v[i][k];
  }
}

void rht_transpose(const void* src, DType src_dtype, int64_t rows, int64_t cols, float* out) {
  MANTISSA_CHECK(src_dtype == kFloat32 || src_dtype == kBFloat16, kWhere,
                 "source dtype {} is not float32 or bfloat16", src_dtype.name());
  MANTISSA_CHECK(rows >= 0 && cols >= 0, kWhere, "shape [{}, {}] has a negative size", rows, cols);
  MANTISSA_CHECK(rows * cols == 0 || (src && out), kWhere, "null buffer for a [{}, {}] transform",
                 rows, cols);
  const int64_t padded = rht_padded(rows);
  const int64_t row_blocks = padded / kRhtSize, strips = (cols + kStrip - 1) / kStrip;
  const int64_t items = row_blocks * strips;
  // Work item: 16 rows x 16 columns of src, which become 16 blocks of 16 in 16 rows of out.
#pragma omp parallel for schedule(static) if (items > 1 && rows * cols >= kParallelFrom)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t m0 = (item % row_blocks) * kRhtSize, c0 = (item / row_blocks) * kStrip;
    const int64_t m_count = std::min(kRhtSize, rows - m0), c_count = std::min(kStrip, cols - c0);
    float v[kRhtSize][kStrip] = {};
    for (int64_t i = 0; i < m_count; ++i) {
      const int64_t base = (m0 + i) * cols + c0;
      if (src_dtype == kFloat32) {
        const float* s = static_cast<const float*>(src) + base;
        for (int64_t k = 0; k < c_count; ++k) v[i][k] = s[k];
      } else {
        const uint16_t* s = static_cast<const uint16_t*>(src) + base;
        for (int64_t k = 0; k < c_count; ++k) v[i][k] = bf16_bits_to_float(s[k]);
      }
    }
    transform16(v);
    for (int64_t k = 0; k < c_count; ++k) {
      float* o = out + (c0 + k) * padded + m0;
      for (int64_t i = 0; i < kRhtSize; ++i) o[i] = v[i][k];
    }
  }
}

}  // namespace mantissa::kernels::mx
