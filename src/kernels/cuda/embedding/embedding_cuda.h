#pragma once
// embedding's CUDA branch (embedding_cuda.cpp), reached through the GPU kernel table
// (kernels/gpu_kernels.h); the op checks the indices' range on the host first.
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

struct EmbeddingForward {
  Tensor out;      // indices.shape + (dim), the weight's dtype
  Tensor indices;  // int64, contiguous, on the weight's GPU (saved for backward)
};
EmbeddingForward embedding_forward(const Tensor& weight, const Tensor& indices);
// The (num, dim) weight gradient: rows of grad added at the indices in fp32 (double for f64)
// with atomics, then rounded to grad's dtype.
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num, int64_t dim);

}  // namespace mantissa::kernels::gpu
