// max_pool2d, avg_pool2d, adaptive_avg_pool2d: forward and backward side by side.
// Every (n, c) plane is independent, so planes are split across threads (a fixed static
// partition) and each gradient scatter stays inside its plane (race-free). Loops read and write
// the tensor's own dtype and compute in A = double for f64 and float otherwise (f16/bf16 are
// widened per element and each result rounded once, RNE): no conversion passes. The 2x2
// stride-2 max and average pools of CNNs run the SIMD kernels of kernels/cpu/pool/pool_kernels.h.
#include "mantissa/ops/pool.h"
#include "mantissa/core/op_profiler.h"

#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/dtype_dispatch.h"
#include "kernels/cpu/pool/pool_kernels.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"

namespace mantissa {
namespace {

struct PoolDims {
  int64_t planes, h, w, oh, ow;
};

void check_input(const char* op, const Tensor& input) {
  MANTISSA_CHECK(input.dim() == 4, op, "expected a 4-D input [N, C, H, W], got shape {}",
                 shape_str(input.shape()));
  MANTISSA_CHECK(input.is_floating_point() && !input.dtype().is_float8(), op,
                 "expected float64, float32, float16 or bfloat16 input, got {}",
                 input.dtype().name());
}

// PyTorch's default stride is the kernel size.
Size2 resolve_stride(Size2 stride, Size2 kernel) {
  return stride[0] == 0 && stride[1] == 0 ? kernel : stride;
}

PoolDims plan(const char* op, const Tensor& input, Size2 kernel, Size2 stride, Size2 padding,
              Size2 dilation) {
  check_input(op, input);
  for (int i = 0; i < 2; ++i) {
    MANTISSA_CHECK(kernel[i] >= 1 && stride[i] >= 1 && dilation[i] >= 1, op,
                   "kernel_size ({}, {}), stride ({}, {}) and dilation ({}, {}) must be positive",
                   kernel[0], kernel[1], stride[0], stride[1], dilation[0], dilation[1]);
    MANTISSA_CHECK(padding[i] >= 0 && 2 * padding[i] <= kernel[i], op,
                   "padding ({}, {}) must be non-negative and at most half of kernel_size ({}, {})",
                   padding[0], padding[1], kernel[0], kernel[1]);
  }
  PoolDims d{input.size(0) * input.size(1), input.size(2), input.size(3), 0, 0};
  const int64_t span_h = dilation[0] * (kernel[0] - 1) + 1;
  const int64_t span_w = dilation[1] * (kernel[1] - 1) + 1;
  MANTISSA_CHECK(d.h + 2 * padding[0] >= span_h && d.w + 2 * padding[1] >= span_w, op,
                 "input {} with padding ({}, {}) is smaller than the window ({} x {})",
                 shape_str(input.shape()), padding[0], padding[1], span_h, span_w);
  d.oh = (d.h + 2 * padding[0] - span_h) / stride[0] + 1;
  d.ow = (d.w + 2 * padding[1] - span_w) / stride[1] + 1;
  return d;
}

Shape out_shape(const Tensor& input, const PoolDims& d) {
  return {input.size(0), input.size(1), d.oh, d.ow};
}

cuda::detail::PoolShape gpu_shape(const PoolDims& d, Size2 k, Size2 s, Size2 pad, Size2 dil) {
  return {d.planes, d.h, d.w, d.oh, d.ow, k[0], k[1], s[0], s[1], pad[0], pad[1], dil[0], dil[1]};
}

// The GPU's average pools (adaptive or avg_pool2d's windows), forward and backward.
Tensor avg_pool_gpu(const char* node_name, const Tensor& input, const cuda::detail::PoolShape& ps,
                    bool include_pad, bool adaptive) {
  Tensor out = kernels::gpu_kernels().avg_pool2d_forward(input, ps, include_pad, adaptive);
  if (!autograd::needs_grad(input)) return out;
  return autograd::record(
      out, {input}, node_name,
      [ps, include_pad, adaptive, shape = input.shape(), dt = input.dtype()](const Tensor& grad) {
        return std::vector<Tensor>{
            kernels::gpu_kernels().avg_pool2d_backward(grad, shape, dt, ps, include_pad, adaptive)};
      });
}

// The input as a contiguous tensor of its own dtype: loops read f16/bf16 directly.
Tensor load(const Tensor& t) { return t.detach().contiguous(); }

template <typename F>
void for_each_plane(const PoolDims& d, F&& f) {
  const int64_t work = d.planes * d.h * d.w;
#pragma omp parallel for schedule(static) if (work > kernels::kParallelGrain && d.planes > 1)
  for (int64_t p = 0; p < d.planes; ++p) f(p);
}

// Runs f(TypeTag<T>) for the input's storage type (f64, f32, f16, bf16).
template <typename F>
void dispatch_float(DType dt, F&& f) {
  kernels::dispatch_floating(dt, "pool", std::forward<F>(f));
}

// A per-thread fp32 (f64 for double) plane the backward scatters into before rounding once into
// the gradient's dtype; windows may overlap, so f16/bf16 must not accumulate in storage.
template <typename A>
A* zeroed_plane(int64_t n) {
  thread_local std::vector<A> buf;
  buf.assign(static_cast<size_t>(n), A(0));
  return buf.data();
}

template <typename T>
void store_plane(const kernels::acc_t<T>* acc, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = kernels::store<T>(acc[i]);
}

// ---- max ----

// The kernel taps k in [lo, hi) whose input index o * s - pad + k * dil lies in [0, in): computed
// once per output row/column, so the inner loops carry no bounds checks.
struct TapRange {
  int64_t lo, hi;
};
std::vector<TapRange> tap_ranges(int64_t out, int64_t k, int64_t s, int64_t pad, int64_t dil,
                                 int64_t in) {
  std::vector<TapRange> r(out);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t base = o * s - pad;
    int64_t lo = 0, hi = k;
    while (lo < k && base + lo * dil < 0) ++lo;
    while (hi > lo && base + (hi - 1) * dil >= in) --hi;
    r[o] = {lo, hi};
  }
  return r;
}

// The general max pool; arg holds each output's input index within its plane (-1: the window
// saw only padding).
template <typename T>
void max_forward(const PoolDims& d, Size2 k, Size2 s, Size2 pad, Size2 dil, const T* x, T* y,
                 int32_t* arg) {
  using A = kernels::acc_t<T>;
  const auto rows = tap_ranges(d.oh, k[0], s[0], pad[0], dil[0], d.h);
  const auto cols = tap_ranges(d.ow, k[1], s[1], pad[1], dil[1], d.w);
  for_each_plane(d, [&](int64_t p) {
    const T* xp = x + p * d.h * d.w;
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        A best = -std::numeric_limits<A>::infinity();
        int64_t best_i = -1;
        for (int64_t ky = rows[oy].lo; ky < rows[oy].hi; ++ky) {
          const int64_t iy = oy * s[0] - pad[0] + ky * dil[0];
          for (int64_t kx = cols[ox].lo; kx < cols[ox].hi; ++kx) {
            const int64_t i = iy * d.w + ox * s[1] - pad[1] + kx * dil[1];
            const A v = kernels::load(xp[i]);
            // Strictly greater keeps the first maximum; NaN wins and stays.
            if (best_i < 0 || v > best || (v != v && best == best)) {
              best = v;
              best_i = i;
            }
          }
        }
        const int64_t o = (p * d.oh + oy) * d.ow + ox;
        y[o] = kernels::store<T>(best);  // exact: the maximum is one of the inputs
        arg[o] = static_cast<int32_t>(best_i);
      }
  });
}

