// The maximum kernels of reduce_kernels.h: a (value, index) pair per thread combined by a
// rule that is associative and commutative (NaN first, then the larger value, then the lower
// index), so the block's answer is the sequential first maximum whatever the order.
#include <climits>

#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/reduce/reduce_kernels.h"

namespace mantissa::cuda::detail {
namespace {

constexpr int kCols = 32, kLanes = 8;

template <typename A>
struct Best {
  A v;
  long long i;
};

template <typename A>
__device__ __forceinline__ Best<A> better(Best<A> a, Best<A> b) {
  const bool an = a.v != a.v, bn = b.v != b.v;
  if (an || bn) {
    if (an && bn) return a.i <= b.i ? a : b;
    return an ? a : b;
  }
  if (a.v != b.v) return a.v > b.v ? a : b;
  return a.i <= b.i ? a : b;
}

// Loses to every element (ties go to the real element's lower index).
template <typename A>
__device__ __forceinline__ Best<A> nothing() {
  if constexpr (kIsFloatAcc<A>) {
    return {-static_cast<A>(INFINITY), LLONG_MAX};
  } else {
    return {LLONG_MIN, LLONG_MAX};
  }
}

template <Scalar S>
__device__ __forceinline__ void write(Best<acc_t<S>> b, int64_t at, elem_t<S>* values,
                                      int64_t* indices) {
  if (indices) indices[at] = b.i;
  if (values) store<S>(values, at, b.v);
}

template <Scalar S>
__global__ void max_rows_kernel(const elem_t<S>* x, elem_t<S>* values, int64_t* indices,
                                int64_t outer, int64_t r) {
  using A = acc_t<S>;
  __shared__ A sv[kBlock];
  __shared__ long long si[kBlock];
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const elem_t<S>* xr = x + row * r;
    Best<A> b = nothing<A>();
    for (int64_t j = threadIdx.x; j < r; j += kBlock) b = better(b, Best<A>{load<S>(xr, j), j});
    sv[threadIdx.x] = b.v;
    si[threadIdx.x] = b.i;
    __syncthreads();
    for (int w = kBlock / 2; w > 0; w >>= 1) {
      if (threadIdx.x < w) {
        const Best<A> c = better(Best<A>{sv[threadIdx.x], si[threadIdx.x]},
                                 Best<A>{sv[threadIdx.x + w], si[threadIdx.x + w]});
        sv[threadIdx.x] = c.v;
        si[threadIdx.x] = c.i;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) write<S>(Best<A>{sv[0], si[0]}, row, values, indices);
    __syncthreads();
  }
}

// Block (32, 8): 32 adjacent columns, 8 lanes over the rows, then a tree over the lanes.
template <Scalar S>
__global__ void max_cols_kernel(const elem_t<S>* x, elem_t<S>* values, int64_t* indices,
                                int64_t outer, int64_t r, int64_t inner) {
  using A = acc_t<S>;
  __shared__ A sv[kLanes][kCols];
  __shared__ long long si[kLanes][kCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    for (int64_t k0 = static_cast<int64_t>(blockIdx.x) * kCols; k0 < inner;
         k0 += static_cast<int64_t>(gridDim.x) * kCols) {
      const int64_t k = k0 + tx;
      Best<A> b = nothing<A>();
      if (k < inner)
        for (int64_t i = ty; i < r; i += kLanes)
          b = better(b, Best<A>{load<S>(x, (o * r + i) * inner + k), i});
      sv[ty][tx] = b.v;
      si[ty][tx] = b.i;
      __syncthreads();
      for (int w = kLanes / 2; w > 0; w >>= 1) {
        if (ty < w) {
          const Best<A> c =
              better(Best<A>{sv[ty][tx], si[ty][tx]}, Best<A>{sv[ty + w][tx], si[ty + w][tx]});
          sv[ty][tx] = c.v;
          si[ty][tx] = c.i;
        }
        __syncthreads();
      }
      if (ty == 0 && k < inner)
        write<S>(Best<A>{sv[0][tx], si[0][tx]}, o * inner + k, values, indices);
      __syncthreads();
    }
  }
}

template <typename E>
__global__ void scatter_dim_kernel(const int64_t* idx, const E* g, E* gx, int64_t outer, int64_t r,
                                   int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t j = global_thread(); j < n; j += grid_threads()) {
    const int64_t o = j / inner, k = j % inner;
    gx[(o * r + idx[j]) * inner + k] = g[j];
  }
}

}  // namespace

void launch_max(const void* src, Scalar type, void* values, int64_t* indices, int64_t outer,
                int64_t r, int64_t inner) {
  if (outer * inner == 0) return;
  MANTISSA_CUDA_DISPATCH_ALL(type, S, {
    const auto* x = static_cast<const elem_t<S>*>(src);
    auto* v = static_cast<elem_t<S>*>(values);
    if (inner == 1) {
      max_rows_kernel<S><<<row_grid(outer), kBlock, 0, current_stream()>>>(x, v, indices, outer, r);
    } else {
      const int64_t tiles = (inner + kCols - 1) / kCols;
      const dim3 grid(static_cast<unsigned>(tiles > 65535 ? 65535 : tiles),
                      static_cast<unsigned>(outer > 65535 ? 65535 : outer));
      max_cols_kernel<S>
          <<<grid, dim3(kCols, kLanes), 0, current_stream()>>>(x, v, indices, outer, r, inner);
    }
  })
  check_kernel_launch("max");
}

void launch_scatter_dim(const int64_t* indices, const void* g, void* gx, int elem_bytes,
                        int64_t outer, int64_t r, int64_t inner) {
  const int64_t n = outer * inner;
  if (n == 0) return;
  const unsigned grid = grid_for(n);
  switch (elem_bytes) {
    case 2:
      scatter_dim_kernel<<<grid, 256, 0, current_stream()>>>(
          indices, static_cast<const unsigned short*>(g), static_cast<unsigned short*>(gx), outer,
          r, inner);
      break;
    case 4:
      scatter_dim_kernel<<<grid, 256, 0, current_stream()>>>(
          indices, static_cast<const unsigned int*>(g), static_cast<unsigned int*>(gx), outer, r,
          inner);
      break;
    default:
      scatter_dim_kernel<<<grid, 256, 0, current_stream()>>>(
          indices, static_cast<const unsigned long long*>(g), static_cast<unsigned long long*>(gx),
          outer, r, inner);
      break;
  }
  check_kernel_launch("max_backward");
}

}  // namespace mantissa::cuda::detail
