#pragma once
// max_pool2d / avg_pool2d / adaptive_avg_pool2d on a GPU (pool_kernels.cu): one thread per
// output in the forward, one thread per input element in the backward, which gathers from the
// outputs whose windows cover it (no atomics, deterministic, any stride / padding / dilation).
// Arithmetic in fp32 (f32/f16/bf16) or double (f64). Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

struct PoolShape {
  int64_t planes, h, w, oh, ow;  // planes = N * C; every plane contiguous (h, w) / (oh, ow)
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

// y = the window maxima; arg = each window's winner as an index in its input plane (the first
// maximum in row-major window order, a NaN wins; -1 when the window saw only padding).
void launch_max_pool_forward(const void* x, void* y, int32_t* arg, Scalar type, const PoolShape& s);
// dx[i] = the sum of gy over the outputs whose arg is i.
void launch_max_pool_backward(const void* gy, const int32_t* arg, void* dx, Scalar type,
                              const PoolShape& s);
// Averages: adaptive (PyTorch's floor/ceil windows, kernel/stride/padding ignored) or the
// windows of avg_pool2d with count_include_pad (dilation 1).
void launch_avg_pool_forward(const void* x, void* y, Scalar type, const PoolShape& s,
                             bool count_include_pad, bool adaptive);
void launch_avg_pool_backward(const void* gy, void* dx, Scalar type, const PoolShape& s,
                              bool count_include_pad, bool adaptive);

}  // namespace mantissa::cuda::detail
