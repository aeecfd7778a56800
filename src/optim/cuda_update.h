#pragma once
// The optimizers' update of a parameter that lives on a GPU: one fused kernel per parameter
// (kernels/cuda/optim/optim_kernels.h), the same formula as the CPU loops. Declared in every
// build; without the CUDA backend the functions throw (no tensor can be on a GPU there).
#include <string>
#include <vector>

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

}  // namespace mantissa::optim::detail
