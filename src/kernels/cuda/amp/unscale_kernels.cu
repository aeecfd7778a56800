// GradScaler's check-and-unscale on a GPU (unscale_kernels.h): one grid-stride pass per
// gradient, the flag raised by any thread that sees a non-finite value (every writer stores
// the same 1.0f, so the race is benign).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda/launch.h"
#include "kernels/cuda/amp/unscale_kernels.h"
#include "kernels/cuda/common/device_math.cuh"

namespace mantissa::cuda::detail {
namespace {

template <typename T>
__global__ void unscale_kernel(T* x, int64_t n, float* found_inf, const float* inv_scale) {
  using A = typename AccOf<T>::type;
  const float inv_f = *inv_scale;
  const bool multiply = inv_f != 1.0f;
  const A inv = static_cast<A>(inv_f);
  bool bad = false;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const A v = load(x + i);
    if (!isfinite(v)) bad = true;
    if (multiply) store(x + i, mul(v, inv));  // inf stays inf, NaN stays NaN
  }
  if (__any_sync(0xffffffffu, bad) && threadIdx.x % 32 == 0) *found_inf = 1.0f;
}

}  // namespace

bool launch_non_finite_check_and_unscale(void* data, Scalar type, int64_t n, float* found_inf,
                                         const float* inv_scale) {
  auto go = [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    unscale_kernel<T>
        <<<grid_for(n), 256, 0, current_stream()>>>(static_cast<T*>(data), n, found_inf, inv_scale);
    check_kernel_launch("non_finite_check_and_unscale");
  };
  switch (type) {
    case Scalar::f64:
      return go(double{}), true;
    case Scalar::f32:
      return go(float{}), true;
    case Scalar::f16:
      return go(__half{}), true;
    case Scalar::bf16:
      return go(__nv_bfloat16{}), true;
    default:
      return false;
  }
}

}  // namespace mantissa::cuda::detail