template <typename T>
void max_backward(const PoolDims& d, const T* gy, const int32_t* arg, T* gx) {
  using A = kernels::acc_t<T>;
  for_each_plane(d, [&](int64_t p) {
    A* acc = zeroed_plane<A>(d.h * d.w);
    const int64_t base = p * d.oh * d.ow;
    for (int64_t o = 0; o < d.oh * d.ow; ++o)
      if (arg[base + o] >= 0) acc[arg[base + o]] += kernels::load(gy[base + o]);
    store_plane(acc, gx + p * d.h * d.w, d.h * d.w);
  });
}

// The 2x2 stride-2 unpadded pools on f32/bf16 (and f16 for max) run the SIMD kernels of
// pool_kernels.h.
bool use_2x2_kernel(DType dt, Size2 k, Size2 s, Size2 pad, Size2 dil, bool max = false) {
  return (dt == kFloat32 || dt == kBFloat16 || (max && dt == kFloat16)) && k == Size2{2, 2} &&
         s == Size2{2, 2} && pad == Size2{0, 0} && dil == Size2{1, 1};
}

// Calls f(B{}) with B = float for f32 and uint16_t (the bits) for bf16 and f16: the 2x2
// kernels' types.
template <typename F>
void with_bits(DType dt, F&& f) {
  if (dt == kBFloat16 || dt == kFloat16) {
    f(uint16_t{});
  } else {
    f(float{});
  }
}

