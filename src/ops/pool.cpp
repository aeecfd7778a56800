// max_pool2d, avg_pool2d, adaptive_avg_pool2d: forward and backward side by side.
// Every (n, c) plane is independent, so planes are split across threads and each gradient
// scatter stays inside its plane (race-free). Values are computed in A = double for f64 and
// float otherwise (f16/bf16 are widened once and the result rounded once, RNE).
#include "mantissa/ops/pool.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/dispatch.h"
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

// The dtype the loops run in.
DType acc_dtype(DType dt) { return dt == kFloat64 ? kFloat64 : kFloat32; }

Tensor load(const Tensor& t) { return t.detach().to(acc_dtype(t.dtype())).contiguous(); }

template <typename F>
void for_each_plane(const PoolDims& d, F&& f) {
  const int64_t work = d.planes * d.h * d.w;
#pragma omp parallel for schedule(static) if (work > kernels::kParallelGrain && d.planes > 1)
  for (int64_t p = 0; p < d.planes; ++p) f(p);
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

template <typename A>
void max_forward(const PoolDims& d, Size2 k, Size2 s, Size2 pad, Size2 dil, const A* x, A* y,
                 int64_t* arg) {
  const auto rows = tap_ranges(d.oh, k[0], s[0], pad[0], dil[0], d.h);
  const auto cols = tap_ranges(d.ow, k[1], s[1], pad[1], dil[1], d.w);
  for_each_plane(d, [&](int64_t p) {
    const A* xp = x + p * d.h * d.w;
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        A best = -std::numeric_limits<A>::infinity();
        int64_t best_i = -1;
        for (int64_t ky = rows[oy].lo; ky < rows[oy].hi; ++ky) {
          const int64_t iy = oy * s[0] - pad[0] + ky * dil[0];
          for (int64_t kx = cols[ox].lo; kx < cols[ox].hi; ++kx) {
            const int64_t i = iy * d.w + ox * s[1] - pad[1] + kx * dil[1];
            const A v = xp[i];
            // Strictly greater keeps the first maximum; NaN wins and stays.
            if (best_i < 0 || v > best || (v != v && best == best)) {
              best = v;
              best_i = i;
            }
          }
        }
        const int64_t o = (p * d.oh + oy) * d.ow + ox;
        y[o] = best;
        arg[o] = best_i;
      }
  });
}

template <typename A>
void max_backward(const PoolDims& d, const A* gy, const int64_t* arg, A* gx) {
  for_each_plane(d, [&](int64_t p) {
    A* gp = gx + p * d.h * d.w;
    const int64_t base = p * d.oh * d.ow;
    for (int64_t o = 0; o < d.oh * d.ow; ++o)
      if (arg[base + o] >= 0) gp[arg[base + o]] += gy[base + o];  // -1: window saw only padding
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
template <typename A>
void avg_forward(const PoolDims& d, const std::vector<Span>& rows, const std::vector<Span>& cols,
                 const A* x, A* y) {
  for_each_plane(d, [&](int64_t p) {
    const A* xp = x + p * d.h * d.w;
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const Span& r = rows[oy];
        const Span& c = cols[ox];
        A sum = 0;
        for (int64_t iy = r.lo; iy < r.hi; ++iy)
          for (int64_t ix = c.lo; ix < c.hi; ++ix) sum += xp[iy * d.w + ix];
        y[(p * d.oh + oy) * d.ow + ox] = sum / static_cast<A>(r.count * c.count);
      }
  });
}

template <typename A>
void avg_backward(const PoolDims& d, const std::vector<Span>& rows, const std::vector<Span>& cols,
                  const A* gy, A* gx) {
  for_each_plane(d, [&](int64_t p) {
    A* gp = gx + p * d.h * d.w;
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox) {
        const Span& r = rows[oy];
        const Span& c = cols[ox];
        const A g = gy[(p * d.oh + oy) * d.ow + ox] / static_cast<A>(r.count * c.count);
        for (int64_t iy = r.lo; iy < r.hi; ++iy)
          for (int64_t ix = c.lo; ix < c.hi; ++ix) gp[iy * d.w + ix] += g;
      }
  });
}

// Runs f<A>(args...) with A = double for a f64 tensor and float otherwise.
template <typename F>
void dispatch_acc(DType acc, F&& f) {
  if (acc == kFloat64) {
    f(double{});
  } else {
    f(float{});
  }
}

// Shared forward/backward of the two average pools, given their windows.
Tensor avg_pool_impl(const char* node_name, const Tensor& input, const PoolDims& d,
                     std::shared_ptr<const std::vector<Span>> rows,
                     std::shared_ptr<const std::vector<Span>> cols) {
  const DType dt = input.dtype(), acc = acc_dtype(dt);
  const Tensor x = load(input);
  Tensor y = empty(out_shape(input, d), acc);
  dispatch_acc(acc, [&](auto tag) {
    using A = decltype(tag);
    avg_forward<A>(d, *rows, *cols, x.data<A>(), y.data<A>());
  });
  Tensor out = y.to(dt);
  if (!autograd::needs_grad(input)) return out;
  return autograd::record(out, {input}, node_name,
                          [d, rows, cols, shape = input.shape(), dt, acc](const Tensor& grad) {
                            const Tensor g = load(grad.to(dt));
                            Tensor gx = zeros(shape, acc);
                            dispatch_acc(acc, [&](auto tag) {
                              using A = decltype(tag);
                              avg_backward<A>(d, *rows, *cols, g.data<A>(), gx.data<A>());
                            });
                            return std::vector<Tensor>{gx.to(dt)};
                          });
}

}  // namespace

