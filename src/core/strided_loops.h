#pragma once
// Strided N-d iteration shared by copies and elementwise kernels. The innermost dimension is
// handed to the body as one run, so bodies can vectorise it; rows are split across OpenMP
// threads with a fixed static partition (results never depend on timing).
#include <array>
#include <cstdint>

#include "core/dtype_dispatch.h"
#include "mantissa/core/shape.h"

namespace mantissa::kernels {

// Strides of `t` when broadcast to `shape` (0 on broadcast dimensions).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// body(const std::array<int64_t, K>& offsets, int64_t inner_count) is called once per
// innermost row; the operands' inner strides are strides[k][ndim-1] (0-dim: one element).
template <size_t K, typename F>
void for_each_row(const Shape& shape, const std::array<const Shape*, K>& strides, F&& body) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  const int64_t n = numel_of(shape);
  if (n == 0) return;
  if (ndim == 0) {
    body(std::array<int64_t, K>{}, int64_t{1});
    return;
  }
  const int64_t inner = shape.back();
  const int64_t rows = n / inner;
#pragma omp parallel for schedule(static) if (n > kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    std::array<int64_t, K> off{};
    int64_t rem = r;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      const int64_t idx = rem % shape[d];
      rem /= shape[d];
      for (size_t k = 0; k < K; ++k) off[k] += idx * (*strides[k])[d];
    }
    body(off, inner);
  }
}

// Copies elements of src (viewed with src_strides over `shape`) into dst with dst_strides;
// same dtype, moved as raw itemsize-byte words.
void strided_copy(const void* src, const Shape& src_strides, void* dst, const Shape& dst_strides,
                  const Shape& shape, size_t itemsize);

}  // namespace mantissa::kernels
