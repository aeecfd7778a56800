// Pooling kernels (pool_kernels.h).
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/pool/pool_kernels.h"

namespace mantissa::cuda::detail {
namespace {

// ---- max ----

template <Scalar S>
__global__ void max_forward_kernel(const elem_t<S>* x, elem_t<S>* y, int32_t* arg, PoolShape s,
                                   int64_t total) {
  using A = acc_t<S>;
  for (int64_t o = global_thread(); o < total; o += grid_threads()) {
    const int64_t ox = o % s.ow, oy = (o / s.ow) % s.oh, p = o / (s.ow * s.oh);
    const elem_t<S>* xp = x + p * s.h * s.w;
    A best = static_cast<A>(__int_as_float(0xff800000));  // -inf
    int64_t best_i = -1;
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
      if (iy < 0 || iy >= s.h) continue;
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        const int64_t ix = ox * s.sw - s.pw + kx * s.dw;
        if (ix < 0 || ix >= s.w) continue;
        const int64_t i = iy * s.w + ix;
        const A v = load<S>(xp, i);
        // Strictly greater keeps the first maximum; a NaN wins and stays (as the CPU loop).
        if (best_i < 0 || v > best || (v != v && best == best)) {
          best = v;
          best_i = i;
        }
      }
    }
    store<S>(y, o, best);
    arg[o] = static_cast<int32_t>(best_i);
  }
}

template <Scalar S>
__global__ void max_backward_kernel(const elem_t<S>* gy, const int32_t* arg, elem_t<S>* dx,
                                    PoolShape s, int64_t total) {
  using A = acc_t<S>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t ix = i % s.w, iy = (i / s.w) % s.h, p = i / (s.w * s.h);
    const int64_t in_plane = iy * s.w + ix;
    const int64_t base = p * s.oh * s.ow;
    A acc = 0;
    // Descending taps visit the covering outputs in ascending order (the CPU's order).
    for (int64_t ky = s.kh - 1; ky >= 0; --ky) {
      const int64_t ty = iy + s.ph - ky * s.dh;  // = oy * sh
      if (ty < 0 || ty % s.sh != 0 || ty / s.sh >= s.oh) continue;
      const int64_t oy = ty / s.sh;
      for (int64_t kx = s.kw - 1; kx >= 0; --kx) {
        const int64_t tx = ix + s.pw - kx * s.dw;  // = ox * sw
        if (tx < 0 || tx % s.sw != 0 || tx / s.sw >= s.ow) continue;
        const int64_t o = base + oy * s.ow + tx / s.sw;
        if (arg[o] == in_plane) acc += load<S>(gy, o);
      }
    }
    store<S>(dx, i, acc);
  }
}

// ---- average ----

struct Span {
  int64_t lo, hi, count;
};

// avg_pool2d's window of output o along one axis (as the CPU's avg_span), or the adaptive one.
__device__ __forceinline__ Span span_of(int64_t o, int64_t k, int64_t st, int64_t pad, int64_t in,
                                        int64_t out, bool include_pad, bool adaptive) {
  if (adaptive) {
    const int64_t lo = (o * in) / out, hi = ((o + 1) * in + out - 1) / out;
    return {lo, hi, hi - lo};
  }
  int64_t lo = o * st - pad;
  int64_t hi = lo + k < in + pad ? lo + k : in + pad;
  const int64_t padded = hi - lo;
  lo = lo > 0 ? lo : 0;
  hi = hi < in ? hi : in;
  return {lo, hi, include_pad ? padded : hi - lo};
}

// The outputs along one axis whose windows may cover input index i: [first, last].
__device__ __forceinline__ void covering(int64_t i, int64_t k, int64_t st, int64_t pad, int64_t in,
                                         int64_t out, bool adaptive, int64_t* first,
                                         int64_t* last) {
  if (adaptive) {
    *first = (i * out) / in;
    *last = ((i + 1) * out) / in;
  } else {
    const int64_t t = i + pad - k + 1;
    *first = t <= 0 ? 0 : (t + st - 1) / st;
    *last = (i + pad) / st;
  }
  if (*last > out - 1) *last = out - 1;
}

