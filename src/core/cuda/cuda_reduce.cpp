// Sums over dims on a GPU (cuda_reduce.h).
#include "core/cuda/cuda_reduce.h"

#if MANTISSA_HAS_CUDA
#include <limits>

#include "core/cuda/cuda_runtime.h"
#include "core/cuda/sum_kernels.h"
#include "core/cuda/tensor_transfer.h"

namespace mantissa::detail {

std::pair<Tensor, CudaReduceLayout> cuda_reduce_layout(const Tensor& a,
                                                       const std::vector<bool>& reduced) {
  // Runs of kept / reduced dims merged (size-1 dims go with either), as the CPU's reduce_layout.
  std::vector<std::pair<bool, int64_t>> groups;
  for (size_t d = 0; d < reduced.size(); ++d) {
    const int64_t n = a.shape()[d];
    if (n == 1) continue;
    if (!groups.empty() && groups.back().first == reduced[d]) {
      groups.back().second *= n;
    } else {
      groups.emplace_back(reduced[d], n);
    }
  }
  CudaReduceLayout l;
  const size_t g = groups.size();
  auto is_r = [&](size_t i) { return groups[i].first; };
  if (g == 0) return {a.detach().contiguous(), l};
  if (g == 1) {
    (is_r(0) ? l.r : l.outer) = groups[0].second;
    return {a.detach().contiguous(), l};
  }
  if (g == 2) {
    if (is_r(1)) {
      l.outer = groups[0].second;
      l.r = groups[1].second;
    } else {
      l.r = groups[0].second;
      l.inner = groups[1].second;
    }
    return {a.detach().contiguous(), l};
  }
  if (g == 3 && is_r(1)) {
    l.outer = groups[0].second;
    l.r = groups[1].second;
    l.inner = groups[2].second;
    return {a.detach().contiguous(), l};
  }
  // Interleaved: kept dims first (in order), reduced dims last, in a copy.
  std::vector<int64_t> order;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (!reduced[d]) order.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) order.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d < reduced.size(); ++d) (reduced[d] ? l.r : l.outer) *= a.shape()[d];
  return {a.detach().permute(order).contiguous(), l};
}

Tensor cuda_sum(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape,
                bool mean) {
  cuda::detail::DeviceGuard guard(a.device());
  const DType out_dt = a.dtype().is_floating_point() ? a.dtype() : kInt64;
  Tensor out = empty(out_shape, out_dt, a.device());
  auto [src, l] = cuda_reduce_layout(a, reduced);
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
