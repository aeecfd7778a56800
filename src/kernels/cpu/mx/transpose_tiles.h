#pragma once
// A rows x cols row-major matrix of 2- or 4-byte elements written transposed (cols x rows) in
// 32 x 32 tiles, so both sides are read and written a cache line at a time: the column-wise
// copies of the MX recipes (fp8/mx_linear.cpp) quantize the transposed tensor.
#include <algorithm>
#include <cstdint>

namespace mantissa::kernels::mx {

template <typename T>
void transpose_tiles(const T* src, int64_t rows, int64_t cols, T* dst) {
  constexpr int64_t kTile = 32;
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
    const int64_t cn = std::min(kTile, cols - c0);
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t rn = std::min(kTile, rows - r0);
      for (int64_t c = 0; c < cn; ++c)
        for (int64_t r = 0; r < rn; ++r)
          dst[(c0 + c) * rows + r0 + r] = src[(r0 + r) * cols + c0 + c];
    }
  }
}

}  // namespace mantissa::kernels::mx
