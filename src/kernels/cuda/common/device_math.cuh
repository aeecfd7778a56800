#pragma once
// Device helpers shared by the optimizer and AMP kernels (.cu files only): loads that widen
// f16/bf16 to fp32, stores that round to nearest even, and arithmetic rounded per operation
// (the explicit _rn intrinsics keep nvcc from contracting a * b + c into an FMA, so the
// results equal the CPU's term-by-term IEEE arithmetic bit for bit).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mantissa::cuda::detail {

// The arithmetic type of a stored type: fp32 for f16/bf16/f32, double for f64.
template <typename T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ double load(const double* p) { return *p; }
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(double* p, double v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__device__ __forceinline__ unsigned long long bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned long long bits(double v) {
  return static_cast<unsigned long long>(__double_as_longlong(v));
}
__device__ __forceinline__ unsigned long long bits(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ unsigned long long bits(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}

__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }

// torch.maximum: the larger value, NaN when either is NaN.
template <typename X>
__device__ __forceinline__ X max_nan(X a, X b) {
  return (a > b || a != a) ? a : b;
}

}  // namespace mantissa::cuda::detail
