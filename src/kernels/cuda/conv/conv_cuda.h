#pragma once
// conv2d's CUDA branch (conv_cuda.cpp): the column matrix and its gather back to the input. The
// op (ops/conv.cpp) multiplies it with the weight on the GPU GEMM. Only code under
// `#if MANTISSA_HAS_CUDA` calls these.
#include "kernels/cpu/onednn/onednn_conv.h"
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// The (C*KH*KW, N*OH*OW) column matrix of x ([N, C, H, W] on a GPU, made contiguous here):
// cols[(c*KH + ky)*KW + kx][(n*OH + oy)*OW + ox] = x[n][c][oy*sh - ph + ky*dh][ox*sw - pw +
// kx*dw], 0 in the padding. groups == 1.
Tensor conv2d_im2col(const kernels::ConvGeometry& g, const Tensor& x);
// The input's gradient [N, C, H, W] from the columns' gradient (the layout above): each input
// element sums the entries that read it (fp32 accumulation, no atomics).
Tensor conv2d_col2im(const kernels::ConvGeometry& g, const Tensor& cols);

}  // namespace mantissa::kernels::gpu
