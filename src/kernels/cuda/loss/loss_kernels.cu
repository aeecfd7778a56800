// cross_entropy kernels (loss_kernels.h): one block per row, rows in a block-stride loop.
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/loss/loss_kernels.h"

namespace mantissa::cuda::detail {
namespace {

template <Scalar S>
__global__ void ce_forward_kernel(const elem_t<S>* x, const int64_t* target, int64_t n, int64_t c,
                                  int64_t ignore_index, double eps_d, acc_t<S>* loss,
                                  acc_t<S>* lse_out) {
  using A = acc_t<S>;
  const A eps = static_cast<A>(eps_d);
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t t = target[i];
    if (t == ignore_index) {  // the same for the whole block
      if (threadIdx.x == 0) {
        loss[i] = 0;
        lse_out[i] = 0;
      }
      continue;
    }
    if (t < 0 || t >= c) {  // unchecked targets (a CUDA graph's): NaN, never a wild read
      if (threadIdx.x == 0) {
        loss[i] = static_cast<A>(NAN);
        lse_out[i] = static_cast<A>(NAN);
      }
      continue;
    }
    const elem_t<S>* xr = x + i * c;
    A m = -static_cast<A>(INFINITY);
    for (int64_t k = threadIdx.x; k < c; k += kBlock) m = nan_max(m, load<S>(xr, k));
    m = block_max(m);
    A s = 0, dev = 0;
    for (int64_t k = threadIdx.x; k < c; k += kBlock) {
      const A d = m - load<S>(xr, k);
      s += d_exp(-d);
      dev += d;
    }
    s = block_sum(s);
    dev = block_sum(dev);
    if (threadIdx.x == 0) {
      const A log_s = d_log(s);
      const A lse = m + log_s;
      const A nll = lse - load<S>(xr, t);
      loss[i] = eps == A(0) ? nll
                            : (A(1) - eps) * nll +
                                  eps / static_cast<A>(c) * (dev + static_cast<A>(c) * log_s);
      lse_out[i] = lse;
    }
  }
}

// One block: count = the targets that are not ignore_index, then value[0] /= count.
template <typename A>
__global__ void divide_by_count_kernel(A* value, const int64_t* target, int64_t n,
                                       int64_t ignore_index, A* count_out) {
  long long count = 0;
  for (int64_t i = threadIdx.x; i < n; i += kBlock) count += target[i] != ignore_index;
  count = block_sum(count);
  if (threadIdx.x == 0) {
    const A c = static_cast<A>(count);
    count_out[0] = c;
    value[0] = value[0] / c;
  }
}

template <Scalar S>
__global__ void ce_backward_kernel(const elem_t<S>* x, const int64_t* target, int64_t n, int64_t c,
                                   int64_t ignore_index, double eps_d, const acc_t<S>* lse,
                                   const acc_t<S>* scale, bool per_row, double divisor,
                                   const acc_t<S>* divisor_dev, elem_t<S>* dx) {
  using A = acc_t<S>;
  const A eps = static_cast<A>(eps_d);
  const A off = eps / static_cast<A>(c);
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t t = target[i];
    const elem_t<S>* xr = x + i * c;
    elem_t<S>* dr = dx + i * c;
    if (t == ignore_index) {
      for (int64_t k = threadIdx.x; k < c; k += kBlock) store<S>(dr, k, A(0));
      continue;
    }
    if (t < 0 || t >= c) {
      for (int64_t k = threadIdx.x; k < c; k += kBlock) store<S>(dr, k, static_cast<A>(NAN));
      continue;
    }
    A s = per_row ? scale[i] : scale[0];
    if (!per_row && divisor > 0) s /= static_cast<A>(divisor);
    if (!per_row && divisor_dev != nullptr) s /= divisor_dev[0];
    const A l = lse[i];
    for (int64_t k = threadIdx.x; k < c; k += kBlock) {
      const A p = d_exp(load<S>(xr, k) - l);
      const A target_mass = (k == t ? A(1) - eps : A(0)) + off;
      store<S>(dr, k, s * (p - target_mass));
    }
  }
}

}  // namespace

void launch_cross_entropy_forward(const void* x, Scalar type, const int64_t* target, int64_t n,
                                  int64_t c, int64_t ignore_index, double eps, void* loss,
                                  void* lse) {
  if (n == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    ce_forward_kernel<S><<<row_grid(n), kBlock, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), target, n, c, ignore_index, eps,
        static_cast<acc_t<S>*>(loss), static_cast<acc_t<S>*>(lse));
  })
  check_kernel_launch("cross_entropy");
}

void launch_cross_entropy_backward(const void* x, Scalar type, const int64_t* target, int64_t n,
                                   int64_t c, int64_t ignore_index, double eps, const void* lse,
                                   const void* scale, bool per_row, double divisor,
                                   const void* divisor_dev, void* dx) {
  if (n == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    ce_backward_kernel<S><<<row_grid(n), kBlock, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), target, n, c, ignore_index, eps,
        static_cast<const acc_t<S>*>(lse), static_cast<const acc_t<S>*>(scale), per_row, divisor,
        static_cast<const acc_t<S>*>(divisor_dev), static_cast<elem_t<S>*>(dx));
  })
  check_kernel_launch("cross_entropy_backward");
}

void launch_divide_by_target_count(void* value, Scalar acc_type, const int64_t* target, int64_t n,
                                   int64_t ignore_index, void* count_out) {
  if (acc_type == Scalar::f64) {
    divide_by_count_kernel<double><<<1, kBlock, 0, current_stream()>>>(
        static_cast<double*>(value), target, n, ignore_index, static_cast<double*>(count_out));
  } else {
    divide_by_count_kernel<float><<<1, kBlock, 0, current_stream()>>>(
        static_cast<float*>(value), target, n, ignore_index, static_cast<float*>(count_out));
  }
  check_kernel_launch("cross_entropy (target count)");
}

}  // namespace mantissa::cuda::detail