template <typename B>
B* bits_of(const Tensor& t) {
  return static_cast<B*>(t.data_ptr());
}

// The 2x2 kernel for bit type B: its f32 or its bf16 variant.
template <typename B, typename F32, typename Bf16>
auto kernel_for(F32 f32, Bf16 bf16) {
  if constexpr (std::is_same_v<B, float>) {
    return f32;
  } else {
    return bf16;
  }
}

void max_2x2_forward(const PoolDims& d, const Tensor& x, Tensor& y, Tensor& tap) {
  const auto& k = kernels::cpu::pool_2x2_kernels();
  uint8_t* tp = tap.data<uint8_t>();
  const bool f16 = x.dtype() == kFloat16;
  with_bits(x.dtype(), [&](auto tag) {
    using B = decltype(tag);
    const B* xp = bits_of<const B>(x);
    B* yp = bits_of<B>(y);
    const auto kernel =
        kernel_for<B>(k.max_forward_f32, f16 ? k.max_forward_f16 : k.max_forward_bf16);
    for_each_plane(d, [&](int64_t p) {
      const B* xi = xp + p * d.h * d.w;
      B* yo = yp + p * d.oh * d.ow;
      uint8_t* to = tp + p * d.oh * d.ow;
      kernel(xi, yo, to, d.h, d.w);
    });
  });
}

void max_2x2_backward(const PoolDims& d, const Tensor& g, const Tensor& tap, Tensor& gx) {
  const auto& k = kernels::cpu::pool_2x2_kernels();
  const uint8_t* tp = tap.data<uint8_t>();
  const bool f16 = g.dtype() == kFloat16;
  with_bits(g.dtype(), [&](auto tag) {
    using B = decltype(tag);
    const B* gp = bits_of<const B>(g);
    B* xp = bits_of<B>(gx);
    const auto kernel =
        kernel_for<B>(k.max_backward_f32, f16 ? k.max_backward_f16 : k.max_backward_bf16);
    for_each_plane(d, [&](int64_t p) {
      const B* gi = gp + p * d.oh * d.ow;
      const uint8_t* ti = tp + p * d.oh * d.ow;
      B* xo = xp + p * d.h * d.w;
      kernel(gi, ti, xo, d.h, d.w);
    });
  });
}

void avg_2x2_forward(const PoolDims& d, const Tensor& x, Tensor& y) {
  const auto& k = kernels::cpu::pool_2x2_kernels();
  with_bits(x.dtype(), [&](auto tag) {
    using B = decltype(tag);
    const B* xp = bits_of<const B>(x);
    B* yp = bits_of<B>(y);
    for_each_plane(d, [&](int64_t p) {
      kernel_for<B>(k.avg_forward_f32, k.avg_forward_bf16)(xp + p * d.h * d.w, yp + p * d.oh * d.ow,
                                                           d.h, d.w);
    });
  });
}

void avg_2x2_backward(const PoolDims& d, const Tensor& g, Tensor& gx) {
  const auto& k = kernels::cpu::pool_2x2_kernels();
  with_bits(g.dtype(), [&](auto tag) {
    using B = decltype(tag);
    const B* gp = bits_of<const B>(g);
    B* xp = bits_of<B>(gx);
    for_each_plane(d, [&](int64_t p) {
      kernel_for<B>(k.avg_backward_f32, k.avg_backward_bf16)(gp + p * d.oh * d.ow,
                                                             xp + p * d.h * d.w, d.h, d.w);
    });
  });
}

// ---- average ----

// One output's window along one axis: [lo, hi) of real input indices and the divisor's factor.
struct Span {
  int64_t lo, hi, count;
};

Span avg_span(int64_t o, int64_t k, int64_t s, int64_t pad, int64_t in, bool include_pad) {
  int64_t lo = o * s - pad;
  int64_t hi = std::min(lo + k, in + pad);
  const int64_t padded = hi - lo;  // window clipped to the padded input
  lo = std::max<int64_t>(lo, 0);
  hi = std::min(hi, in);
  return {lo, hi, include_pad ? padded : hi - lo};
}

Span adaptive_span(int64_t o, int64_t out, int64_t in) {
  const int64_t lo = (o * in) / out;
  const int64_t hi = ((o + 1) * in + out - 1) / out;  // ceil
  return {lo, hi, hi - lo};
}

