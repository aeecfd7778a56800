// softmax / log_softmax kernels: one block per row when the softmax dim is the last one
// (inner == 1), else one thread per (outer, inner) column walking the n elements (adjacent
// threads read adjacent columns).
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/softmax/softmax_kernels.h"

namespace mantissa::cuda::detail {
namespace {

template <Scalar S, bool kLog>
__global__ void softmax_rows_kernel(const elem_t<S>* x, elem_t<S>* y, int64_t rows, int64_t n) {
  using A = acc_t<S>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const elem_t<S>* xr = x + row * n;
    elem_t<S>* yr = y + row * n;
    A m = -static_cast<A>(INFINITY);
    for (int64_t j = threadIdx.x; j < n; j += kBlock) m = nan_max(m, load<S>(xr, j));
    m = block_max(m);
    A s = 0;
    for (int64_t j = threadIdx.x; j < n; j += kBlock) s += d_exp(load<S>(xr, j) - m);
    s = block_sum(s);
    if constexpr (kLog) {
      const A lse = m + d_log(s);
      for (int64_t j = threadIdx.x; j < n; j += kBlock) store<S>(yr, j, load<S>(xr, j) - lse);
    } else {
      const A inv = A(1) / s;
      for (int64_t j = threadIdx.x; j < n; j += kBlock)
        store<S>(yr, j, d_exp(load<S>(xr, j) - m) * inv);
    }
  }
}

template <Scalar S, bool kLog>
__global__ void softmax_cols_kernel(const elem_t<S>* x, elem_t<S>* y, int64_t outer, int64_t n,
                                    int64_t inner) {
  using A = acc_t<S>;
  const int64_t cols = outer * inner;
  for (int64_t c = global_thread(); c < cols; c += grid_threads()) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    A m = -static_cast<A>(INFINITY);
    for (int64_t i = 0; i < n; ++i) m = nan_max(m, load<S>(x, base + i * inner));
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s += d_exp(load<S>(x, base + i * inner) - m);
    if constexpr (kLog) {
      const A lse = m + d_log(s);
      for (int64_t i = 0; i < n; ++i)
        store<S>(y, base + i * inner, load<S>(x, base + i * inner) - lse);
    } else {
      const A inv = A(1) / s;
      for (int64_t i = 0; i < n; ++i)
        store<S>(y, base + i * inner, d_exp(load<S>(x, base + i * inner) - m) * inv);
    }
  }
}

template <Scalar S, bool kLog>
__global__ void softmax_backward_rows_kernel(const elem_t<S>* y, const elem_t<S>* g, elem_t<S>* dx,
                                             int64_t rows, int64_t n) {
  using A = acc_t<S>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t off = row * n;
    A s = 0;
    for (int64_t j = threadIdx.x; j < n; j += kBlock) {
      if constexpr (kLog) {
        s += load<S>(g, off + j);
      } else {
        s += load<S>(g, off + j) * load<S>(y, off + j);
      }
    }
    s = block_sum(s);
    for (int64_t j = threadIdx.x; j < n; j += kBlock) {
      const A gv = load<S>(g, off + j), yv = load<S>(y, off + j);
      if constexpr (kLog) {
        store<S>(dx, off + j, gv - d_exp(yv) * s);
      } else {
        store<S>(dx, off + j, yv * (gv - s));
      }
    }
  }
}

template <Scalar S, bool kLog>
__global__ void softmax_backward_cols_kernel(const elem_t<S>* y, const elem_t<S>* g, elem_t<S>* dx,
                                             int64_t outer, int64_t n, int64_t inner) {
  using A = acc_t<S>;
  const int64_t cols = outer * inner;
  for (int64_t c = global_thread(); c < cols; c += grid_threads()) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    A s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = base + i * inner;
      if constexpr (kLog) {
        s += load<S>(g, at);
      } else {
        s += load<S>(g, at) * load<S>(y, at);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = base + i * inner;
      const A gv = load<S>(g, at), yv = load<S>(y, at);
      if constexpr (kLog) {
        store<S>(dx, at, gv - d_exp(yv) * s);
      } else {
        store<S>(dx, at, yv * (gv - s));
      }
    }
  }
}

template <Scalar S, bool kLog>
void forward(const void* x, void* y, int64_t outer, int64_t n, int64_t inner) {
  const auto* xp = static_cast<const elem_t<S>*>(x);
  auto* yp = static_cast<elem_t<S>*>(y);
  if (inner == 1) {
    softmax_rows_kernel<S, kLog>
        <<<row_grid(outer), kBlock, 0, current_stream()>>>(xp, yp, outer, n);
  } else {
    softmax_cols_kernel<S, kLog>
        <<<grid_for(outer * inner), 256, 0, current_stream()>>>(xp, yp, outer, n, inner);
  }
}

