#pragma once
// layer_norm on a GPU (layer_norm_kernels.cu): a contiguous (rows, n) input, one block per row
// for the statistics and the input's gradient, 32 columns x 8 row lanes per block for the
// weight and bias gradients. Arithmetic in fp32 (f32/f16/bf16) or double (f64). Plain
// declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// y = (x - mean) * rstd * w + b (w, b may be null); mean and rstd per row, of the arithmetic
// type. Two passes per row: the mean, then the centred sum of squares.
void launch_layer_norm_forward(const void* x, const void* w, const void* b, void* y, void* mean,
                               void* rstd, Scalar type, int64_t rows, int64_t n, double eps);
// dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)), gh = g * w, xhat = (x - mean) * rstd;
// dw = sum_rows g * xhat, db = sum_rows g. Any of dx, dw, db may be null.
void launch_layer_norm_backward(const void* g, const void* x, const void* w, const void* mean,
                                const void* rstd, void* dx, void* dw, void* db, Scalar type,
                                int64_t rows, int64_t n);

}  // namespace mantissa::cuda::detail