// Windows given per output row/column; forward averages, backward spreads evenly.
template <typename T>
void avg_forward(const PoolDims& d, const std::vector<Span>& rows, const std::vector<Span>& cols,
                 const T* x, T* y) {
  using A = kernels::acc_t<T>;
  for_each_plane(d, [&](int64_t p) {
    const T* xp = x + p * d.h * d.w;
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const Span& r = rows[oy];
        const Span& c = cols[ox];
        A sum = 0;
        for (int64_t iy = r.lo; iy < r.hi; ++iy)
          for (int64_t ix = c.lo; ix < c.hi; ++ix) sum += kernels::load(xp[iy * d.w + ix]);
        y[(p * d.oh + oy) * d.ow + ox] = kernels::store<T>(sum / static_cast<A>(r.count * c.count));
      }
  });
}

template <typename T>
void avg_backward(const PoolDims& d, const std::vector<Span>& rows, const std::vector<Span>& cols,
                  const T* gy, T* gx) {
  using A = kernels::acc_t<T>;
  for_each_plane(d, [&](int64_t p) {
    A* acc = zeroed_plane<A>(d.h * d.w);
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const Span& r = rows[oy];
        const Span& c = cols[ox];
        const A g =
            kernels::load(gy[(p * d.oh + oy) * d.ow + ox]) / static_cast<A>(r.count * c.count);
        for (int64_t iy = r.lo; iy < r.hi; ++iy)
          for (int64_t ix = c.lo; ix < c.hi; ++ix) acc[iy * d.w + ix] += g;
      }
    store_plane(acc, gx + p * d.h * d.w, d.h * d.w);
  });
}

// Shared forward/backward of the two average pools, given their windows.
Tensor avg_pool_impl(const char* node_name, const Tensor& input, const PoolDims& d,
                     std::shared_ptr<const std::vector<Span>> rows,
                     std::shared_ptr<const std::vector<Span>> cols) {
  const DType dt = input.dtype();
  const Tensor x = load(input);
  Tensor out = empty(out_shape(input, d), dt);
  dispatch_float(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_forward<T>(d, *rows, *cols, x.data<T>(), out.data<T>());
  });
  if (!autograd::needs_grad(input)) return out;
  return autograd::record(out, {input}, node_name,
                          [d, rows, cols, shape = input.shape(), dt](const Tensor& grad) {
                            const Tensor g = load(grad.to(dt));
                            Tensor gx = empty(shape, dt);
                            dispatch_float(dt, [&](auto tag) {
                              using T = typename decltype(tag)::type;
                              avg_backward<T>(d, *rows, *cols, g.data<T>(), gx.data<T>());
                            });
                            return std::vector<Tensor>{gx};
                          });
}

}  // namespace

