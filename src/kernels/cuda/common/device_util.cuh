#pragma once
// Device-side helpers shared by the CUDA kernels (.cu files only): the element types behind
// cuda::detail::Scalar, loads and stores through their arithmetic type
// (core/cuda/device_types.cuh), grid-stride loops and block-level tree reductions. Plain CUDA: no
// mantissa C++ headers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/copy_kernels.h"
#include "core/cuda/device_types.cuh"
#include "core/cuda/launch.h"

namespace mantissa::cuda::detail {

template <Scalar S>
struct ScalarTraits;
template <>
struct ScalarTraits<Scalar::f64> {
  using T = double;
};
template <>
struct ScalarTraits<Scalar::f32> {
  using T = float;
};
template <>
struct ScalarTraits<Scalar::f16> {
  using T = __half;
};
template <>
struct ScalarTraits<Scalar::bf16> {
  using T = __nv_bfloat16;
};
template <>
struct ScalarTraits<Scalar::i64> {
  using T = long long;
};
template <>
struct ScalarTraits<Scalar::i32> {
  using T = int;
};
template <>
struct ScalarTraits<Scalar::u8> {
  using T = unsigned char;
};
template <>
struct ScalarTraits<Scalar::i8> {
  using T = signed char;
};
template <>
struct ScalarTraits<Scalar::b8> {
  using T = unsigned char;  // 0 or 1
};

template <Scalar S>
using elem_t = typename ScalarTraits<S>::T;
template <Scalar S>
using acc_t = acc_of_t<elem_t<S>>;

template <typename A>
inline constexpr bool kIsFloatAcc = std::is_floating_point_v<A>;

// The stored value in its arithmetic type.
template <Scalar S>
__device__ __forceinline__ acc_t<S> load(const elem_t<S>* p, int64_t i) {
  return load_acc(p, i);
}

// An arithmetic value rounded once into the stored type (bool: non-zero is true).
template <Scalar S, typename A>
__device__ __forceinline__ void store(elem_t<S>* p, int64_t i, A v) {
  if constexpr (S == Scalar::b8) {
    p[i] = v != A(0) ? 1 : 0;
  } else {
    store_rounded(p, i, v);
  }
}

__device__ __forceinline__ int64_t global_thread() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Math in the arithmetic type: the float overloads for fp32, the double ones for f64.
template <typename A>
__device__ __forceinline__ A d_exp(A x) {
  if constexpr (sizeof(A) == 4)
    return expf(x);
  else
    return exp(x);
}
template <typename A>
__device__ __forceinline__ A d_log(A x) {
  if constexpr (sizeof(A) == 4)
    return logf(x);
  else
    return log(x);
}
template <typename A>
__device__ __forceinline__ A d_sqrt(A x) {
  if constexpr (sizeof(A) == 4)
    return sqrtf(x);
  else
    return sqrt(x);
}
template <typename A>
__device__ __forceinline__ A d_tanh(A x) {
  if constexpr (sizeof(A) == 4)
    return tanhf(x);
  else
    return tanh(x);
}
template <typename A>
__device__ __forceinline__ A d_erf(A x) {
  if constexpr (sizeof(A) == 4)
    return erff(x);
  else
    return erf(x);
}
template <typename A>
__device__ __forceinline__ A d_pow(A x, A y) {
  if constexpr (sizeof(A) == 4)
    return powf(x, y);
  else
    return pow(x, y);
}

// NaN-propagating maximum (a NaN on either side wins).
template <typename A>
__device__ __forceinline__ A nan_max(A a, A b) {
  return (a > b || a != a) ? a : b;
}

inline constexpr int kBlock = 256;  // threads of the row kernels (a power of two)

// The sum of v over the block's kBlock threads (blockDim.x == kBlock, 1-D): a butterfly of
// warp shuffles, then the 8 warp sums added in warp order by every thread (a fixed order: the
// same result on every run). Call from all threads of the block.
template <typename A>
__device__ A block_sum(A v) {
  __shared__ A sh[kBlock / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  A r = sh[0];
#pragma unroll
  for (int w = 1; w < kBlock / 32; ++w) r += sh[w];
  __syncthreads();  // sh is reused by the next call
  return r;
}

// The NaN-propagating maximum over the block, as block_sum.
template <typename A>
__device__ A block_max(A v) {
  __shared__ A sh[kBlock / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  A r = sh[0];
#pragma unroll
  for (int w = 1; w < kBlock / 32; ++w) r = nan_max(r, sh[w]);
  __syncthreads();
  return r;
}

// Blocks for a one-block-per-row kernel that loops over rows (gridDim.x capped).
inline unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows > 65535 * 4 ? 65535 * 4 : rows));
}

// Dispatch over the floating Scalars: fn(std::integral_constant<Scalar, S>{}).
#define MANTISSA_CUDA_DISPATCH_FLOAT(type, NAME, ...) \
  switch (type) {                                     \
    case Scalar::f64: {                               \
      constexpr Scalar NAME = Scalar::f64;            \
      __VA_ARGS__;                                    \
    } break;                                          \
    case Scalar::f32: {                               \
      constexpr Scalar NAME = Scalar::f32;            \
      __VA_ARGS__;                                    \
    } break;                                          \
    case Scalar::f16: {                               \
      constexpr Scalar NAME = Scalar::f16;            \
      __VA_ARGS__;                                    \
    } break;                                          \
    case Scalar::bf16: {                              \
      constexpr Scalar NAME = Scalar::bf16;           \
      __VA_ARGS__;                                    \
    } break;                                          \
    default:                                          \
      break;                                          \
  }

#define MANTISSA_CUDA_DISPATCH_ALL(type, NAME, ...) \
  switch (type) {                                   \
    case Scalar::f64: {                             \
      constexpr Scalar NAME = Scalar::f64;          \
      __VA_ARGS__;                                  \
    } break;                                        \
    case Scalar::f32: {                             \
      constexpr Scalar NAME = Scalar::f32;          \
      __VA_ARGS__;                                  \
    } break;                                        \
    case Scalar::f16: {                             \
      constexpr Scalar NAME = Scalar::f16;          \
      __VA_ARGS__;                                  \
    } break;                                        \
    case Scalar::bf16: {                            \
      constexpr Scalar NAME = Scalar::bf16;         \
      __VA_ARGS__;                                  \
    } break;                                        \
    case Scalar::i64: {                             \
      constexpr Scalar NAME = Scalar::i64;          \
      __VA_ARGS__;                                  \
    } break;                                        \
    case Scalar::i32: {                             \
      constexpr Scalar NAME = Scalar::i32;          \
      __VA_ARGS__;                                  \
    } break;                                        \
    case Scalar::u8: {                              \
      constexpr Scalar NAME = Scalar::u8;           \
      __VA_ARGS__;                                  \
    } break;                                        \
    case Scalar::i8: {                              \
      constexpr Scalar NAME = Scalar::i8;           \
      __VA_ARGS__;                                  \
    } break;                                        \
    case Scalar::b8: {                              \
      constexpr Scalar NAME = Scalar::b8;           \
      __VA_ARGS__;                                  \
    } break;                                        \
  }

}  // namespace mantissa::cuda::detail
