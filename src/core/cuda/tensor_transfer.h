#pragma once
// Tensor-level copies that involve a GPU (tensor_transfer.cpp): what Tensor::contiguous, to,
// copy_, item and the factories do when a tensor is on a CUDA device.
#include <vector>

#include "mantissa/core/tensor.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/copy_kernels.h"
#endif

namespace mantissa::detail {

// Writes src into dst, broadcasting src to dst's shape and casting to dst's dtype; either or
// both may be on a GPU (other pairs than CPU<->GPU and GPU<->same GPU go through the host).
void copy_with_device(const Tensor& dst, const Tensor& src);
// A contiguous copy of t, in `dtype`, on t's GPU.
Tensor cuda_contiguous_as(const Tensor& t, DType dtype);
// Fills a GPU tensor (any strides) with value.
void cuda_fill(const Tensor& t, double value);
// dst[i] = src[i] cast to dst[i]'s dtype for contiguous tensors of equal shapes on one GPU, all
// sources of one dtype and all destinations of another: the weight casts autocast makes for a
// step, in one launch (amp/cast_cache.cpp).
void cuda_convert_many(const std::vector<Tensor>& src, const std::vector<Tensor>& dst);

#if MANTISSA_HAS_CUDA
// The kernels' element type of a dtype; an Error naming `who` for FP8 and complex dtypes.
cuda::detail::Scalar cuda_scalar_of(DType dt, const char* who);
#endif

}  // namespace mantissa::detail
