// batch_norm kernels (batch_norm_kernels.h).
#include "kernels/cuda/batch_norm/batch_norm_kernels.h"
#include "kernels/cuda/common/device_util.cuh"

namespace mantissa::cuda::detail {
namespace {

// The j-th of channel ch's n * s values, j = sample * s + position.
__device__ __forceinline__ int64_t channel_index(int64_t j, int64_t ch, int64_t c, int64_t s) {
  return ((j / s) * c + ch) * s + j % s;
}

template <Scalar S>
__global__ void bn_stats_kernel(const elem_t<S>* x, int64_t n, int64_t c, int64_t s, double* mean,
                                double* var) {
  const int64_t m = n * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < m; j += kBlock)
      sum += static_cast<double>(load<S>(x, channel_index(j, ch, c, s)));
    const double mu = block_sum(sum) / static_cast<double>(m);
    double q = 0;
    for (int64_t j = threadIdx.x; j < m; j += kBlock) {
      const double d = static_cast<double>(load<S>(x, channel_index(j, ch, c, s))) - mu;
      q += d * d;
    }
    q = block_sum(q);
    if (threadIdx.x == 0) {
      mean[ch] = mu;
      var[ch] = q / static_cast<double>(m);
    }
  }
}

__global__ void bn_finalize_kernel(const double* mean, const double* var, const double* w,
                                   const double* b, int64_t c, double eps, double* invstd,
                                   double* scale, double* shift, double* rm, double* rv,
                                   double momentum, double unbias) {
  for (int64_t ch = global_thread(); ch < c; ch += grid_threads()) {
    const double is = 1.0 / sqrt(var[ch] + eps);
    const double sc = (w ? w[ch] : 1.0) * is;
    invstd[ch] = is;
    scale[ch] = sc;
    shift[ch] = (b ? b[ch] : 0.0) - mean[ch] * sc;
    if (rm) rm[ch] = (1 - momentum) * rm[ch] + momentum * mean[ch];
    if (rv) rv[ch] = (1 - momentum) * rv[ch] + momentum * var[ch] * unbias;
  }
}

template <Scalar S>
__global__ void bn_apply_kernel(const elem_t<S>* x, elem_t<S>* y, int64_t c, int64_t s,
                                int64_t total, const double* scale, const double* shift) {
  using A = acc_t<S>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t ch = (i / s) % c;
    store<S>(y, i, load<S>(x, i) * static_cast<A>(scale[ch]) + static_cast<A>(shift[ch]));
  }
}

template <Scalar S>
__global__ void bn_backward_sums_kernel(const elem_t<S>* g, const elem_t<S>* x, int64_t n,
                                        int64_t c, int64_t s, const double* mean,
                                        const double* invstd, const double* w, bool training,
                                        double* sum_g, double* sum_gxhat, double* a, double* b,
                                        double* c0) {
  const int64_t m = n * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const double mu = mean[ch], is = invstd[ch];
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < m; j += kBlock) {
      const int64_t i = channel_index(j, ch, c, s);
      const double gv = static_cast<double>(load<S>(g, i));
      sg += gv;
      sgx += gv * ((static_cast<double>(load<S>(x, i)) - mu) * is);
    }
    sg = block_sum(sg);
    sgx = block_sum(sgx);
    if (threadIdx.x == 0) {
      sum_g[ch] = sg;
      sum_gxhat[ch] = sgx;
      const double k = (w ? w[ch] : 1.0) * is;
      a[ch] = k;
      b[ch] = training ? -k * is * (sgx / static_cast<double>(m)) : 0.0;
      c0[ch] = training ? -k * (sg / static_cast<double>(m)) : 0.0;
    }
  }
}

template <Scalar S>
__global__ void bn_backward_dx_kernel(const elem_t<S>* g, const elem_t<S>* x, elem_t<S>* dx,
                                      int64_t c, int64_t s, int64_t total, const double* mean,
                                      const double* a, const double* b, const double* c0) {
  using A = acc_t<S>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t ch = (i / s) % c;
    const A v = static_cast<A>(a[ch]) * load<S>(g, i) +
                static_cast<A>(b[ch]) * (load<S>(x, i) - static_cast<A>(mean[ch])) +
                static_cast<A>(c0[ch]);
    store<S>(dx, i, v);
  }
}

}  // namespace

void launch_batch_norm_stats(const void* x, Scalar type, int64_t n, int64_t c, int64_t s,
                             double* mean, double* var) {
  if (c == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    bn_stats_kernel<S><<<row_grid(c), kBlock, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), n, c, s, mean, var);
  })
  check_kernel_launch("batch_norm_stats");
}

void launch_batch_norm_finalize(const double* mean, const double* var, const double* w,
                                const double* b, int64_t c, double eps, double* invstd,
                                double* scale, double* shift, double* rm, double* rv,
                                double momentum, double unbias) {
  if (c == 0) return;
  bn_finalize_kernel<<<grid_for(c), 256, 0, current_stream()>>>(
      mean, var, w, b, c, eps, invstd, scale, shift, rm, rv, momentum, unbias);
  check_kernel_launch("batch_norm_finalize");
}

void launch_batch_norm_apply(const void* x, void* y, Scalar type, int64_t n, int64_t c, int64_t s,
                             const double* scale, const double* shift) {
  const int64_t total = n * c * s;
  if (total == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    bn_apply_kernel<S><<<grid_for(total), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), static_cast<elem_t<S>*>(y), c, s, total, scale, shift);
  })
  check_kernel_launch("batch_norm_apply");
}

void launch_batch_norm_backward_sums(const void* g, const void* x, Scalar type, int64_t n,
                                     int64_t c, int64_t s, const double* mean, const double* invstd,
                                     const double* w, bool training, double* sum_g,
                                     double* sum_gxhat, double* a, double* b, double* c0) {
  if (c == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    bn_backward_sums_kernel<S><<<row_grid(c), kBlock, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(g), static_cast<const elem_t<S>*>(x), n, c, s, mean, invstd,
        w, training, sum_g, sum_gxhat, a, b, c0);
  })
  check_kernel_launch("batch_norm_backward_sums");
}

void launch_batch_norm_backward_dx(const void* g, const void* x, void* dx, Scalar type, int64_t n,
                                   int64_t c, int64_t s, const double* mean, const double* a,
                                   const double* b, const double* c0) {
  const int64_t total = n * c * s;
  if (total == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    bn_backward_dx_kernel<S><<<grid_for(total), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(g), static_cast<const elem_t<S>*>(x),
        static_cast<elem_t<S>*>(dx), c, s, total, mean, a, b, c0);
  })
  check_kernel_launch("batch_norm_backward_dx");
}

}  // namespace mantissa::cuda::detail
