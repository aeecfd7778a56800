// layer_norm: forward and a full backward (input, weight, bias). The input is viewed as
// (rows, n) with the normalised dimensions flattened into n; each row is independent.
// Statistics and all arithmetic are in acc_t (fp32, or double for f64); outputs are rounded
// once. mean and rstd are saved per row so backward needs no second reduction over x.
#include "mantissa/ops/layer_norm.h"

#include <cmath>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/dispatch.h"
#include "mantissa/autograd/node.h"

namespace mantissa {
namespace {

template <typename T>
using acc = kernels::acc_t<T>;

// y = (x - mean) * rstd * w + b per row; w/b may be null.
template <typename T>
void ln_forward(const T* x, const T* w, const T* b, T* y, acc<T>* mean, acc<T>* rstd, int64_t rows,
                int64_t n, double eps) {
  using A = acc<T>;
#pragma omp parallel for schedule(static) if (rows * n > kernels::kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    // Two passes (mean, then centred sum of squares): no cancellation for large means.
    A s = 0;
    for (int64_t j = 0; j < n; ++j) s += kernels::load(xr[j]);
    const A m = s / A(n);
    A v = 0;
    for (int64_t j = 0; j < n; ++j) {
      const A d = kernels::load(xr[j]) - m;
      v += d * d;
    }
    const A rs = A(1) / std::sqrt(v / A(n) + A(eps));
    mean[r] = m;
    rstd[r] = rs;
    for (int64_t j = 0; j < n; ++j) {
      A o = (kernels::load(xr[j]) - m) * rs;
      if (w) o *= kernels::load(w[j]);
      if (b) o += kernels::load(b[j]);
      yr[j] = kernels::store<T>(o);
    }
  }
}

// With xhat = (x - mean) * rstd and gh = g * w:
//   dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat))
//   dw = sum_rows g * xhat,  db = sum_rows g
// dx is parallel over rows; dw/db over columns, each column summed over rows in order, so the
// result does not depend on the thread count.
template <typename T>
void ln_backward(const T* g, const T* x, const T* w, const acc<T>* mean, const acc<T>* rstd, T* dx,
                 T* dw, T* db, int64_t rows, int64_t n) {
  using A = acc<T>;
  const bool par = rows * n > kernels::kParallelGrain;
  if (dx) {
#pragma omp parallel for schedule(static) if (par && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
      const T* gr = g + r * n;
      const T* xr = x + r * n;
      const A m = mean[r], rs = rstd[r];
      A sg = 0, sgx = 0;
      for (int64_t j = 0; j < n; ++j) {
        const A gh = kernels::load(gr[j]) * (w ? kernels::load(w[j]) : A(1));
        sg += gh;
        sgx += gh * (kernels::load(xr[j]) - m) * rs;
      }
      sg /= A(n);
      sgx /= A(n);
      T* dr = dx + r * n;
      for (int64_t j = 0; j < n; ++j) {
        const A gh = kernels::load(gr[j]) * (w ? kernels::load(w[j]) : A(1));
        const A xh = (kernels::load(xr[j]) - m) * rs;
        dr[j] = kernels::store<T>(rs * (gh - sg - xh * sgx));
      }
    }
  }
  if (dw || db) {
    constexpr int64_t kCols = 64;
    const int64_t blocks = (n + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (par && blocks > 1)
    for (int64_t bi = 0; bi < blocks; ++bi) {
      const int64_t j0 = bi * kCols, j1 = std::min(n, j0 + kCols);
      A sw[kCols] = {}, sb[kCols] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const T* gr = g + r * n;
        const T* xr = x + r * n;
        const A m = mean[r], rs = rstd[r];
        for (int64_t j = j0; j < j1; ++j) {
          const A gv = kernels::load(gr[j]);
          sw[j - j0] += gv * (kernels::load(xr[j]) - m) * rs;
          sb[j - j0] += gv;
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        if (dw) dw[j] = kernels::store<T>(sw[j - j0]);
        if (db) db[j] = kernels::store<T>(sb[j - j0]);
      }
    }
  }
}

void check_args(const Tensor& x, const std::vector<int64_t>& ns, const Tensor& w, const Tensor& b,
                double eps) {
  constexpr const char* kOp = "layer_norm";
  MANTISSA_CHECK(x.is_floating_point() && !x.dtype().is_float8(), kOp,
                 "expected a floating input (float64, float32, float16, bfloat16), got {}",
                 x.dtype().name());
  MANTISSA_CHECK(!ns.empty(), kOp, "normalized_shape must not be empty");
  const int64_t k = static_cast<int64_t>(ns.size());
  bool tail_matches = x.dim() >= k;
  for (int64_t i = 0; tail_matches && i < k; ++i) tail_matches = x.size(x.dim() - k + i) == ns[i];
  MANTISSA_CHECK(tail_matches, kOp,
                 "normalized_shape {} does not match the trailing dimensions of input of shape {}",
                 shape_str(Shape(ns.begin(), ns.end())), shape_str(x.shape()));
  for (const Tensor* p : {&w, &b}) {
    if (!p->defined()) continue;
    MANTISSA_CHECK(p->shape() == Shape(ns.begin(), ns.end()), kOp,
                   "{} of shape {} does not match normalized_shape {}", p == &w ? "weight" : "bias",
                   shape_str(p->shape()), shape_str(Shape(ns.begin(), ns.end())));
    MANTISSA_CHECK(p->is_floating_point() && !p->dtype().is_float8(), kOp,
                   "{} must be floating, got {}", p == &w ? "weight" : "bias", p->dtype().name());
  }
  MANTISSA_CHECK(std::isfinite(eps) && eps >= 0, kOp, "eps must be finite and >= 0, got {}", eps);
}

}  // namespace

