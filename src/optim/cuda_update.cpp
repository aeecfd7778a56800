// Optimizer updates of GPU parameters (cuda_update.h): the checks here, the kernels through the
// GPU kernel table (kernels/gpu_kernels.h, kernels/cuda/optim/optim_cuda.h).
#include "optim/cuda_update.h"

#include <vector>

#include "kernels/gpu_kernels.h"

namespace mantissa::optim::detail {
namespace {

bool is_half(const Tensor& t) { return t.dtype() == kFloat16 || t.dtype() == kBFloat16; }

// A state tensor the kernel writes: on the parameter's device, contiguous, its shape.
void check_state(const Tensor& param, const Tensor& s, const char* what, const char* where) {
  MANTISSA_CHECK(s.defined() && s.device() == param.device() && s.is_contiguous() &&
                     s.numel() == param.numel(),
                 where,
                 "optimizer state '{}' of a parameter on {} must be a contiguous tensor of {} "
                 "elements on that device (got {} on {})",
                 what, param.device().str(), param.numel(),
                 s.defined() ? shape_str(s.shape()) : "undefined",
                 s.defined() ? s.device().str() : "-");
}

// The fp32 master copy of a half parameter (checked), or an undefined tensor.
Tensor master_of(const Tensor& param, const ParamState& st, const char* where) {
  const auto it = st.buffers.find("master_param");
  if (it == st.buffers.end() || !is_half(param)) return Tensor();
  check_state(param, it->second, "master_param", where);
  return it->second;
}

// Checks the update's tensors and fills u's pointers and types.
void fill_adam(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& states,
               const ParamState& st, cuda::detail::AdamUpdate& u, const char* where) {
  MANTISSA_CHECK(states.size() == (u.amsgrad ? 3u : 2u), where,
                 "internal error: {} state tensors for a GPU Adam update", states.size());
  const char* names[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  for (size_t k = 0; k < states.size(); ++k) check_state(param, states[k], names[k], where);
  check_state(param, grad, "grad", where);
  const Tensor master = master_of(param, st, where);
  u = kernels::gpu_kernels().adam_update_of(param, grad, states, master, u, where);
}

}  // namespace

void check_cuda_param(const Tensor& param, const Tensor& grad, const HalfPrecisionOptions& h,
                      const char* where) {
  MANTISSA_CHECK(grad.device() == param.device(), where,
                 "the gradient of a parameter on {} is on {}; move both to one device",
                 param.device().str(), grad.device().str());
  MANTISSA_CHECK(!(h.stochastic_rounding && is_half(param)), where,
                 "stochastic_rounding is not implemented for {} parameters on a GPU ({}); use "
                 "master_weights, or keep the parameter on the CPU",
                 param.dtype().name(), param.device().str());
}

void CudaAdamBatch::add(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& states,
                        const ParamState& st, cuda::detail::AdamUpdate u, const char* where) {
  fill_adam(param, grad, states, st, u, where);
  param.storage()->bump_version();  // the parameter is written in place
  updates_.push_back(u);
  devices_.push_back(param.device());
  keep_.push_back(param);
  keep_.push_back(grad);
  keep_.insert(keep_.end(), states.begin(), states.end());
}

void CudaAdamBatch::launch(const char* where) {
  size_t i = 0;
  while (i < updates_.size()) {
    size_t j = i;
    while (j < updates_.size() && devices_[j] == devices_[i]) ++j;
    const bool ok = kernels::gpu_kernels().adam_updates(devices_[i], updates_.data() + i,
                                                        static_cast<int64_t>(j - i));
    if (!ok) {
      updates_.clear(), devices_.clear(), keep_.clear();
      fail(where, "no GPU update for a type pair of these parameters and their state");
    }
    i = j;
  }
  updates_.clear();
  devices_.clear();
  keep_.clear();
}

void cuda_adam_update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& states,
                      const ParamState& st, cuda::detail::AdamUpdate u, const char* where) {
  fill_adam(param, grad, states, st, u, where);
  param.storage()->bump_version();  // the parameter is written in place
  MANTISSA_CHECK(kernels::gpu_kernels().adam_update(param.device(), u), where,
                 "no GPU update for {} parameters with {} state", param.dtype().name(),
                 states[0].dtype().name());
}

void cuda_sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                     const ParamState& st, cuda::detail::SgdUpdate u, const char* where) {
  if (momentum_buffer.defined()) check_state(param, momentum_buffer, "momentum_buffer", where);
  check_state(param, grad, "grad", where);
  const Tensor master = master_of(param, st, where);
  param.storage()->bump_version();
  MANTISSA_CHECK(kernels::gpu_kernels().sgd_update(param, grad, momentum_buffer, master, u, where),
                 where, "no GPU update for {} parameters with {} state", param.dtype().name(),
                 momentum_buffer.defined() ? momentum_buffer.dtype().name() : "no");
}

void cuda_adam8bit_update(const Tensor& param, const Tensor& grad,
                          const cuda::detail::Adam8bitStep& s, const float* code1,
                          const float* code2, const Tensor& q1, const Tensor& q2,
                          const Tensor& absmax1, const Tensor& absmax2) {
  kernels::gpu_kernels().adam8bit_update(param, grad, s, code1, code2, q1, q2, absmax1, absmax2);
  param.storage()->bump_version();  // written in place (autocast's cache compares versions)
}

void cuda_adam32_update(const Tensor& param, const Tensor& grad,
                        const cuda::detail::Adam8bitStep& s, const Tensor& m, const Tensor& v) {
  kernels::gpu_kernels().adam32_update(param, grad, s, m, v);
  param.storage()->bump_version();
}

bool cuda_all_finite(const std::vector<Tensor>& grads) {
  if (grads.empty()) return true;
  return kernels::gpu_kernels().all_finite(grads);
}

}  // namespace mantissa::optim::detail
