#pragma once
// conv2d's CUDA branch (conv_cuda.cpp): the forward and both gradient products on cuDNN's
// convolutions (opened at run time, cudnn_api.h), groups included. The op (ops/conv.cpp) adds
// the bias and sums its gradient. The op reaches the kernels::gpu functions through the GPU
// kernel table (kernels/gpu_kernels.h); the kernels::cuda ones are declared in every build.
#include <array>
#include <cstdint>

#include "kernels/cpu/onednn/onednn_conv.h"
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// Each takes GPU tensors of one floating dtype (float64, float32, float16, bfloat16) on one
// device, in the layouts of conv2d (x [N, C, H, W], w [OC, C / groups, KH, KW], gy [N, OC, OH,
// OW]), any strides (copied to contiguous where they are not), and returns a new contiguous
// tensor of that dtype: fp32 accumulation (fp64 for float64), rounded once. allow_tf32: float32
// on TF32 tensor cores (float32_matmul_precision "high"/"medium"); false restricts cuDNN to
// full-fp32 FMA kernels. Throws mantissa::Error naming the op, the shapes and cuDNN's message
// when cuDNN fails.
Tensor conv2d_forward(const kernels::ConvGeometry& g, const Tensor& x, const Tensor& w,
                      bool allow_tf32);
Tensor conv2d_backward_data(const kernels::ConvGeometry& g, const Tensor& gy, const Tensor& w,
                            bool allow_tf32);
Tensor conv2d_backward_weight(const kernels::ConvGeometry& g, const Tensor& x, const Tensor& gy,
                              bool allow_tf32);

}  // namespace mantissa::kernels::gpu

namespace mantissa::kernels::cuda {

// For tests, without a GPU: opens cuDNN and returns how many of conv2d's entry points were found
// (0 without the CUDA backend; throws when the library is missing).
int cudnn_entry_points_found();
// For tests, without a GPU: the [N, OC, OH, OW] cuDNN computes from the descriptors conv2d would
// build for g (groups included), which must be conv2d's own output shape. Throws without the
// CUDA backend.
std::array<int64_t, 4> cudnn_output_dims(const kernels::ConvGeometry& g, DType dt);

}  // namespace mantissa::kernels::cuda
