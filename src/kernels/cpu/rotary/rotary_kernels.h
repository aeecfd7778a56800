#pragma once
// Rotary embeddings over rows of D elements (rotary_kernels.cpp): one pass each way, with the
// roundings of the composed form x * cos + rotate_half(x) * sin in the element's dtype (each
// product rounded, then the sum), so the fused op gives the composed graph's bits.
#include <cstdint>

#include "mantissa/core/dtype.h"

namespace mantissa::kernels::cpu {

struct RotaryRows {
  int64_t rows = 0;  // rows of D elements; row r sits at position r % positions
  int64_t positions = 0;
  int64_t dim = 0;             // D, even
  const float* cos = nullptr;  // (positions, D), float32
  const float* sin = nullptr;
};

// out[r] = x[r] cos + rotate_half(x[r]) sin, x's row r at x + row_offset[r] elements (the
// row's D elements contiguous), out's rows dense. dtype: float64, float32, bfloat16, float16.
void rotary_forward(const RotaryRows& p, DType dtype, const void* x, const int64_t* row_offset,
                    void* out);

// dx[r] = g[r] cos + rotate_half^T(g[r] sin), rotate_half^T(v) = (v2, -v1) for v = (v1, v2);
// g and dx dense.
void rotary_backward(const RotaryRows& p, DType dtype, const void* g, void* dx);

}  // namespace mantissa::kernels::cpu