Tensor max_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride, Size2 padding,
                  Size2 dilation) {
  MANTISSA_PROFILE_OP("pool");
  MANTISSA_AUTOCAST("max_pool2d", max_pool2d, input, kernel_size, stride, padding, dilation);
  stride = resolve_stride(stride, kernel_size);
  const PoolDims d = plan("max_pool2d", input, kernel_size, stride, padding, dilation);
  const DType dt = input.dtype();
  if (input.is_cuda()) {
    MANTISSA_CHECK(d.h * d.w <= std::numeric_limits<int32_t>::max(), "max_pool2d",
                   "input planes of {} x {} exceed 2^31 elements", d.h, d.w);
    const cuda::detail::PoolShape ps = gpu_shape(d, kernel_size, stride, padding, dilation);
    kernels::gpu::MaxPoolResult r = kernels::gpu_kernels().max_pool2d_forward(input, ps);
    if (!autograd::needs_grad(input)) return r.y;
    return autograd::record(r.y, {input}, "MaxPool2DBackward",
                            [ps, arg = r.arg, shape = input.shape(), dt](const Tensor& grad) {
                              return std::vector<Tensor>{kernels::gpu_kernels().max_pool2d_backward(
                                  grad, arg, shape, dt, ps)};
                            });
  }
  const Tensor x = load(input);
  Tensor out = empty(out_shape(input, d), dt);
  // The winner of each window: its tap (a byte) on the 2x2 path, else its index in the plane.
  const bool fast = use_2x2_kernel(dt, kernel_size, stride, padding, dilation, /*max=*/true);
  Tensor arg;
  if (fast) {
    arg = empty(out.shape(), kUInt8);
    max_2x2_forward(d, x, out, arg);
  } else {
    MANTISSA_CHECK(d.h * d.w <= std::numeric_limits<int32_t>::max(), "max_pool2d",
                   "input planes of {} x {} exceed 2^31 elements", d.h, d.w);
    arg = empty(out.shape(), kInt32);
    dispatch_float(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      max_forward<T>(d, kernel_size, stride, padding, dilation, x.data<T>(), out.data<T>(),
                     arg.data<int32_t>());
    });
  }
  if (!autograd::needs_grad(input)) return out;
  return autograd::record(out, {input}, "MaxPool2DBackward",
                          [d, arg, fast, shape = input.shape(), dt](const Tensor& grad) {
                            const Tensor g = load(grad.to(dt));
                            Tensor gx = empty(shape, dt);
                            if (fast) {
                              max_2x2_backward(d, g, arg, gx);
                              return std::vector<Tensor>{gx};
                            }
                            dispatch_float(dt, [&](auto tag) {
                              using T = typename decltype(tag)::type;
                              max_backward<T>(d, g.data<T>(), arg.data<int32_t>(), gx.data<T>());
                            });
                            return std::vector<Tensor>{gx};
                          });
}

Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride, Size2 padding,
                  bool count_include_pad) {
  MANTISSA_PROFILE_OP("pool");
  MANTISSA_AUTOCAST("avg_pool2d", avg_pool2d, input, kernel_size, stride, padding,
                    count_include_pad);
  stride = resolve_stride(stride, kernel_size);
  const PoolDims d = plan("avg_pool2d", input, kernel_size, stride, padding, {1, 1});
  const DType dt = input.dtype();
  if (input.is_cuda()) {
    return avg_pool_gpu("AvgPool2DBackward", input,
                        gpu_shape(d, kernel_size, stride, padding, {1, 1}), count_include_pad,
                        /*adaptive=*/false);
  }
  if (use_2x2_kernel(dt, kernel_size, stride, padding, {1, 1})) {
    Tensor out = empty(out_shape(input, d), dt);
    avg_2x2_forward(d, load(input), out);
    if (!autograd::needs_grad(input)) return out;
    return autograd::record(out, {input}, "AvgPool2DBackward",
                            [d, shape = input.shape(), dt](const Tensor& grad) {
                              Tensor gx = empty(shape, dt);
                              avg_2x2_backward(d, load(grad.to(dt)), gx);
                              return std::vector<Tensor>{gx};
                            });
  }
  auto rows = std::make_shared<std::vector<Span>>();
  auto cols = std::make_shared<std::vector<Span>>();
  for (int64_t o = 0; o < d.oh; ++o)
    rows->push_back(avg_span(o, kernel_size[0], stride[0], padding[0], d.h, count_include_pad));
  for (int64_t o = 0; o < d.ow; ++o)
    cols->push_back(avg_span(o, kernel_size[1], stride[1], padding[1], d.w, count_include_pad));
  return avg_pool_impl("AvgPool2DBackward", input, d, rows, cols);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size) {
  MANTISSA_PROFILE_OP("pool");
  MANTISSA_AUTOCAST("adaptive_avg_pool2d", adaptive_avg_pool2d, input, output_size);
  check_input("adaptive_avg_pool2d", input);
  MANTISSA_CHECK(output_size[0] >= 1 && output_size[1] >= 1, "adaptive_avg_pool2d",
                 "output_size ({}, {}) must be positive", output_size[0], output_size[1]);
  MANTISSA_CHECK(input.size(2) >= 1 && input.size(3) >= 1, "adaptive_avg_pool2d",
                 "input {} has an empty spatial dimension", shape_str(input.shape()));
  const PoolDims d{input.size(0) * input.size(1), input.size(2), input.size(3), output_size[0],
                   output_size[1]};
  if (input.is_cuda()) {
    return avg_pool_gpu("AdaptiveAvgPool2DBackward", input,
                        gpu_shape(d, {1, 1}, {1, 1}, {0, 0}, {1, 1}), /*include_pad=*/false,
                        /*adaptive=*/true);
  }
  auto rows = std::make_shared<std::vector<Span>>();
  auto cols = std::make_shared<std::vector<Span>>();
  for (int64_t o = 0; o < d.oh; ++o) rows->push_back(adaptive_span(o, d.oh, d.h));
  for (int64_t o = 0; o < d.ow; ++o) cols->push_back(adaptive_span(o, d.ow, d.w));
  return avg_pool_impl("AdaptiveAvgPool2DBackward", input, d, rows, cols);
}

}  // namespace mantissa
