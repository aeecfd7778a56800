#pragma once
// cross_entropy on a GPU (loss_kernels.cu): one block per row of (N, C) logits, arithmetic in
// fp32 (f32/f16/bf16) or double (f64). Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// Per row i (x contiguous (N, C) of `type`, target int64): lse = max + log(sum exp(x - max)),
// loss = lse - x[t] (label smoothing eps: (1-eps)*nll + eps/C * (sum_c (max - x_c) + C*log
// sum)). Rows whose target is ignore_index get loss 0 and lse 0. loss and lse are arrays of
// the arithmetic type (float, or double for f64).
void launch_cross_entropy_forward(const void* x, Scalar type, const int64_t* target, int64_t n,
                                  int64_t c, int64_t ignore_index, double eps, void* loss,
                                  void* lse);
// dx[i, c] = s_i * (exp(x - lse_i) - (1-eps)*[c == t_i] - eps/C); zero rows for ignored
// targets. s_i = scale[i] when per_row, else scale[0] / divisor (divisor > 0) or scale[0].
// scale and lse are of the arithmetic type, x and dx of `type`.
void launch_cross_entropy_backward(const void* x, Scalar type, const int64_t* target, int64_t n,
                                   int64_t c, int64_t ignore_index, double eps, const void* lse,
                                   const void* scale, bool per_row, double divisor, void* dx);

}  // namespace mantissa::cuda::detail
