#pragma once
// Sums over dims of a GPU tensor (cuda_reduce.cpp), in core because sum_to (core) reduces
// gradients over broadcast dims; the reduction ops in src/kernels/cuda/reduce use the same
// layout (core/reduce_layout.h). Only code under `#if MANTISSA_HAS_CUDA` calls these.
#include <utility>
#include <vector>

#include "core/reduce_layout.h"
#include "mantissa/core/tensor.h"

namespace mantissa::detail {

// Sum over the flagged dims (mean: divided by the reduced count, in the accumulation type),
// as a new tensor of `out_shape` (numel = the kept extent) on a's GPU: a's dtype for floats,
// int64 for integers and bool.
Tensor cuda_sum(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape,
                bool mean);

}  // namespace mantissa::detail
