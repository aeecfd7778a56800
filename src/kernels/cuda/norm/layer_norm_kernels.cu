// layer_norm kernels (layer_norm_kernels.h).
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/norm/layer_norm_kernels.h"

namespace mantissa::cuda::detail {
namespace {

constexpr int kCols = 32, kLanes = 8;

template <Scalar S>
__global__ void ln_forward_kernel(const elem_t<S>* x, const elem_t<S>* w, const elem_t<S>* b,
                                  elem_t<S>* y, acc_t<S>* mean, acc_t<S>* rstd, int64_t rows,
                                  int64_t n, double eps) {
  using A = acc_t<S>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const elem_t<S>* xr = x + r * n;
    A s = 0;
    for (int64_t j = threadIdx.x; j < n; j += kBlock) s += load<S>(xr, j);
    const A m = block_sum(s) / static_cast<A>(n);
    A q = 0;
    for (int64_t j = threadIdx.x; j < n; j += kBlock) {
      const A d = load<S>(xr, j) - m;
      q += d * d;
    }
    const A rs = A(1) / d_sqrt(block_sum(q) / static_cast<A>(n) + static_cast<A>(eps));
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    for (int64_t j = threadIdx.x; j < n; j += kBlock) {
      const A wv = w ? load<S>(w, j) : A(1), bv = b ? load<S>(b, j) : A(0);
      store<S>(y + r * n, j, (load<S>(xr, j) - m) * rs * wv + bv);
    }
  }
}

template <Scalar S>
__global__ void ln_backward_dx_kernel(const elem_t<S>* g, const elem_t<S>* x, const elem_t<S>* w,
                                      const acc_t<S>* mean, const acc_t<S>* rstd, elem_t<S>* dx,
                                      int64_t rows, int64_t n) {
  using A = acc_t<S>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t off = r * n;
    const A m = mean[r], rs = rstd[r];
    A sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < n; j += kBlock) {
      const A gh = load<S>(g, off + j) * (w ? load<S>(w, j) : A(1));
      const A xh = (load<S>(x, off + j) - m) * rs;
      sg += gh;
      sgx += gh * xh;
    }
    sg = block_sum(sg) / static_cast<A>(n);
    sgx = block_sum(sgx) / static_cast<A>(n);
    for (int64_t j = threadIdx.x; j < n; j += kBlock) {
      const A gh = load<S>(g, off + j) * (w ? load<S>(w, j) : A(1));
      const A xh = (load<S>(x, off + j) - m) * rs;
      store<S>(dx, off + j, rs * (gh - sg - xh * sgx));
    }
  }
}

// Column sums over the rows: 32 adjacent columns per block (coalesced), 8 lanes over rows.
template <Scalar S>
__global__ void ln_backward_wb_kernel(const elem_t<S>* g, const elem_t<S>* x, const acc_t<S>* mean,
                                      const acc_t<S>* rstd, elem_t<S>* dw, elem_t<S>* db,
                                      int64_t rows, int64_t n) {
  using A = acc_t<S>;
  __shared__ A sw[kLanes][kCols];
  __shared__ A sb[kLanes][kCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t j0 = static_cast<int64_t>(blockIdx.x) * kCols; j0 < n;
       j0 += static_cast<int64_t>(gridDim.x) * kCols) {
    const int64_t j = j0 + tx;
    A aw = 0, ab = 0;
    if (j < n) {
      for (int64_t r = ty; r < rows; r += kLanes) {
        const A gv = load<S>(g, r * n + j);
        aw += gv * ((load<S>(x, r * n + j) - mean[r]) * rstd[r]);
        ab += gv;
      }
    }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    for (int s = kLanes / 2; s > 0; s >>= 1) {
      if (ty < s) {
        sw[ty][tx] += sw[ty + s][tx];
        sb[ty][tx] += sb[ty + s][tx];
      }
      __syncthreads();
    }
    if (ty == 0 && j < n) {
      if (dw) store<S>(dw, j, sw[0][tx]);
      if (db) store<S>(db, j, sb[0][tx]);
    }
    __syncthreads();
  }
}

}  // namespace

void launch_layer_norm_forward(const void* x, const void* w, const void* b, void* y, void* mean,
                               void* rstd, Scalar type, int64_t rows, int64_t n, double eps) {
  if (rows == 0 || n == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    ln_forward_kernel<S><<<row_grid(rows), kBlock, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), static_cast<const elem_t<S>*>(w),
        static_cast<const elem_t<S>*>(b), static_cast<elem_t<S>*>(y), static_cast<acc_t<S>*>(mean),
        static_cast<acc_t<S>*>(rstd), rows, n, eps);
  })
  check_kernel_launch("layer_norm");
}

void launch_layer_norm_backward(const void* g, const void* x, const void* w, const void* mean,
                                const void* rstd, void* dx, void* dw, void* db, Scalar type,
                                int64_t rows, int64_t n) {
  if (n == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    const auto* gp = static_cast<const elem_t<S>*>(g);
    const auto* xp = static_cast<const elem_t<S>*>(x);
    const auto* mp = static_cast<const acc_t<S>*>(mean);
    const auto* rp = static_cast<const acc_t<S>*>(rstd);
    if (dx && rows > 0)
      ln_backward_dx_kernel<S><<<row_grid(rows), kBlock, 0, current_stream()>>>(
          gp, xp, static_cast<const elem_t<S>*>(w), mp, rp, static_cast<elem_t<S>*>(dx), rows, n);
    if (dw || db) {
      const int64_t tiles = (n + kCols - 1) / kCols;
      ln_backward_wb_kernel<S><<<static_cast<unsigned>(tiles > 65535 ? 65535 : tiles),
                                 dim3(kCols, kLanes), 0, current_stream()>>>(
          gp, xp, mp, rp, static_cast<elem_t<S>*>(dw), static_cast<elem_t<S>*>(db), rows, n);
    }
  })
  check_kernel_launch("layer_norm_backward");
}

}  // namespace mantissa::cuda::detail