Tensor max_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride, Size2 padding,
                  Size2 dilation) {
  MANTISSA_AUTOCAST("max_pool2d", max_pool2d, input, kernel_size, stride, padding, dilation);
  stride = resolve_stride(stride, kernel_size);
  const PoolDims d = plan("max_pool2d", input, kernel_size, stride, padding, dilation);
  const DType dt = input.dtype(), acc = acc_dtype(dt);
  const Tensor x = load(input);
  Tensor y = empty(out_shape(input, d), acc);
  auto arg = std::make_shared<std::vector<int64_t>>(y.numel());
  dispatch_acc(acc, [&](auto tag) {
    using A = decltype(tag);
    max_forward<A>(d, kernel_size, stride, padding, dilation, x.data<A>(), y.data<A>(),
                   arg->data());
  });
  // The maximum is one of the inputs, so rounding back to f16/bf16 is exact.
  Tensor out = y.to(dt);
  if (!autograd::needs_grad(input)) return out;
  return autograd::record(out, {input}, "MaxPool2DBackward",
                          [d, arg, shape = input.shape(), dt, acc](const Tensor& grad) {
                            const Tensor g = load(grad.to(dt));
                            Tensor gx = zeros(shape, acc);
                            dispatch_acc(acc, [&](auto tag) {
                              using A = decltype(tag);
                              max_backward<A>(d, g.data<A>(), arg->data(), gx.data<A>());
                            });
                            return std::vector<Tensor>{gx.to(dt)};
                          });
}

Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride, Size2 padding,
                  bool count_include_pad) {
  MANTISSA_AUTOCAST("avg_pool2d", avg_pool2d, input, kernel_size, stride, padding,
                    count_include_pad);
  stride = resolve_stride(stride, kernel_size);
  const PoolDims d = plan("avg_pool2d", input, kernel_size, stride, padding, {1, 1});
  auto rows = std::make_shared<std::vector<Span>>();
  auto cols = std::make_shared<std::vector<Span>>();
  for (int64_t o = 0; o < d.oh; ++o)
    rows->push_back(avg_span(o, kernel_size[0], stride[0], padding[0], d.h, count_include_pad));
  for (int64_t o = 0; o < d.ow; ++o)
    cols->push_back(avg_span(o, kernel_size[1], stride[1], padding[1], d.w, count_include_pad));
  return avg_pool_impl("AvgPool2DBackward", input, d, rows, cols);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size) {
  MANTISSA_AUTOCAST("adaptive_avg_pool2d", adaptive_avg_pool2d, input, output_size);
  check_input("adaptive_avg_pool2d", input);
  MANTISSA_CHECK(output_size[0] >= 1 && output_size[1] >= 1, "adaptive_avg_pool2d",
                 "output_size ({}, {}) must be positive", output_size[0], output_size[1]);
  MANTISSA_CHECK(input.size(2) >= 1 && input.size(3) >= 1, "adaptive_avg_pool2d",
                 "input {} has an empty spatial dimension", shape_str(input.shape()));
  const PoolDims d{input.size(0) * input.size(1), input.size(2), input.size(3), output_size[0],
                   output_size[1]};
  auto rows = std::make_shared<std::vector<Span>>();
  auto cols = std::make_shared<std::vector<Span>>();
  for (int64_t o = 0; o < d.oh; ++o) rows->push_back(adaptive_span(o, d.oh, d.h));
  for (int64_t o = 0; o < d.ow; ++o) cols->push_back(adaptive_span(o, d.ow, d.w));
  return avg_pool_impl("AdaptiveAvgPool2DBackward", input, d, rows, cols);
}

}  // namespace mantissa
