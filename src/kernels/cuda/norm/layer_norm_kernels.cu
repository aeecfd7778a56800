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

// Column j's sums over rows [begin, end) of g * x_hat (dw) and g (db), left in sw[0][tx] and
// sb[0][tx]: each of the 8 lanes sums every 8th row, then a fixed tree over the lanes.
template <Scalar S>
__device__ __forceinline__ void column_sums(const elem_t<S>* g, const elem_t<S>* x,
                                            const acc_t<S>* mean, const acc_t<S>* rstd, int64_t n,
                                            int64_t j, int64_t begin, int64_t end,
                                            acc_t<S> (&sw)[kLanes][kCols],
                                            acc_t<S> (&sb)[kLanes][kCols]) {
  using A = acc_t<S>;
  const int tx = threadIdx.x, ty = threadIdx.y;
  A aw = 0, ab = 0;
  if (j < n) {
    for (int64_t r = begin + ty; r < end; r += kLanes) {
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
    column_sums<S>(g, x, mean, rstd, n, j, 0, rows, sw, sb);
    if (ty == 0 && j < n) {
      if (dw) store<S>(dw, j, sw[0][tx]);
      if (db) store<S>(db, j, sb[0][tx]);
    }
    __syncthreads();
  }
}

// The split form of the above for many rows and few column tiles (a (4096, 768) input: 24
// tiles): block (x, y) sums its 32 columns over the y-th chunk of `chunk` rows into
// pw/pb[y * n + j], in the arithmetic type; ln_finish_wb_kernel adds the chunks in order.
template <Scalar S>
__global__ void ln_partial_wb_kernel(const elem_t<S>* g, const elem_t<S>* x, const acc_t<S>* mean,
                                     const acc_t<S>* rstd, acc_t<S>* pw, acc_t<S>* pb, int64_t rows,
                                     int64_t n, int64_t chunk) {
  using A = acc_t<S>;
  __shared__ A sw[kLanes][kCols];
  __shared__ A sb[kLanes][kCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = blockIdx.y;
  const int64_t begin = c * chunk, end = begin + chunk < rows ? begin + chunk : rows;
  for (int64_t j0 = static_cast<int64_t>(blockIdx.x) * kCols; j0 < n;
       j0 += static_cast<int64_t>(gridDim.x) * kCols) {
    const int64_t j = j0 + tx;
    column_sums<S>(g, x, mean, rstd, n, j, begin, end, sw, sb);
    if (ty == 0 && j < n) {
      pw[c * n + j] = sw[0][tx];
      pb[c * n + j] = sb[0][tx];
    }
    __syncthreads();
  }
}

template <Scalar S>
__global__ void ln_finish_wb_kernel(const acc_t<S>* pw, const acc_t<S>* pb, elem_t<S>* dw,
                                    elem_t<S>* db, int64_t chunks, int64_t n) {
  using A = acc_t<S>;
  for (int64_t j = global_thread(); j < n; j += grid_threads()) {
    A aw = 0, ab = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      aw += pw[c * n + j];
      ab += pb[c * n + j];
    }
    if (dw) store<S>(dw, j, aw);
    if (db) store<S>(db, j, ab);
  }
}

// dw/db over enough blocks to fill the GPU: the rows are cut into chunks (by the shape alone,
// so the order of the additions is the same on every run) when the column tiles are few.
template <Scalar S>
void ln_backward_wb(const elem_t<S>* g, const elem_t<S>* x, const acc_t<S>* mean,
                    const acc_t<S>* rstd, elem_t<S>* dw, elem_t<S>* db, int64_t rows, int64_t n) {
  using A = acc_t<S>;
  constexpr int64_t kMinChunk = 64, kTargetBlocks = 1024;
  const int64_t tiles = (n + kCols - 1) / kCols;
  int64_t chunks = (kTargetBlocks + tiles - 1) / tiles;
  const int64_t max_chunks = (rows + kMinChunk - 1) / kMinChunk;
  if (chunks > max_chunks) chunks = max_chunks;
  if (tiles >= kTargetBlocks / 2 || tiles > 65535 || chunks < 2) {
    ln_backward_wb_kernel<S>
        <<<static_cast<unsigned>(tiles > 65535 ? 65535 : tiles), dim3(kCols, kLanes), 0,
           current_stream()>>>(g, x, mean, rstd, dw, db, rows, n);
    return;
  }
  const int64_t chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + chunk - 1) / chunk;  // no empty chunk
  int device = 0;
  cudaGetDevice(&device);
  const size_t bytes = static_cast<size_t>(2 * chunks * n) * sizeof(A);
  A* pw = static_cast<A*>(allocate(bytes, device));
  A* pb = pw + chunks * n;
  ln_partial_wb_kernel<S>
      <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks)), dim3(kCols, kLanes), 0,
         current_stream()>>>(g, x, mean, rstd, pw, pb, rows, n, chunk);
  ln_finish_wb_kernel<S><<<grid_for(n), 256, 0, current_stream()>>>(pw, pb, dw, db, chunks, n);
  release(pw, bytes, device);  // stream-ordered: reused only by later work on the stream
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
    if (dw || db)
      ln_backward_wb<S>(gp, xp, mp, rp, static_cast<elem_t<S>*>(dw), static_cast<elem_t<S>*>(db),
                        rows, n);
  })
  check_kernel_launch("layer_norm_backward");
}

}  // namespace mantissa::cuda::detail
