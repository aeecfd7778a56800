#pragma once
// The optimizers' update of a parameter that lives on a GPU: one fused kernel per parameter
// (kernels/cuda/optim/optim_kernels.h, reached through the GPU kernel table of
// kernels/gpu_kernels.h), the same formula as the CPU loops. Declared in every build; without
// the CUDA backend the table throws (no tensor can be on a GPU there).
#include <string>
#include <vector>

#include "kernels/cuda/optim/adam8bit_kernels.h"
#include "kernels/cuda/optim/optim_kernels.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::optim::detail {

// Throws, before any parameter is changed, when a GPU parameter cannot be updated there: its
// gradient on another device, or stochastic rounding of a half parameter (not implemented on
// the GPU).
void check_cuda_param(const Tensor& param, const Tensor& grad, const HalfPrecisionOptions& h,
                      const char* where);

// u carries the step's scalars; the tensors' pointers and types are filled in here. states:
// exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad), on the parameter's device.
void cuda_adam_update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& states,
                      const ParamState& st, cuda::detail::AdamUpdate u, const char* where);
// The GPU Adam updates of one step, launched together (a few kernels for all parameters rather
// than one per parameter): add() checks and queues a parameter's update as cuda_adam_update
// would run it, launch() runs the queue (per device, in order) and empties it. The queue holds
// the tensors until then.
class CudaAdamBatch {
 public:
  void add(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& states,
           const ParamState& st, cuda::detail::AdamUpdate u, const char* where);
  void launch(const char* where);

 private:
  std::vector<cuda::detail::AdamUpdate> updates_;
  std::vector<Device> devices_;
  std::vector<Tensor> keep_;  // what the queued pointers point into
};

// momentum_buffer: undefined without momentum.
void cuda_sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                     const ParamState& st, cuda::detail::SgdUpdate u, const char* where);

// 8-bit Adam/AdamW (adam8bit.cpp) on a float32 GPU parameter and gradient: with 8-bit state
// (codes q1, q2 and an absmax per block of 256, the maps code1/code2 on the host: 256 floats
// each, uploaded to each GPU once), or with float32 moments m, v (parameters below
// min_8bit_size). State tensors on the parameter's GPU, written in place.
void cuda_adam8bit_update(const Tensor& param, const Tensor& grad,
                          const cuda::detail::Adam8bitStep& s, const float* code1,
                          const float* code2, const Tensor& q1, const Tensor& q2,
                          const Tensor& absmax1, const Tensor& absmax2);
void cuda_adam32_update(const Tensor& param, const Tensor& grad,
                        const cuda::detail::Adam8bitStep& s, const Tensor& m, const Tensor& v);
// Whether every value of these float32 GPU gradients (all on one GPU) is finite: the largest |g|
// of them all is taken on the GPU (NaN wins) and read once.
bool cuda_all_finite(const std::vector<Tensor>& grads);

}  // namespace mantissa::optim::detail
