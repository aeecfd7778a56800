#pragma once
// The elementwise ops' CUDA branch (elementwise_cuda.cpp): Tensor in, Tensor out, no graph
// node (the op records its own). Inputs are brought to the op's device (0-dim CPU tensors
// copied there), converted to the computation dtype as the CPU maps do, broadcast together and
// handed to the one elementwise kernel (elementwise_kernels.h). Reached through the GPU kernel
// table (kernels/gpu_kernels.h).
#include <vector>

#include "kernels/cuda/elementwise/elementwise_kernels.h"
#include "kernels/device_check.h"
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

using EwOp = mantissa::cuda::detail::EwOp;

// op over `ins` (1 to 3) broadcast together (or to *out_shape), each input converted to `dt`
// first (kWhere's condition stays kBool); the result is a new contiguous tensor of `out_dt`
// (dt, or kBool for comparisons) on the inputs' GPU.
Tensor map(const char* op, EwOp code, const std::vector<Tensor>& ins, DType dt, DType out_dt,
           double p0 = 0, double p1 = 0, const Shape* out_shape = nullptr);

// The CPU's grad_map on a GPU: f(g, x) in g's dtype over g's shape; f(g, x, y) in g's dtype
// over g's shape, then summed back to `to_shape`.
Tensor grad_map(EwOp code, const Tensor& g, const Tensor& x, double p0 = 0, double p1 = 0);
Tensor grad_map(EwOp code, const Tensor& g, const Tensor& x, const Tensor& y,
                const Shape& to_shape);

}  // namespace mantissa::kernels::gpu
