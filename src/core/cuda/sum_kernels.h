#pragma once
// Sums on a GPU (sum_kernels.cu) over the middle extent of a contiguous [outer, r, inner]
// array: what sum_to (a gradient summed over broadcast dims) needs in core, and what the sum
// and mean ops and the bias gradient's row sum (src/kernels/cuda/reduce) share. Plain
// declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// out[o * inner + k] = sum_i src[(o * r + i) * inner + k], accumulated in fp32 (f32/f16/bf16),
// double (f64) or int64 (integers, bool), divided by `divisor` when it is > 0, rounded once to
// out_type (the input's type for floats, i64 for integers). Deterministic (no atomics): inner
// == 1 is one block per row with a shared-memory tree, otherwise 32 columns x 8 row lanes per
// block.
void launch_sum(const void* src, Scalar type, void* out, Scalar out_type, int64_t outer, int64_t r,
                int64_t inner, double divisor);

// out[i] = x[i] + y[i] over contiguous arrays of one floating type (fp32 arithmetic for
// f16/bf16, one rounding): autograd's gradient accumulation, which sits in core.
void launch_add(const void* x, const void* y, void* out, Scalar type, int64_t n);

}  // namespace mantissa::cuda::detail
