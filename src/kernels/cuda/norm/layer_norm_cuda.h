#pragma once
// layer_norm's CUDA branch (layer_norm_cuda.cpp), reached through the GPU kernel table
// (kernels/gpu_kernels.h); the op allocates the outputs on the input's device.
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// x (rows, n) contiguous; w, b contiguous (n) or undefined; y, mean, rstd preallocated.
void layer_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t n,
                        double eps);
// g, x contiguous in one dtype; dx, dw, db preallocated or undefined (not wanted).
void layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db,
                         int64_t rows, int64_t n);

}  // namespace mantissa::kernels::gpu
