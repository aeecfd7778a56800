#pragma once
// softmax / log_softmax on a GPU (softmax_kernels.cu), on contiguous data viewed as
// (outer, n, inner) with the softmax over n. Arithmetic in fp32 (f32/f16/bf16) or double (f64),
// the row's max subtracted first, one rounding per output. Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// log: y = x - (max + log(sum exp(x - max))); else y = exp(x - max) / sum. A fully -inf row
// comes out NaN, as on the CPU.
void launch_softmax_forward(const void* x, void* y, Scalar type, bool log, int64_t outer, int64_t n,
                            int64_t inner);
// From the saved output y and the upstream gradient g (same type, contiguous):
//   softmax: dx = y * (g - sum(g * y));  log_softmax: dx = g - exp(y) * sum(g)
void launch_softmax_backward(const void* y, const void* g, void* dx, Scalar type, bool log,
                             int64_t outer, int64_t n, int64_t inner);

// Attention's scaled (causal) softmax over the last dimension of contiguous (rows, n) scores,
// the rows being (..., L) query rows: y = softmax(scale * x) along each row, where with `causal`
// the entries j > i (i = row % L) are masked: they take no part and come out 0 (no mask tensor).
// Arithmetic in fp32 (f32/f16/bf16) or double (f64), one rounding per output.
void launch_scaled_softmax_forward(const void* x, void* y, Scalar type, int64_t rows, int64_t n,
                                   int64_t L, double scale, bool causal);
// Its backward from the saved output y and the upstream gradient g (same type, contiguous):
// dx = scale * y * (g - sum(g * y)) (0 where masked, since y is).
void launch_scaled_softmax_backward(const void* y, const void* g, void* dx, Scalar type,
                                    int64_t rows, int64_t n, double scale);

}  // namespace mantissa::cuda::detail
