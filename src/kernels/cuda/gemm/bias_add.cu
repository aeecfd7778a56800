// The bias of a product added row by row (bias_add.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda/launch.h"
#include "kernels/cuda/gemm/bias_add.h"

namespace mantissa::cuda::detail {
namespace {

template <typename T, typename Acc>
__device__ __forceinline__ Acc widen(T v) {
  return static_cast<Acc>(v);
}
template <>
__device__ __forceinline__ float widen<__half, float>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float widen<__nv_bfloat16, float>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T, typename Acc>
__device__ __forceinline__ T narrow(Acc v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half narrow<__half, float>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T, typename Acc>
__global__ void add_bias_rows_kernel(T* out, const T* bias, int64_t total, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = narrow<T, Acc>(widen<T, Acc>(out[i]) + widen<T, Acc>(bias[i % n]));
}

template <typename T, typename Acc>
void launch(void* out, const void* bias, int64_t total, int64_t n) {
  add_bias_rows_kernel<T, Acc><<<grid_for(total), 256, 0, current_stream()>>>(
      static_cast<T*>(out), static_cast<const T*>(bias), total, n);
  check_kernel_launch("add_bias_rows");
}

}  // namespace

void launch_add_bias_rows(void* out, const void* bias, Scalar type, int64_t rows, int64_t n) {
  const int64_t total = rows * n;
  if (total == 0) return;
  switch (type) {
    case Scalar::f64:
      return launch<double, double>(out, bias, total, n);
    case Scalar::f32:
      return launch<float, float>(out, bias, total, n);
    case Scalar::f16:
      return launch<__half, float>(out, bias, total, n);
    case Scalar::bf16:
      return launch<__nv_bfloat16, float>(out, bias, total, n);
    default:
      break;
  }
  // Unreachable: cuda_gemm.cpp checks the dtype first. Launch nothing rather than guess.
}

}  // namespace mantissa::cuda::detail
