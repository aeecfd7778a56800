// The sum kernels of sum_kernels.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda/device_types.cuh"
#include "core/cuda/launch.h"
#include "core/cuda/sum_kernels.h"

namespace mantissa::cuda::detail {
namespace {

constexpr int kThreads = 256;          // row kernel; a power of two
constexpr int kCols = 32, kLanes = 8;  // column kernel: 32 columns x 8 row lanes

template <typename A>
__device__ __forceinline__ A finish(A s, double divisor) {
  return divisor > 0 ? s / static_cast<A>(divisor) : s;
}

// One block per row (rows in a block-stride loop), threads striding along the row.
template <typename T, typename O>
__global__ void sum_rows_kernel(const T* x, O* out, int64_t outer, int64_t r, double divisor) {
  using A = acc_of_t<T>;
  __shared__ A sh[kThreads];
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const T* xr = x + row * r;
    A s = 0;
    for (int64_t j = threadIdx.x; j < r; j += kThreads) s += load_acc(xr, j);
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w >>= 1) {
      if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) store_rounded(out, row, finish(sh[0], divisor));
    __syncthreads();  // sh is rewritten for the next row
  }
}

// Leaves in sh[0][threadIdx.x] the sum of every lane's s for this column: s is stored in
// sh[threadIdx.y][threadIdx.x], then a fixed tree over the lanes (the same order every run).
template <typename A>
__device__ __forceinline__ void sum_over_lanes(A (&sh)[kLanes][kCols], A s) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  sh[ty][tx] = s;
  __syncthreads();
  for (int w = kLanes / 2; w > 0; w >>= 1) {
    if (ty < w) sh[ty][tx] += sh[ty + w][tx];
    __syncthreads();
  }
}

// Block (32, 8): 32 adjacent columns (coalesced), 8 lanes splitting the r rows, then a tree
// over the lanes. Blocks stride over column tiles (x) and outer indices (y).
template <typename T, typename O>
__global__ void sum_cols_kernel(const T* x, O* out, int64_t outer, int64_t r, int64_t inner,
                                double divisor) {
  using A = acc_of_t<T>;
  __shared__ A sh[kLanes][kCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    for (int64_t k0 = static_cast<int64_t>(blockIdx.x) * kCols; k0 < inner;
         k0 += static_cast<int64_t>(gridDim.x) * kCols) {
      const int64_t k = k0 + tx;
      A s = 0;
      if (k < inner)
        for (int64_t i = ty; i < r; i += kLanes) s += load_acc(x, (o * r + i) * inner + k);
      sum_over_lanes(sh, s);
      if (ty == 0 && k < inner) store_rounded(out, o * inner + k, finish(sh[0][tx], divisor));
      __syncthreads();
    }
  }
}

// The first stage of a split column sum: block (x, y, z) sums its 32 columns over the z-th
// chunk of `chunk` rows into partial[(o * chunks + z) * inner + k], in the accumulation type.
template <typename T>
__global__ void partial_cols_kernel(const T* x, acc_of_t<T>* partial, int64_t outer, int64_t r,
                                    int64_t inner, int64_t chunk) {
  using A = acc_of_t<T>;
  __shared__ A sh[kLanes][kCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = blockIdx.z, chunks = gridDim.z;
  const int64_t begin = c * chunk, end = begin + chunk < r ? begin + chunk : r;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    for (int64_t k0 = static_cast<int64_t>(blockIdx.x) * kCols; k0 < inner;
         k0 += static_cast<int64_t>(gridDim.x) * kCols) {
      const int64_t k = k0 + tx;
      A s = 0;
      if (k < inner)
        for (int64_t i = begin + ty; i < end; i += kLanes)
          s += load_acc(x, (o * r + i) * inner + k);
      sum_over_lanes(sh, s);
      if (ty == 0 && k < inner) partial[(o * chunks + c) * inner + k] = sh[0][tx];
      __syncthreads();
    }
  }
}

