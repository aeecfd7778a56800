#pragma once
// batch_norm on a GPU (batch_norm_kernels.cu): the input viewed as [n, c, s] (contiguous), one
// block per channel for the statistics and the gradient sums (accumulated in double, a fixed
// tree: deterministic), element-wise passes for the output and the input's gradient.
// Per-channel values (mean, variance, weight, bias, running statistics, coefficients) are
// double arrays on the GPU. Plain declarations.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// mean[ch] and the biased var[ch] over the n * s values of each channel (two passes).
void launch_batch_norm_stats(const void* x, Scalar type, int64_t n, int64_t c, int64_t s,
                             double* mean, double* var);
// Per channel: invstd = 1 / sqrt(var + eps), scale = w invstd, shift = b - mean scale (w, b may
// be null: 1 and 0). When rm / rv are given (training with running statistics) they are updated
// in place: rm = (1 - momentum) rm + momentum mean, rv = (1 - momentum) rv + momentum var unbias.
void launch_batch_norm_finalize(const double* mean, const double* var, const double* w,
                                const double* b, int64_t c, double eps, double* invstd,
                                double* scale, double* shift, double* rm, double* rv,
                                double momentum, double unbias);
// y = x scale[ch] + shift[ch].
void launch_batch_norm_apply(const void* x, void* y, Scalar type, int64_t n, int64_t c, int64_t s,
                             const double* scale, const double* shift);
// sum_g[ch] = sum g, sum_gxhat[ch] = sum g (x - mean) invstd, and the input gradient's
// coefficients dx = a g + b (x - mean) + c0 (training: a = w invstd, b = -a invstd sum_gxhat / m,
// c0 = -a sum_g / m; eval: a = w invstd, b = c0 = 0). w may be null (1).
void launch_batch_norm_backward_sums(const void* g, const void* x, Scalar type, int64_t n,
                                     int64_t c, int64_t s, const double* mean, const double* invstd,
                                     const double* w, bool training, double* sum_g,
                                     double* sum_gxhat, double* a, double* b, double* c0);
// dx = a[ch] g + b[ch] (x - mean[ch]) + c0[ch].
void launch_batch_norm_backward_dx(const void* g, const void* x, void* dx, Scalar type, int64_t n,
                                   int64_t c, int64_t s, const double* mean, const double* a,
                                   const double* b, const double* c0);

}  // namespace mantissa::cuda::detail