template <Scalar S, bool kLog>
void backward(const void* y, const void* g, void* dx, int64_t outer, int64_t n, int64_t inner) {
  const auto* yp = static_cast<const elem_t<S>*>(y);
  const auto* gp = static_cast<const elem_t<S>*>(g);
  auto* dp = static_cast<elem_t<S>*>(dx);
  if (inner == 1) {
    softmax_backward_rows_kernel<S, kLog>
        <<<row_grid(outer), kBlock, 0, current_stream()>>>(yp, gp, dp, outer, n);
  } else {
    softmax_backward_cols_kernel<S, kLog>
        <<<grid_for(outer * inner), 256, 0, current_stream()>>>(yp, gp, dp, outer, n, inner);
  }
}

// ---- Attention's scaled (causal) softmax: one warp per row (8 rows per 256-thread block); the
// row is read three times (max, sum, write), the second and third from cache.
constexpr int kWarpRows = 8;

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename A>
__device__ __forceinline__ A warp_max(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <Scalar S>
__global__ void scaled_softmax_kernel(const elem_t<S>* x, elem_t<S>* y, int64_t rows, int64_t n,
                                      int64_t L, acc_t<S> scale, bool causal) {
  using A = acc_t<S>;
  const int lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kWarpRows) + (threadIdx.x >> 5); row < rows;
       row += static_cast<int64_t>(gridDim.x) * kWarpRows) {
    const elem_t<S>* xr = x + row * n;
    elem_t<S>* yr = y + row * n;
    const int64_t i = row % L;
    const int64_t lim = causal ? (i + 1 < n ? i + 1 : n) : n;  // entries j < lim take part
    A m = -static_cast<A>(INFINITY);
    for (int64_t j = lane; j < lim; j += 32) m = nan_max(m, load<S>(xr, j) * scale);
    m = warp_max(m);
    A s = 0;
    for (int64_t j = lane; j < lim; j += 32) s += d_exp(load<S>(xr, j) * scale - m);
    s = warp_sum(s);
    const A inv = A(1) / s;
    for (int64_t j = lane; j < n; j += 32)
      store<S>(yr, j, j < lim ? d_exp(load<S>(xr, j) * scale - m) * inv : A(0));
  }
}

template <Scalar S>
__global__ void scaled_softmax_backward_kernel(const elem_t<S>* y, const elem_t<S>* g,
                                               elem_t<S>* dx, int64_t rows, int64_t n,
                                               acc_t<S> scale) {
  using A = acc_t<S>;
  const int lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(kWarpRows) + (threadIdx.x >> 5); row < rows;
       row += static_cast<int64_t>(gridDim.x) * kWarpRows) {
    const int64_t off = row * n;
    A s = 0;
    for (int64_t j = lane; j < n; j += 32) s += load<S>(g, off + j) * load<S>(y, off + j);
    s = warp_sum(s);
    for (int64_t j = lane; j < n; j += 32)
      store<S>(dx, off + j, scale * load<S>(y, off + j) * (load<S>(g, off + j) - s));
  }
}

unsigned warp_row_grid(int64_t rows) {
  const int64_t blocks = (rows + kWarpRows - 1) / kWarpRows;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

}  // namespace

void launch_scaled_softmax_forward(const void* x, void* y, Scalar type, int64_t rows, int64_t n,
                                   int64_t L, double scale, bool causal) {
  if (rows * n == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    scaled_softmax_kernel<S><<<warp_row_grid(rows), 32 * kWarpRows, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), static_cast<elem_t<S>*>(y), rows, n, L,
        static_cast<acc_t<S>>(scale), causal);
  })
  check_kernel_launch("scaled_softmax");
}

void launch_scaled_softmax_backward(const void* y, const void* g, void* dx, Scalar type,
                                    int64_t rows, int64_t n, double scale) {
  if (rows * n == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    scaled_softmax_backward_kernel<S><<<warp_row_grid(rows), 32 * kWarpRows, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(y), static_cast<const elem_t<S>*>(g),
        static_cast<elem_t<S>*>(dx), rows, n, static_cast<acc_t<S>>(scale));
  })
  check_kernel_launch("scaled_softmax_backward");
}

void launch_softmax_forward(const void* x, void* y, Scalar type, bool log, int64_t outer, int64_t n,
                            int64_t inner) {
  if (outer * n * inner == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    if (log)
      forward<S, true>(x, y, outer, n, inner);
    else
      forward<S, false>(x, y, outer, n, inner);
  })
  check_kernel_launch("softmax");
}

void launch_softmax_backward(const void* y, const void* g, void* dx, Scalar type, bool log,
                             int64_t outer, int64_t n, int64_t inner) {
  if (outer * n * inner == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    if (log)
      backward<S, true>(y, g, dx, outer, n, inner);
    else
      backward<S, false>(y, g, dx, outer, n, inner);
  })
  check_kernel_launch("softmax_backward");
}

}  // namespace mantissa::cuda::detail