Tensor layer_norm(const Tensor& input, const std::vector<int64_t>& normalized_shape,
                  const Tensor& weight, const Tensor& bias, double eps) {
  MANTISSA_AUTOCAST("layer_norm", layer_norm, input, normalized_shape, weight, bias, eps);
  check_args(input, normalized_shape, weight, bias, eps);
  const DType dt = input.dtype();
  // A weight of another dtype joins the input's (a recorded cast, so its gradient returns in
  // its own dtype).
  const Tensor w = weight.defined() ? weight.to(dt) : Tensor();
  const Tensor b = bias.defined() ? bias.to(dt) : Tensor();
  int64_t n = 1;
  for (int64_t s : normalized_shape) n *= s;
  const int64_t rows = n == 0 ? 0 : input.numel() / n;
  const DType stat_dt = dt == kFloat64 ? kFloat64 : kFloat32;
  Tensor x = input.detach().contiguous();
  Tensor wc = w.defined() ? w.detach().contiguous() : Tensor();
  Tensor bc = b.defined() ? b.detach().contiguous() : Tensor();
  Tensor y = empty(input.shape(), dt);
  Tensor mean = empty({rows}, stat_dt), rstd = empty({rows}, stat_dt);
  kernels::dispatch_floating(dt, "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc<T>;
    ln_forward<T>(x.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                  bc.defined() ? bc.data<T>() : nullptr, y.data<T>(), mean.data<A>(),
                  rstd.data<A>(), rows, n, eps);
  });
  if (!autograd::needs_grad({&input, &w, &b})) return y;
  const bool need_x = input.requires_grad(), need_w = w.defined() && w.requires_grad(),
             need_b = b.defined() && b.requires_grad();
  const Shape bias_shape = b.defined() ? b.shape() : Shape{};
  return autograd::record(
      y, {input, w, b}, "LayerNormBackward",
      [x, wc, mean, rstd, rows, n, need_x, need_w, need_b, bias_shape](const Tensor& grad) {
        // Backward computes in the forward dtype (the engine hands the gradient in it).
        const DType dt = x.dtype();
        Tensor g = grad.to(dt).contiguous();
        Tensor dx = need_x ? empty(x.shape(), dt) : Tensor();
        Tensor dw = need_w ? empty(wc.shape(), dt) : Tensor();
        Tensor db = need_w || need_b ? empty({n}, dt) : Tensor();
        kernels::dispatch_floating(dt, "layer_norm", [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc<T>;
          ln_backward<T>(g.data<T>(), x.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                         mean.data<A>(), rstd.data<A>(), dx.defined() ? dx.data<T>() : nullptr,
                         dw.defined() ? dw.data<T>() : nullptr,
                         db.defined() ? db.data<T>() : nullptr, rows, n);
        });
        if (need_b) db = db.view(bias_shape);
        return std::vector<Tensor>{dx, dw, need_b ? db : Tensor()};
      });
}

}  // namespace mantissa
