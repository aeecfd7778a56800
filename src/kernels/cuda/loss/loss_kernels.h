#pragma once
// cross_entropy on a GPU (loss_kernels.cu): one block per row of (N, C) logits, arithmetic in
// fp32 (f32/f16/bf16) or double (f64). Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// Per row i (x contiguous (N, C) of `type`, target int64): lse = max + log(sum exp(x - max)),
// loss = lse - x[t] (label smoothing eps: (1-eps)*nll + eps/C * (sum_c (max - x_c) + C*log
// sum)). Rows whose target is ignore_index get loss 0 and lse 0, rows whose target is out of
// range NaN. loss and lse are arrays of
// the arithmetic type (float, or double for f64).
void launch_cross_entropy_forward(const void* x, Scalar type, const int64_t* target, int64_t n,
                                  int64_t c, int64_t ignore_index, double eps, void* loss,
                                  void* lse);
// dx[i, c] = s_i * (exp(x - lse_i) - (1-eps)*[c == t_i] - eps/C); zero rows for ignored
// targets, NaN rows for targets out of range. s_i = scale[i] when per_row, else scale[0] /
// divisor (divisor > 0), scale[0] / divisor_dev[0] (divisor_dev: a count on the GPU, nullable)
// or scale[0]. scale, lse and divisor_dev are of the arithmetic type, x and dx of `type`.
void launch_cross_entropy_backward(const void* x, Scalar type, const int64_t* target, int64_t n,
                                   int64_t c, int64_t ignore_index, double eps, const void* lse,
                                   const void* scale, bool per_row, double divisor,
                                   const void* divisor_dev, void* dx);
// The mean's divisor counted on the GPU (for targets the host has not read): count_out[0] =
// the number of the n targets that are not ignore_index, then value[0] /= count_out[0], both of
// acc_type (f32 or f64), as the host's division by its count.
void launch_divide_by_target_count(void* value, Scalar acc_type, const int64_t* target, int64_t n,
                                   int64_t ignore_index, void* count_out);

}  // namespace mantissa::cuda::detail
