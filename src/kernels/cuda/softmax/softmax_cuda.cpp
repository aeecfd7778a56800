// softmax / log_softmax's CUDA branch (softmax_cuda.h).
#include "kernels/cuda/softmax/softmax_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/softmax/softmax_kernels.h"
#include "kernels/device_check.h"

namespace mantissa::kernels::gpu {

Tensor softmax_forward(const Tensor& x, bool log, int64_t outer, int64_t n, int64_t inner) {
  cuda::detail::DeviceGuard guard(x.device());
  const Tensor xc = x.detach().contiguous();
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  cuda::detail::launch_softmax_forward(xc.device_ptr(), y.device_ptr(),
                                       detail::cuda_scalar_of(x.dtype(), "softmax"), log, outer, n,
                                       inner);
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& g, bool log, int64_t outer, int64_t n,
                        int64_t inner) {
  const Device dev = common_device("softmax", {&y, &g});
  cuda::detail::DeviceGuard guard(dev);
  const Tensor gc = g.detach().contiguous();
  const Tensor yc = y.detach().to(g.dtype()).contiguous();
  Tensor dx = empty(gc.shape(), gc.dtype(), dev);
  cuda::detail::launch_softmax_backward(yc.device_ptr(), gc.device_ptr(), dx.device_ptr(),
                                        detail::cuda_scalar_of(g.dtype(), "softmax"), log, outer, n,
                                        inner);
  return dx;
}

Tensor scaled_softmax_forward(const Tensor& x, double scale, bool causal) {
  cuda::detail::DeviceGuard guard(x.device());
  const Tensor xc = x.detach().contiguous();
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  const int64_t n = x.size(x.dim() - 1), L = x.size(x.dim() - 2);
  cuda::detail::launch_scaled_softmax_forward(xc.device_ptr(), y.device_ptr(),
                                              detail::cuda_scalar_of(x.dtype(), "scaled_softmax"),
                                              n == 0 ? 0 : x.numel() / n, n, L, scale, causal);
  return y;
}

Tensor scaled_softmax_backward(const Tensor& y, const Tensor& g, double scale) {
  const Device dev = common_device("scaled_softmax", {&y, &g});
  cuda::detail::DeviceGuard guard(dev);
  const Tensor gc = g.detach().contiguous();
  const Tensor yc = y.detach().to(g.dtype()).contiguous();
  Tensor dx = empty(gc.shape(), gc.dtype(), dev);
  const int64_t n = g.size(g.dim() - 1);
  cuda::detail::launch_scaled_softmax_backward(yc.device_ptr(), gc.device_ptr(), dx.device_ptr(),
                                               detail::cuda_scalar_of(g.dtype(), "scaled_softmax"),
                                               n == 0 ? 0 : g.numel() / n, n, scale);
  return dx;
}

}  // namespace mantissa::kernels::gpu

#endif
