#pragma once
// Pooling's CUDA branch (pool_cuda.cpp), reached through the GPU kernel table
// (kernels/gpu_kernels.h); inputs are made contiguous here and outputs allocated on their device.
#include "kernels/cuda/pool/pool_kernels.h"
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

struct MaxPoolResult {
  Tensor y, arg;  // arg: int32, each output's winner as an index in its input plane
};

MaxPoolResult max_pool2d_forward(const Tensor& x, const cuda::detail::PoolShape& s);
// grad (any dtype, cast to dtype) -> the input's gradient of `shape`.
Tensor max_pool2d_backward(const Tensor& grad, const Tensor& arg, const Shape& shape, DType dtype,
                           const cuda::detail::PoolShape& s);
Tensor avg_pool2d_forward(const Tensor& x, const cuda::detail::PoolShape& s, bool count_include_pad,
                          bool adaptive);
Tensor avg_pool2d_backward(const Tensor& grad, const Shape& shape, DType dtype,
                           const cuda::detail::PoolShape& s, bool count_include_pad, bool adaptive);

}  // namespace mantissa::kernels::gpu
