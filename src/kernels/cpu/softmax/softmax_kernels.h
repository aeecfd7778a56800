#pragma once
// softmax / log_softmax along one dimension, on contiguous data. The input is viewed as
// (outer, n, inner) with the softmax dimension in the middle; inner == 1 (the last dimension)
// is the fast path where each row is a contiguous run. Arithmetic happens in acc_t (fp32, or
// double for f64) with the max subtracted first, and each output is rounded once to the input
// dtype. Instantiated for double, float, Half and BFloat16.
#include <cstdint>

#include "mantissa/core/shape.h"

namespace mantissa::kernels {

struct SoftmaxLayout {
  int64_t outer = 1, n = 1, inner = 1;
};

// The (outer, n, inner) view of `shape` with the softmax over dimension `dim`.
SoftmaxLayout softmax_layout(const Shape& shape, int64_t dim);

// Forward on a contiguous input. For a fully -inf row, max is -inf and x - max is NaN, so the
// row comes out NaN (PyTorch's answer) rather than a silent uniform distribution.
template <typename T, bool kLog>
void softmax_forward(const T* x, T* y, const SoftmaxLayout& l);

// Backward from the saved output y (contiguous) and upstream gradient g (contiguous):
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
template <typename T, bool kLog>
void softmax_backward(const T* y, const T* g, T* dx, const SoftmaxLayout& l);

}  // namespace mantissa::kernels
