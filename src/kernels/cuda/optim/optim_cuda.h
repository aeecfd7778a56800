#pragma once
// The optimizers' and gradient clipping's CUDA branch (optim_cuda.cpp): the Tensor-level side of
// optim_kernels.h and adam8bit_kernels.h, reached through the GPU kernel table
// (kernels/gpu_kernels.h). The callers (src/optim/cuda_update.cpp, src/nn/clip_grad.cpp) have
// checked every tensor's device, layout and size first.
#include <vector>

#include "kernels/cuda/optim/adam8bit_kernels.h"
#include "kernels/cuda/optim/optim_kernels.h"
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

// u with the addresses and element types of param, grad, states (exp_avg, exp_avg_sq, and
// max_exp_avg_sq with amsgrad) and master (float32; undefined: none) filled in; launches nothing.
cuda::detail::AdamUpdate adam_update_of(const Tensor& param, const Tensor& grad,
                                        const std::vector<Tensor>& states, const Tensor& master,
                                        mantissa::cuda::detail::AdamUpdate u, const char* where);
// launch_adam_update / launch_adam_updates on `device`: false for a type pair without a kernel.
bool adam_update(const Device& device, const mantissa::cuda::detail::AdamUpdate& u);
bool adam_updates(const Device& device, const mantissa::cuda::detail::AdamUpdate* us,
                  int64_t count);
// One SGD step of param, u's scalars given (momentum_buffer and master undefined when absent):
// false for a type pair without a kernel.
bool sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                const Tensor& master, mantissa::cuda::detail::SgdUpdate u, const char* where);
// 8-bit Adam's step of a float32 parameter with 8-bit state (the maps code1, code2: 256 floats
// each on the host, uploaded to each GPU once) or with float32 moments m, v.
void adam8bit_update(const Tensor& param, const Tensor& grad,
                     const mantissa::cuda::detail::Adam8bitStep& s, const float* code1,
                     const float* code2, const Tensor& q1, const Tensor& q2, const Tensor& absmax1,
                     const Tensor& absmax2);
void adam32_update(const Tensor& param, const Tensor& grad,
                   const mantissa::cuda::detail::Adam8bitStep& s, const Tensor& m, const Tensor& v);
// Whether every value of these float32 gradients (on one GPU) is finite: the largest |g| taken
// on the GPU (NaN wins), read once.
bool all_finite(const std::vector<Tensor>& grads);
// clip_grad_norm_'s total norm of gradients on one GPU: per-gradient partials accumulated on the
// device, both stages finished there (float32 unless result_f64), one read of the result.
double grad_total_norm(const std::vector<Tensor>& grads, mantissa::cuda::detail::NormKind kind,
                       bool result_f64, const char* where);
// t *= coef in place, t any layout (fp16/bf16 rounded once).
void scale_inplace(const Tensor& t, double coef, const char* where);

}  // namespace mantissa::kernels::gpu
