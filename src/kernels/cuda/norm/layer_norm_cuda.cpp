// layer_norm's CUDA branch (layer_norm_cuda.h).
#include "kernels/cuda/norm/layer_norm_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/norm/layer_norm_kernels.h"
#include "kernels/device_check.h"

namespace mantissa::kernels::gpu {

namespace {
void* ptr(const Tensor& t) { return t.defined() ? t.device_ptr() : nullptr; }
}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t n,
                        double eps) {
  const Device dev = common_device("layer_norm", {&x, &w, &b, &y});
  cuda::detail::DeviceGuard guard(dev);
  cuda::detail::launch_layer_norm_forward(ptr(x), ptr(w), ptr(b), ptr(y), ptr(mean), ptr(rstd),
                                          detail::cuda_scalar_of(x.dtype(), "layer_norm"), rows, n,
                                          eps);
}

void layer_norm_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dw, const Tensor& db,
                         int64_t rows, int64_t n) {
  const Device dev = common_device("layer_norm", {&g, &x, &w, &mean});
  cuda::detail::DeviceGuard guard(dev);
  cuda::detail::launch_layer_norm_backward(
      ptr(g), ptr(x), ptr(w), ptr(mean), ptr(rstd), ptr(dx), ptr(dw), ptr(db),
      detail::cuda_scalar_of(x.dtype(), "layer_norm"), rows, n);
}

}  // namespace mantissa::kernels::gpu

#endif
