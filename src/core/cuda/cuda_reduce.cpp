// Sums over dims on a GPU (cuda_reduce.h).
#include "core/cuda/cuda_reduce.h"

#if MANTISSA_HAS_CUDA
#include <limits>

#include "core/cuda/cuda_runtime.h"
#include "core/cuda/sum_kernels.h"
#include "core/cuda/tensor_transfer.h"

namespace mantissa::detail {

Tensor cuda_sum(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape,
                bool mean) {
  cuda::detail::DeviceGuard guard(a.device());
  const DType out_dt = a.dtype().is_floating_point() ? a.dtype() : kInt64;
  Tensor out = empty(out_shape, out_dt, a.device());
  auto [src, l] = reduce_layout(a, reduced);
  if (l.r == 0) {  // an empty reduction: zeros (a mean of nothing: 0/0 = NaN, as on the CPU)
    cuda_fill(out, mean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return out;
  }
  const double divisor = mean ? static_cast<double>(l.r) : 0.0;
  cuda::detail::launch_sum(src.device_ptr(), cuda_scalar_of(a.dtype(), "sum"), out.device_ptr(),
                           cuda_scalar_of(out_dt, "sum"), l.outer, l.r, l.inner, divisor);
  return out;
}

}  // namespace mantissa::detail

#endif
