#pragma once
// conv2d on a GPU (conv_kernels.cu): im2col into a (C*KH*KW, N*OH*OW) column matrix for the
// GEMMs, and col2im as a gather (each input element sums the column entries that read it: no
// atomics, deterministic). groups == 1. Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

struct ConvShape {
  int64_t n, c, h, w;      // input
  int64_t kh, kw, oh, ow;  // kernel and output
  int64_t sh, sw, ph, pw, dh, dw;
};

// cols[(c*KH + ky)*KW + kx][n*OH*OW + oy*OW + ox] = x[n][c][oy*sh - ph + ky*dh][ox*sw - pw + kx*dw]
// (0 outside the input); x contiguous NCHW, cols contiguous, both of `type`.
void launch_im2col(const void* x, void* cols, Scalar type, const ConvShape& s);
// dx[n][c][iy][ix] = the sum of the cols entries im2col would have read from it, accumulated
// in fp32 (double for f64) and rounded once.
void launch_col2im(const void* cols, void* dx, Scalar type, const ConvShape& s);

}  // namespace mantissa::cuda::detail
