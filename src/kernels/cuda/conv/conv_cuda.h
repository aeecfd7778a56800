#pragma once
// conv2d's CUDA branch (conv_cuda.cpp): im2col + the GPU GEMM (ops' matmul_nograd, cuBLASLt),
// the input's gradient by a GEMM and a col2im gather. groups == 1 only. Only code under
// `#if MANTISSA_HAS_CUDA` calls these.
#include <vector>

#include "kernels/cpu/onednn/onednn_conv.h"
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// conv(x, w) + b for the geometry (x, w, b on one GPU; b may be undefined). A new contiguous
// [N, OC, OH, OW] tensor of x's dtype; records nothing.
Tensor conv2d_forward(const kernels::ConvGeometry& g, const Tensor& x, const Tensor& w,
                      const Tensor& b);
// {dx, dw, db}: each only when wanted (else undefined).
std::vector<Tensor> conv2d_backward(const kernels::ConvGeometry& g, const Tensor& grad_out,
                                    const Tensor& x, const Tensor& w, bool need_x, bool need_w,
                                    bool need_b);

}  // namespace mantissa::kernels::gpu