// Column sums with few column tiles and many rows (a (4096, 768) bias gradient: 24 tiles) are
// split in two stages: chunks of rows give partial sums (enough blocks to fill the GPU), then
// the column kernel adds the partials. The chunking depends on the shape only, so the order of
// the additions, and the result, is the same on every run.
template <typename T, typename O>
bool run_split(const void* src, void* out, int64_t outer, int64_t r, int64_t inner,
               double divisor) {
  using A = acc_of_t<T>;
  constexpr int64_t kMinChunk = 128, kTargetBlocks = 1024;
  const int64_t tiles = (inner + kCols - 1) / kCols;
  const int64_t base = outer * tiles;
  if (base >= kTargetBlocks / 2 || r < 2 * kMinChunk || outer > 65535 || tiles > 65535)
    return false;
  int64_t chunks = (kTargetBlocks + base - 1) / base;
  const int64_t max_chunks = (r + kMinChunk - 1) / kMinChunk;
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks > 1024) chunks = 1024;
  if (chunks < 2) return false;
  const int64_t chunk = (r + chunks - 1) / chunks;
  chunks = (r + chunk - 1) / chunk;  // no empty chunk
  int device = 0;
  cudaGetDevice(&device);
  const size_t bytes = static_cast<size_t>(outer * chunks * inner) * sizeof(A);
  A* partial = static_cast<A*>(allocate(bytes, device));
  partial_cols_kernel<T><<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(outer),
                                static_cast<unsigned>(chunks)),
                           dim3(kCols, kLanes), 0, current_stream()>>>(
      static_cast<const T*>(src), partial, outer, r, inner, chunk);
  sum_cols_kernel<A, O>
      <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(outer)), dim3(kCols, kLanes), 0,
         current_stream()>>>(partial, static_cast<O*>(out), outer, chunks, inner, divisor);
  release(partial, bytes, device);  // stream-ordered: reused only by later work on the stream
  return true;
}

template <typename T, typename O>
void run(const void* src, void* out, int64_t outer, int64_t r, int64_t inner, double divisor) {
  const T* x = static_cast<const T*>(src);
  O* o = static_cast<O*>(out);
  if (inner == 1) {
    const unsigned grid = static_cast<unsigned>(outer > 65535 * 4 ? 65535 * 4 : outer);
    sum_rows_kernel<T, O><<<grid, kThreads, 0, current_stream()>>>(x, o, outer, r, divisor);
  } else if (!run_split<T, O>(src, out, outer, r, inner, divisor)) {
    const int64_t tiles = (inner + kCols - 1) / kCols;
    const dim3 grid(static_cast<unsigned>(tiles > 65535 ? 65535 : tiles),
                    static_cast<unsigned>(outer > 65535 ? 65535 : outer));
    sum_cols_kernel<T, O>
        <<<grid, dim3(kCols, kLanes), 0, current_stream()>>>(x, o, outer, r, inner, divisor);
  }
}

template <typename T>
__global__ void add_kernel(const T* x, const T* y, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_rounded(out, i, load_acc(x, i) + load_acc(y, i));
}

template <typename T>
void add(const void* x, const void* y, void* out, int64_t n) {
  add_kernel<T><<<grid_for(n), 256, 0, current_stream()>>>(
      static_cast<const T*>(x), static_cast<const T*>(y), static_cast<T*>(out), n);
}

}  // namespace

void launch_add(const void* x, const void* y, void* out, Scalar type, int64_t n) {
  if (n == 0) return;
  switch (type) {
    case Scalar::f64:
      add<double>(x, y, out, n);
      break;
    case Scalar::f32:
      add<float>(x, y, out, n);
      break;
    case Scalar::f16:
      add<__half>(x, y, out, n);
      break;
    case Scalar::bf16:
      add<__nv_bfloat16>(x, y, out, n);
      break;
    default:
      break;  // gradients are floating
  }
  check_kernel_launch("add_gradients");
}

void launch_sum(const void* src, Scalar type, void* out, Scalar out_type, int64_t outer, int64_t r,
                int64_t inner, double divisor) {
  if (outer * inner == 0) return;
  switch (type) {
    case Scalar::f64:
      run<double, double>(src, out, outer, r, inner, divisor);
      break;
    case Scalar::f32:
      run<float, float>(src, out, outer, r, inner, divisor);
      break;
    case Scalar::f16:
      run<__half, __half>(src, out, outer, r, inner, divisor);
      break;
    case Scalar::bf16:
      run<__nv_bfloat16, __nv_bfloat16>(src, out, outer, r, inner, divisor);
      break;
    case Scalar::i64:
      run<long long, long long>(src, out, outer, r, inner, 0);
      break;
    case Scalar::i32:
      run<int, long long>(src, out, outer, r, inner, 0);
      break;
    case Scalar::u8:
    case Scalar::b8:
      run<unsigned char, long long>(src, out, outer, r, inner, 0);
      break;
    case Scalar::i8:
      run<signed char, long long>(src, out, outer, r, inner, 0);
      break;
  }
  (void)out_type;  // i64 for integer inputs, the input's type for floats (checked by the caller)
  check_kernel_launch("sum");
}

}  // namespace mantissa::cuda::detail
