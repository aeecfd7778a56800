#pragma once
// Sums over dims of a GPU tensor (cuda_reduce.cpp), in core because sum_to (core) reduces
// gradients over broadcast dims; the reduction ops in src/kernels/cuda/reduce use the same
// layout. Only code under `#if MANTISSA_HAS_CUDA` calls these.
#include <utility>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::detail {

struct CudaReduceLayout {
  int64_t outer = 1, r = 1, inner = 1;
};

// a's values, contiguous and history-free on its GPU, and the [outer, r, inner] layout that
// reduces the dims flagged in `reduced` (one flag per dim; interleaved kept/reduced dims are
// permuted into a copy with the reduced ones last). The kept dims keep their order, so the
// outer*inner results are laid out like the reduced tensor.
std::pair<Tensor, CudaReduceLayout> cuda_reduce_layout(const Tensor& a,
                                                       const std::vector<bool>& reduced);

// Sum over the flagged dims (mean: divided by the reduced count, in the accumulation type),
// as a new tensor of `out_shape` (numel = the kept extent) on a's GPU: a's dtype for floats,
// int64 for integers and bool.
Tensor cuda_sum(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape,
                bool mean);

}  // namespace mantissa::detail
