// The reduction ops' CUDA branch (reduce_cuda.h).
#include "kernels/cuda/reduce/reduce_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_reduce.h"
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/elementwise/elementwise_cuda.h"
#include "kernels/cuda/reduce/reduce_kernels.h"

namespace mantissa::kernels::gpu {

namespace {
detail::ReduceLayout dim_layout(const Shape& shape, int64_t d) {
  detail::ReduceLayout l;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < d) l.outer *= shape[i];
    if (i == d) l.r = shape[i];
    if (i > d) l.inner *= shape[i];
  }
  return l;
}
}  // namespace

Tensor sum(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape, bool mean) {
  return detail::cuda_sum(a, reduced, out_shape, mean);
}

Tensor spread(const Tensor& g_keep, const Shape& in_shape, int64_t count) {
  if (count > 0)
    return map("backward", EwOp::kDivScalar, {g_keep}, g_keep.dtype(), g_keep.dtype(),
               static_cast<double>(count), 0, &in_shape);
  return g_keep.expand(in_shape).contiguous();
}

Tensor amax(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape) {
  cuda::detail::DeviceGuard guard(a.device());
  Tensor out = empty(out_shape, a.dtype(), a.device());
  auto [src, l] = detail::reduce_layout(a, reduced);
  cuda::detail::launch_max(src.device_ptr(), detail::cuda_scalar_of(a.dtype(), "amax"),
                           out.device_ptr(), nullptr, l.outer, l.r, l.inner);
  return out;
}

void max_dim(const Tensor& a, int64_t d, const Tensor& values, const Tensor& indices) {
  cuda::detail::DeviceGuard guard(a.device());
  const Tensor src = a.detach().contiguous();
  const detail::ReduceLayout l = a.dim() == 0 ? detail::ReduceLayout{} : dim_layout(a.shape(), d);
  cuda::detail::launch_max(src.device_ptr(), detail::cuda_scalar_of(a.dtype(), "max"),
                           values.defined() ? values.device_ptr() : nullptr,
                           static_cast<int64_t*>(indices.device_ptr()), l.outer, l.r, l.inner);
}

Tensor max_dim_backward(const Tensor& g_keep, const Tensor& indices_keep, const Shape& in_shape,
                        int64_t d) {
  const Device dev = common_device("max", {&g_keep, &indices_keep});
  cuda::detail::DeviceGuard guard(dev);
  const Tensor g = g_keep.contiguous();
  const Tensor idx = indices_keep.contiguous();
  Tensor gx = zeros(in_shape, g.dtype(), dev);
  const detail::ReduceLayout l =
      in_shape.empty() ? detail::ReduceLayout{} : dim_layout(in_shape, d);
  (void)detail::cuda_scalar_of(g.dtype(), "max");
  cuda::detail::launch_scatter_dim(static_cast<const int64_t*>(idx.device_ptr()), g.device_ptr(),
                                   gx.device_ptr(), static_cast<int>(g.element_size()), l.outer,
                                   l.r, l.inner);
  return gx;
}

}  // namespace mantissa::kernels::gpu

#endif
