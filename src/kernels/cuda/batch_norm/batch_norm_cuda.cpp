// batch_norm's CUDA branch (batch_norm_cuda.h).
#include "kernels/cuda/batch_norm/batch_norm_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "core/inplace.h"
#include "kernels/cuda/batch_norm/batch_norm_kernels.h"
#include "kernels/device_check.h"
#include "mantissa/autograd/grad_mode.h"

namespace mantissa::kernels::gpu {

namespace {

// A [C] tensor as a fresh contiguous float64 copy on `dev` (undefined stays undefined).
Tensor f64_copy(const Tensor& t, const Device& dev) {
  if (!t.defined()) return Tensor();
  return t.detach().to(dev).to(kFloat64).contiguous().clone();
}

double* dptr(const Tensor& t) { return t.defined() ? t.device_data<double>() : nullptr; }

}  // namespace

BatchNormForward batch_norm_forward(const Tensor& input, const Tensor& running_mean,
                                    const Tensor& running_var, const Tensor& weight,
                                    const Tensor& bias, bool training, double momentum, double eps,
                                    int64_t n, int64_t c, int64_t s) {
  const Device dev =
      common_device("batch_norm", {&input, &running_mean, &running_var, &weight, &bias});
  cuda::detail::DeviceGuard guard(dev);
  NoGradGuard no_grad;
  const Tensor x = input.detach().to(dev).contiguous();
  const auto type = detail::cuda_scalar_of(x.dtype(), "batch_norm");
  BatchNormForward f;
  f.saved.weight = f64_copy(weight, dev);
  const Tensor b = f64_copy(bias, dev);
  Tensor mean, var, rm, rv;
  if (training) {
    mean = empty({c}, kFloat64, dev);
    var = empty({c}, kFloat64, dev);
    cuda::detail::launch_batch_norm_stats(x.device_ptr(), type, n, c, s, dptr(mean), dptr(var));
    rm = f64_copy(running_mean, dev);
    rv = f64_copy(running_var, dev);
  } else {
    mean = f64_copy(running_mean, dev);
    var = f64_copy(running_var, dev);
  }
  const int64_t m = n * s;
  const double unbias = m > 1 ? static_cast<double>(m) / static_cast<double>(m - 1) : 1.0;
  f.saved.mean = mean;
  f.saved.invstd = empty({c}, kFloat64, dev);
  Tensor scale = empty({c}, kFloat64, dev), shift = empty({c}, kFloat64, dev);
  cuda::detail::launch_batch_norm_finalize(dptr(mean), dptr(var), dptr(f.saved.weight), dptr(b), c,
                                           eps, dptr(f.saved.invstd), dptr(scale), dptr(shift),
                                           dptr(rm), dptr(rv), momentum, unbias);
  f.y = empty(x.shape(), x.dtype(), dev);
  cuda::detail::launch_batch_norm_apply(x.device_ptr(), f.y.device_ptr(), type, n, c, s,
                                        dptr(scale), dptr(shift));
  if (rm.defined()) {
    // copy_ rounds once into the buffers' own dtype (fp32 in BatchNorm2d), as on the CPU.
    mantissa::detail::copy_unchecked(running_mean.detach(), rm);
    mantissa::detail::copy_unchecked(running_var.detach(), rv);
  }
  return f;
}

BatchNormGrads batch_norm_backward(const Tensor& grad, const Tensor& x_in, const BatchNormSaved& sv,
                                   bool training, bool need_x, int64_t n, int64_t c, int64_t s) {
  const Device dev = x_in.device();
  cuda::detail::DeviceGuard guard(dev);
  NoGradGuard no_grad;
  const DType dt = x_in.dtype();
  const Tensor x = x_in.detach().contiguous();
  const Tensor g = grad.detach().to(dev).to(dt).contiguous();
  const auto type = detail::cuda_scalar_of(dt, "batch_norm");
  BatchNormGrads r;
  r.sum_g = empty({c}, kFloat64, dev);
  r.sum_gxhat = empty({c}, kFloat64, dev);
  Tensor a = empty({c}, kFloat64, dev), b = empty({c}, kFloat64, dev),
         c0 = empty({c}, kFloat64, dev);
  cuda::detail::launch_batch_norm_backward_sums(
      g.device_ptr(), x.device_ptr(), type, n, c, s, dptr(sv.mean), dptr(sv.invstd),
      dptr(sv.weight), training, dptr(r.sum_g), dptr(r.sum_gxhat), dptr(a), dptr(b), dptr(c0));
  if (need_x) {
    r.dx = empty(x.shape(), dt, dev);
    cuda::detail::launch_batch_norm_backward_dx(g.device_ptr(), x.device_ptr(), r.dx.device_ptr(),
                                                type, n, c, s, dptr(sv.mean), dptr(a), dptr(b),
                                                dptr(c0));
  }
  return r;
}

}  // namespace mantissa::kernels::gpu

#endif
