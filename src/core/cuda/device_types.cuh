#pragma once
// The element types the GPU stores and the type their arithmetic runs in (fp32 for f32/f16/bf16,
// double for f64, 64-bit integers for the integer and bool types), with loads and rounded stores
// through it. In core because core's own kernels (the sums behind sum_to) need them as much as
// the kernels of src/kernels/cuda (common/device_util.cuh builds on this). .cu files only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mantissa::cuda::detail {

template <typename T>
struct AccOf {
  using A = T;  // double, long long
};
template <>
struct AccOf<__half> {
  using A = float;
};
template <>
struct AccOf<__nv_bfloat16> {
  using A = float;
};
template <>
struct AccOf<int> {
  using A = long long;
};
template <>
struct AccOf<signed char> {
  using A = long long;
};
template <>
struct AccOf<unsigned char> {
  using A = long long;
};
template <typename T>
using acc_of_t = typename AccOf<T>::A;

// The stored value in its arithmetic type.
template <typename T>
__device__ __forceinline__ acc_of_t<T> load_acc(const T* p, int64_t i) {
  if constexpr (__is_same(T, __half))
    return __half2float(p[i]);
  else if constexpr (__is_same(T, __nv_bfloat16))
    return __bfloat162float(p[i]);
  else
    return static_cast<acc_of_t<T>>(p[i]);
}

// An arithmetic value rounded once into the stored type O (not bool: see device_util.cuh).
template <typename O, typename A>
__device__ __forceinline__ void store_rounded(O* p, int64_t i, A v) {
  if constexpr (__is_same(O, __half))
    p[i] = __float2half_rn(static_cast<float>(v));
  else if constexpr (__is_same(O, __nv_bfloat16))
    p[i] = __float2bfloat16_rn(static_cast<float>(v));
  else
    p[i] = static_cast<O>(v);
}

}  // namespace mantissa::cuda::detail
