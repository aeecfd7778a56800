#pragma once
// batch_norm's CUDA branch (batch_norm_cuda.cpp), reached through the GPU kernel table
// (kernels/gpu_kernels.h), which also names the result types below.
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// What the backward needs, as float64 [C] tensors on the GPU (weight undefined: 1).
struct BatchNormSaved {
  Tensor mean, invstd, weight;
};

struct BatchNormForward {
  Tensor y;
  BatchNormSaved saved;
};

// The input viewed as [n, c, s]. Training: batch statistics, and the running statistics (when
// defined) updated in place with momentum and the unbiased variance; eval: the running ones.
BatchNormForward batch_norm_forward(const Tensor& input, const Tensor& running_mean,
                                    const Tensor& running_var, const Tensor& weight,
                                    const Tensor& bias, bool training, double momentum, double eps,
                                    int64_t n, int64_t c, int64_t s);

struct BatchNormGrads {
  Tensor dx;                // undefined unless need_x; the input's dtype
  Tensor sum_g, sum_gxhat;  // float64 [C]: the bias' and the weight's gradients
};

BatchNormGrads batch_norm_backward(const Tensor& grad, const Tensor& x, const BatchNormSaved& sv,
                                   bool training, bool need_x, int64_t n, int64_t c, int64_t s);

}  // namespace mantissa::kernels::gpu