template <Scalar S>
__global__ void avg_forward_kernel(const elem_t<S>* x, elem_t<S>* y, PoolShape s, int64_t total,
                                   bool include_pad, bool adaptive) {
  using A = acc_t<S>;
  for (int64_t o = global_thread(); o < total; o += grid_threads()) {
    const int64_t ox = o % s.ow, oy = (o / s.ow) % s.oh, p = o / (s.ow * s.oh);
    const Span r = span_of(oy, s.kh, s.sh, s.ph, s.h, s.oh, include_pad, adaptive);
    const Span c = span_of(ox, s.kw, s.sw, s.pw, s.w, s.ow, include_pad, adaptive);
    const elem_t<S>* xp = x + p * s.h * s.w;
    A sum = 0;
    for (int64_t iy = r.lo; iy < r.hi; ++iy)
      for (int64_t ix = c.lo; ix < c.hi; ++ix) sum += load<S>(xp, iy * s.w + ix);
    store<S>(y, o, sum / static_cast<A>(r.count * c.count));
  }
}

template <Scalar S>
__global__ void avg_backward_kernel(const elem_t<S>* gy, elem_t<S>* dx, PoolShape s, int64_t total,
                                    bool include_pad, bool adaptive) {
  using A = acc_t<S>;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t ix = i % s.w, iy = (i / s.w) % s.h, p = i / (s.w * s.h);
    const int64_t base = p * s.oh * s.ow;
    int64_t y0, y1, x0, x1;
    covering(iy, s.kh, s.sh, s.ph, s.h, s.oh, adaptive, &y0, &y1);
    covering(ix, s.kw, s.sw, s.pw, s.w, s.ow, adaptive, &x0, &x1);
    A acc = 0;
    for (int64_t oy = y0; oy <= y1; ++oy) {
      const Span r = span_of(oy, s.kh, s.sh, s.ph, s.h, s.oh, include_pad, adaptive);
      if (iy < r.lo || iy >= r.hi) continue;
      for (int64_t ox = x0; ox <= x1; ++ox) {
        const Span c = span_of(ox, s.kw, s.sw, s.pw, s.w, s.ow, include_pad, adaptive);
        if (ix < c.lo || ix >= c.hi) continue;
        acc += load<S>(gy, base + oy * s.ow + ox) / static_cast<A>(r.count * c.count);
      }
    }
    store<S>(dx, i, acc);
  }
}

}  // namespace

void launch_max_pool_forward(const void* x, void* y, int32_t* arg, Scalar type,
                             const PoolShape& s) {
  const int64_t total = s.planes * s.oh * s.ow;
  if (total == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    max_forward_kernel<S><<<grid_for(total), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), static_cast<elem_t<S>*>(y), arg, s, total);
  })
  check_kernel_launch("max_pool2d");
}

void launch_max_pool_backward(const void* gy, const int32_t* arg, void* dx, Scalar type,
                              const PoolShape& s) {
  const int64_t total = s.planes * s.h * s.w;
  if (total == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    max_backward_kernel<S><<<grid_for(total), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(gy), arg, static_cast<elem_t<S>*>(dx), s, total);
  })
  check_kernel_launch("max_pool2d_backward");
}

void launch_avg_pool_forward(const void* x, void* y, Scalar type, const PoolShape& s,
                             bool count_include_pad, bool adaptive) {
  const int64_t total = s.planes * s.oh * s.ow;
  if (total == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    avg_forward_kernel<S><<<grid_for(total), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), static_cast<elem_t<S>*>(y), s, total, count_include_pad,
        adaptive);
  })
  check_kernel_launch("avg_pool2d");
}

void launch_avg_pool_backward(const void* gy, void* dx, Scalar type, const PoolShape& s,
                              bool count_include_pad, bool adaptive) {
  const int64_t total = s.planes * s.h * s.w;
  if (total == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    avg_backward_kernel<S><<<grid_for(total), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(gy), static_cast<elem_t<S>*>(dx), s, total, count_include_pad,
        adaptive);
  })
  check_kernel_launch("avg_pool2d_backward");
}

}  // namespace mantissa::cuda::detail
