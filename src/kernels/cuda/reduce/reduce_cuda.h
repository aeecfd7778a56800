#pragma once
// The reduction ops' CUDA branch (reduce_cuda.cpp, sum_rows_cuda.cpp): Tensor in, Tensor out,
// no graph node. Reached through the GPU kernel table (kernels/gpu_kernels.h).
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// sum / mean over the flagged dims, as a new tensor of out_shape (a's float dtype, or int64).
Tensor sum(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape, bool mean);
// The gradient of sum/mean: g (keepdim-shaped) spread over in_shape, divided by count when > 0.
Tensor spread(const Tensor& g_keep, const Shape& in_shape, int64_t count);
// amax over the flagged dims (none of size 0), as a new tensor of out_shape in a's dtype.
Tensor amax(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape);
// The first maximum along dim d: values (may be undefined) and int64 indices, preallocated on
// a's GPU with the reduced shape.
void max_dim(const Tensor& a, int64_t d, const Tensor& values, const Tensor& indices);
// max(dim)'s backward: g (keepdim-shaped) at each index, zeros elsewhere.
Tensor max_dim_backward(const Tensor& g_keep, const Tensor& indices_keep, const Shape& in_shape,
                        int64_t d);
// kernels::sum_rows on a GPU: a (rows, n) tensor summed over its rows into (n).
Tensor sum_rows(const Tensor& g2);

}  // namespace mantissa::kernels::gpu
