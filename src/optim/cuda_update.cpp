// Optimizer updates of GPU parameters (cuda_update.h).
#include "optim/cuda_update.h"

#include <cmath>
#include <map>
#include <mutex>
#include <vector>

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#endif
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/cuda.h"

namespace mantissa::optim::detail {
namespace {

bool is_half(const Tensor& t) { return t.dtype() == kFloat16 || t.dtype() == kBFloat16; }

#if MANTISSA_HAS_CUDA
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

float* master_of(const Tensor& param, const ParamState& st, const char* where) {
  const auto it = st.buffers.find("master_param");
  if (it == st.buffers.end() || !is_half(param)) return nullptr;
  check_state(param, it->second, "master_param", where);
  return it->second.device_data<float>();
}
#endif

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

#if MANTISSA_HAS_CUDA

namespace {
// Checks the update's tensors and fills u's pointers and types.
void fill_adam(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& states,
               const ParamState& st, cuda::detail::AdamUpdate& u, const char* where) {
  MANTISSA_CHECK(states.size() == (u.amsgrad ? 3u : 2u), where,
                 "internal error: {} state tensors for a GPU Adam update", states.size());
  const char* names[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  for (size_t k = 0; k < states.size(); ++k) check_state(param, states[k], names[k], where);
  check_state(param, grad, "grad", where);
  u.param = param.device_ptr();
  u.grad = grad.device_ptr();
  u.exp_avg = states[0].device_ptr();
  u.exp_avg_sq = states[1].device_ptr();
  u.max_exp_avg_sq = u.amsgrad ? states[2].device_ptr() : nullptr;
  u.master = master_of(param, st, where);
  u.param_type = mantissa::detail::cuda_scalar_of(param.dtype(), where);
  u.state_type = mantissa::detail::cuda_scalar_of(states[0].dtype(), where);
  u.n = param.numel();
}
}  // namespace

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
    cuda::detail::DeviceGuard guard(devices_[i]);
    const bool ok =
        cuda::detail::launch_adam_updates(updates_.data() + i, static_cast<int64_t>(j - i));
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
  cuda::detail::DeviceGuard guard(param.device());
  param.storage()->bump_version();  // the parameter is written in place
  MANTISSA_CHECK(cuda::detail::launch_adam_update(u), where,
                 "no GPU update for {} parameters with {} state", param.dtype().name(),
                 states[0].dtype().name());
}

void cuda_sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                     const ParamState& st, cuda::detail::SgdUpdate u, const char* where) {
  if (momentum_buffer.defined()) check_state(param, momentum_buffer, "momentum_buffer", where);
  check_state(param, grad, "grad", where);
  cuda::detail::DeviceGuard guard(param.device());
  param.storage()->bump_version();
  u.param = param.device_ptr();
  u.grad = grad.device_ptr();
  u.momentum_buffer = momentum_buffer.defined() ? momentum_buffer.device_ptr() : nullptr;
  u.master = master_of(param, st, where);
  u.param_type = mantissa::detail::cuda_scalar_of(param.dtype(), where);
  u.state_type = momentum_buffer.defined()
                     ? mantissa::detail::cuda_scalar_of(momentum_buffer.dtype(), where)
                     : u.param_type;
  u.n = param.numel();
  MANTISSA_CHECK(cuda::detail::launch_sgd_update(u), where,
                 "no GPU update for {} parameters with {} state", param.dtype().name(),
                 momentum_buffer.defined() ? momentum_buffer.dtype().name() : "no");
}

namespace {
// 8-bit Adam's maps on each GPU (the signed one, then the unsigned one), uploaded once.
const float* maps_on(const Device& device, const float* code1, const float* code2) {
  static std::mutex mu;
  static std::map<int, Tensor>& uploaded = *new std::map<int, Tensor>;  // outlives statics' users
  std::lock_guard<std::mutex> lock(mu);
  Tensor& t = uploaded[device.index];
  if (!t.defined()) {
    std::vector<double> both(code1, code1 + 256);
    both.insert(both.end(), code2, code2 + 256);
    t = tensor_of(both, {512}, kFloat32).to(device);
  }
  return t.device_data<float>();
}
}  // namespace

void cuda_adam8bit_update(const Tensor& param, const Tensor& grad,
                          const cuda::detail::Adam8bitStep& s, const float* code1,
                          const float* code2, const Tensor& q1, const Tensor& q2,
                          const Tensor& absmax1, const Tensor& absmax2) {
  cuda::detail::DeviceGuard guard(param.device());
  cuda::detail::launch_adam8bit_blocks(
      s, maps_on(param.device(), code1, code2), param.device_data<float>(),
      grad.device_data<float>(), q1.device_data<uint8_t>(), q2.device_data<uint8_t>(),
      absmax1.device_data<float>(), absmax2.device_data<float>(), param.numel());
  param.storage()->bump_version();  // written in place (autocast's cache compares versions)
}

void cuda_adam32_update(const Tensor& param, const Tensor& grad,
                        const cuda::detail::Adam8bitStep& s, const Tensor& m, const Tensor& v) {
  cuda::detail::DeviceGuard guard(param.device());
  cuda::detail::launch_adam32_span(s, param.device_data<float>(), grad.device_data<float>(),
                                   m.device_data<float>(), v.device_data<float>(), param.numel());
  param.storage()->bump_version();
}

bool cuda_all_finite(const std::vector<Tensor>& grads) {
  if (grads.empty()) return true;
  NoGradGuard no_grad;
  const Device dev = grads[0].device();
  cuda::detail::DeviceGuard guard(dev);
  Tensor acc = zeros({}, kFloat64, dev);
  for (const Tensor& g : grads)
    (void)cuda::detail::launch_norm_partial(g.device_ptr(), cuda::detail::Scalar::f32, g.numel(),
                                            cuda::detail::NormKind::kMax,
                                            acc.device_data<double>());
  return std::isfinite(acc.item());
}

#else  // built without the CUDA backend: no parameter can be on a GPU

void cuda_adam_update(const Tensor&, const Tensor&, const std::vector<Tensor>&, const ParamState&,
                      cuda::detail::AdamUpdate, const char* where) {
  fail(where, "{}", cuda::unavailable_reason());
}
void cuda_sgd_update(const Tensor&, const Tensor&, const Tensor&, const ParamState&,
                     cuda::detail::SgdUpdate, const char* where) {
  fail(where, "{}", cuda::unavailable_reason());
}
void CudaAdamBatch::add(const Tensor&, const Tensor&, const std::vector<Tensor>&, const ParamState&,
                        cuda::detail::AdamUpdate, const char* where) {
  fail(where, "{}", cuda::unavailable_reason());
}
void CudaAdamBatch::launch(const char*) {}
void cuda_adam8bit_update(const Tensor&, const Tensor&, const cuda::detail::Adam8bitStep&,
                          const float*, const float*, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&) {
  fail("Adam8bit", "{}", cuda::unavailable_reason());
}
void cuda_adam32_update(const Tensor&, const Tensor&, const cuda::detail::Adam8bitStep&,
                        const Tensor&, const Tensor&) {
  fail("Adam8bit", "{}", cuda::unavailable_reason());
}
bool cuda_all_finite(const std::vector<Tensor>&) { return true; }

#endif

}  // namespace mantissa::optim::detail
