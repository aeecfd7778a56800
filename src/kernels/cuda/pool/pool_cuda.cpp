// Pooling's CUDA branch (pool_cuda.h).
#include "kernels/cuda/pool/pool_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"

namespace mantissa::kernels::gpu {

namespace {
Shape out_shape(const Shape& in, const cuda::detail::PoolShape& s) {
  return {in[0], in[1], s.oh, s.ow};
}
}  // namespace

MaxPoolResult max_pool2d_forward(const Tensor& input, const cuda::detail::PoolShape& s) {
  cuda::detail::DeviceGuard guard(input.device());
  const Tensor x = input.detach().contiguous();
  MaxPoolResult r{empty(out_shape(x.shape(), s), x.dtype(), x.device()),
                  empty(out_shape(x.shape(), s), kInt32, x.device())};
  cuda::detail::launch_max_pool_forward(x.device_ptr(), r.y.device_ptr(),
                                        static_cast<int32_t*>(r.arg.device_ptr()),
                                        detail::cuda_scalar_of(x.dtype(), "max_pool2d"), s);
  return r;
}

Tensor max_pool2d_backward(const Tensor& grad, const Tensor& arg, const Shape& shape, DType dtype,
                           const cuda::detail::PoolShape& s) {
  cuda::detail::DeviceGuard guard(arg.device());
  const Tensor g = grad.detach().to(arg.device()).to(dtype).contiguous();
  Tensor gx = empty(shape, dtype, arg.device());
  cuda::detail::launch_max_pool_backward(
      g.device_ptr(), static_cast<const int32_t*>(arg.device_ptr()), gx.device_ptr(),
      detail::cuda_scalar_of(dtype, "max_pool2d"), s);
  return gx;
}

Tensor avg_pool2d_forward(const Tensor& input, const cuda::detail::PoolShape& s,
                          bool count_include_pad, bool adaptive) {
  cuda::detail::DeviceGuard guard(input.device());
  const Tensor x = input.detach().contiguous();
  Tensor y = empty(out_shape(x.shape(), s), x.dtype(), x.device());
  cuda::detail::launch_avg_pool_forward(x.device_ptr(), y.device_ptr(),
                                        detail::cuda_scalar_of(x.dtype(), "avg_pool2d"), s,
                                        count_include_pad, adaptive);
  return y;
}

Tensor avg_pool2d_backward(const Tensor& grad, const Shape& shape, DType dtype,
                           const cuda::detail::PoolShape& s, bool count_include_pad,
                           bool adaptive) {
  const Device dev = grad.device();
  cuda::detail::DeviceGuard guard(dev);
  const Tensor g = grad.detach().to(dtype).contiguous();
  Tensor gx = empty(shape, dtype, dev);
  cuda::detail::launch_avg_pool_backward(g.device_ptr(), gx.device_ptr(),
                                         detail::cuda_scalar_of(dtype, "avg_pool2d"), s,
                                         count_include_pad, adaptive);
  return gx;
}

}  // namespace mantissa::kernels::gpu

#endif
