#pragma once
// Maximum reductions on a GPU (reduce_kernels.cu); sums are core's (core/cuda/sum_kernels.h).
// Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// Over the middle extent of a contiguous [outer, r >= 1, inner] array of `type`: the first
// maximum (a NaN beats every number; the first NaN wins), its index into `indices` (int64,
// may be null) and its value into `values` (of `type`, may be null), both [outer, inner].
void launch_max(const void* src, Scalar type, void* values, int64_t* indices, int64_t outer,
                int64_t r, int64_t inner);

// max(dim)'s backward: gx[(o * r + idx[o, k]) * inner + k] = g[o, k] over a zero-filled
// contiguous gx; elements of elem_bytes (2, 4 or 8).
void launch_scatter_dim(const int64_t* indices, const void* g, void* gx, int elem_bytes,
                        int64_t outer, int64_t r, int64_t inner);

}  // namespace mantissa::cuda::detail
