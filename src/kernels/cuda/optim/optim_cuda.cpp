// The optimizers' and gradient clipping's CUDA branch (optim_cuda.h).
#include "kernels/cuda/optim/optim_cuda.h"

#if MANTISSA_HAS_CUDA
#include <cmath>
#include <map>
#include <mutex>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "core/inplace.h"
#include "mantissa/autograd/grad_mode.h"

namespace mantissa::kernels::gpu {

using mantissa::detail::cuda_scalar_of;

cuda::detail::AdamUpdate adam_update_of(const Tensor& param, const Tensor& grad,
                                        const std::vector<Tensor>& states, const Tensor& master,
                                        cuda::detail::AdamUpdate u, const char* where) {
  u.param = param.device_ptr();
  u.grad = grad.device_ptr();
  u.exp_avg = states[0].device_ptr();
  u.exp_avg_sq = states[1].device_ptr();
  u.max_exp_avg_sq = u.amsgrad ? states[2].device_ptr() : nullptr;
  u.master = master.defined() ? master.device_data<float>() : nullptr;
  u.param_type = cuda_scalar_of(param.dtype(), where);
  u.state_type = cuda_scalar_of(states[0].dtype(), where);
  u.n = param.numel();
  return u;
}

bool adam_update(const Device& device, const cuda::detail::AdamUpdate& u) {
  cuda::detail::DeviceGuard guard(device);
  return cuda::detail::launch_adam_update(u);
}

bool adam_updates(const Device& device, const cuda::detail::AdamUpdate* us, int64_t count) {
  cuda::detail::DeviceGuard guard(device);
  return cuda::detail::launch_adam_updates(us, count);
}

bool sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                const Tensor& master, cuda::detail::SgdUpdate u, const char* where) {
  cuda::detail::DeviceGuard guard(param.device());
  u.param = param.device_ptr();
  u.grad = grad.device_ptr();
  u.momentum_buffer = momentum_buffer.defined() ? momentum_buffer.device_ptr() : nullptr;
  u.master = master.defined() ? master.device_data<float>() : nullptr;
  u.param_type = cuda_scalar_of(param.dtype(), where);
  u.state_type =
      momentum_buffer.defined() ? cuda_scalar_of(momentum_buffer.dtype(), where) : u.param_type;
  u.n = param.numel();
  return cuda::detail::launch_sgd_update(u);
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

void adam8bit_update(const Tensor& param, const Tensor& grad, const cuda::detail::Adam8bitStep& s,
                     const float* code1, const float* code2, const Tensor& q1, const Tensor& q2,
                     const Tensor& absmax1, const Tensor& absmax2) {
  cuda::detail::DeviceGuard guard(param.device());
  cuda::detail::launch_adam8bit_blocks(
      s, maps_on(param.device(), code1, code2), param.device_data<float>(),
      grad.device_data<float>(), q1.device_data<uint8_t>(), q2.device_data<uint8_t>(),
      absmax1.device_data<float>(), absmax2.device_data<float>(), param.numel());
}

void adam32_update(const Tensor& param, const Tensor& grad, const cuda::detail::Adam8bitStep& s,
                   const Tensor& m, const Tensor& v) {
  cuda::detail::DeviceGuard guard(param.device());
  cuda::detail::launch_adam32_span(s, param.device_data<float>(), grad.device_data<float>(),
                                   m.device_data<float>(), v.device_data<float>(), param.numel());
}

bool all_finite(const std::vector<Tensor>& grads) {
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

double grad_total_norm(const std::vector<Tensor>& grads, cuda::detail::NormKind kind,
                       bool result_f64, const char* where) {
  NoGradGuard no_grad;
  const Device dev = grads[0].device();
  cuda::detail::DeviceGuard guard(dev);
  const int64_t count = static_cast<int64_t>(grads.size());
  Tensor accs = zeros({count}, kFloat64, dev);
  Tensor out = empty({}, kFloat64, dev);
  double* acc = accs.device_data<double>();
  for (int64_t i = 0; i < count; ++i) {
    const Tensor c = grads[i].is_contiguous() ? grads[i] : grads[i].contiguous();
    MANTISSA_CHECK(cuda::detail::launch_norm_partial(
                       c.device_ptr(), cuda_scalar_of(c.dtype(), where), c.numel(), kind, acc + i),
                   where, "no GPU norm for {} gradients", c.dtype().name());
  }
  cuda::detail::launch_norm_finish(acc, count, kind, result_f64, out.device_data<double>());
  return out.item();
}

void scale_inplace(const Tensor& t, double coef, const char* where) {
  NoGradGuard no_grad;
  cuda::detail::DeviceGuard guard(t.device());
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  MANTISSA_CHECK(cuda::detail::launch_scale_inplace(
                     c.device_ptr(), cuda_scalar_of(c.dtype(), where), c.numel(), coef),
                 where, "no GPU kernel for {} gradients", c.dtype().name());
  if (!c.is_same(t)) mantissa::detail::copy_unchecked(Tensor(t), c);
}

}  // namespace mantissa::kernels::gpu

#endif
