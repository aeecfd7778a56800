#pragma once
// softmax / log_softmax's CUDA branch (softmax_cuda.cpp), reached through the GPU kernel table
// (kernels/gpu_kernels.h).
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// x contiguous on a GPU, viewed as (outer, n, inner); a new tensor of x's dtype and shape.
Tensor softmax_forward(const Tensor& x, bool log, int64_t outer, int64_t n, int64_t inner);
// dx from the saved output y and the upstream gradient g, in g's dtype.
Tensor softmax_backward(const Tensor& y, const Tensor& g, bool log, int64_t outer, int64_t n,
                        int64_t inner);

// Attention's scaled (causal) softmax over x's last dimension (x on a GPU, at least 2-D; the
// query index of a row is its index along dimension -2): a new tensor of x's dtype and shape.
Tensor scaled_softmax_forward(const Tensor& x, double scale, bool causal);
// dx = scale * y * (g - sum(g * y)) from the saved output y, in g's dtype.
Tensor scaled_softmax_backward(const Tensor& y, const Tensor& g, double scale);

}  // namespace mantissa::kernels::gpu
