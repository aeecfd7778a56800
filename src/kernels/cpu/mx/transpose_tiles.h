#pragma once
// A block of a row-major matrix of 2- or 4-byte elements written transposed into a small
// buffer, from which the column-wise casts (kernels/cpu/mx/mx_cast.h, kernels/cpu/fp8/fp8_block.h)
// quantize x^T without a transposed copy of the whole tensor.
#include <algorithm>
#include <cstdint>

namespace mantissa::kernels::mx {

// dst[c * ld_dst + r] = src[r * ld_src + c] for r < rows, c < cols.
template <typename T>
void transpose_block(const T* src, int64_t ld_src, int64_t rows, int64_t cols, T* dst,
                     int64_t ld_dst) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t rn = std::min(kTile, rows - r0);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = r0; r < r0 + rn; ++r) dst[c * ld_dst + r] = src[r * ld_src + c];
  }
}

// transpose_block of a float32 (4-byte) or 16-bit element buffer.
inline void transpose_block_bytes(const void* src, int64_t item, int64_t ld_src, int64_t rows,
                                  int64_t cols, void* dst, int64_t ld_dst) {
  if (item == 4)
    transpose_block(static_cast<const uint32_t*>(src), ld_src, rows, cols,
                    static_cast<uint32_t*>(dst), ld_dst);
  else
    transpose_block(static_cast<const uint16_t*>(src), ld_src, rows, cols,
                    static_cast<uint16_t*>(dst), ld_dst);
}

}  // namespace mantissa::kernels::mx
