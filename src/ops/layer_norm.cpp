// layer_norm: forward and a full backward (input, weight, bias). The input is viewed as
// (rows, n) with the normalised dimensions flattened into n; each row is independent.
// Statistics and all arithmetic are in acc_t (fp32, or double for f64); outputs are rounded
// once. mean and rstd are saved per row so backward needs no second reduction over x.
#include "mantissa/ops/layer_norm.h"
#include "mantissa/core/op_profiler.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/dtype_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "kernels/cpu/norm/layer_norm_rows.h"
#include "kernels/device_check.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"

namespace mantissa {
namespace {

template <typename T>
using acc = kernels::acc_t<T>;

template <typename T>
constexpr bool kIsF32 = std::is_same_v<T, float>;

const kernels::cpu::LnRowKernels& ln_rows() { return kernels::cpu::ln_row_kernels(); }

// n acc_t values rounded once each into a row of T.
template <typename T>
void store_row(const acc<T>* src, T* dst, int64_t n) {
  if constexpr (kernels::kIsNarrowFloat<T>) {
    kernels::store_narrow(src, dst, n);
  } else {
    std::copy(src, src + n, dst);
  }
}

// Sum of n values in kLanes interleaved partial sums combined in a fixed tree: vectorisable,
// and the same order for every row and thread count.
template <typename A>
A lane_sum(const A* v, int64_t n) {
  constexpr int64_t kLanes = 16;
  A part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) part[l] += v[j + l];
  for (int64_t l = 0; j < n; ++j, ++l) part[l] += v[j];
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) part[l] += part[l + w];
  return part[0];
}

// The row buffers of one thread: rows are widened into acc_t in bulk and the arithmetic runs
// over plain arrays, so it vectorises and narrow dtypes convert with the SIMD routines.
template <typename T>
struct RowScratch {
  std::vector<acc<T>> a, b, c;
  explicit RowScratch(int64_t n) : a(n), b(n), c(n) {}
};

// w (or b) widened once per call; ones/zeros when absent.
template <typename T>
std::vector<acc<T>> widened(const T* p, int64_t n, acc<T> fill) {
  std::vector<acc<T>> out(n, fill);
  if (p) {
    const acc<T>* v = kernels::load_block(p, 1, n, out.data());
    if (v != out.data()) std::copy(v, v + n, out.begin());
  }
  return out;
}

// y = (x - mean) * rstd * w + b per row; w/b may be null.
template <typename T>
void ln_forward(const T* x, const T* w, const T* b, T* y, acc<T>* mean, acc<T>* rstd, int64_t rows,
                int64_t n, double eps) {
  using A = acc<T>;
  const std::vector<A> wv = widened(w, n, A(1)), bv = widened(b, n, A(0));
#pragma omp parallel if (rows * n > kernels::kParallelGrain && rows > 1)
  {
    RowScratch<T> s(n);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const A* xr = kernels::load_block(x + r * n, 1, n, s.a.data());
      A* d = s.b.data();
      A* o = s.c.data();
      if constexpr (std::is_same_v<A, float>) {
        // float rows (f32, f16, bf16) run the SIMD row loops; f32 writes y in place.
        float* yr = kIsF32<T> ? reinterpret_cast<float*>(y + r * n) : o;
        ln_rows().forward(xr, wv.data(), bv.data(), yr, d, n, static_cast<float>(eps), &mean[r],
                          &rstd[r]);
        if constexpr (!kIsF32<T>) store_row(o, y + r * n, n);
        continue;
      }
      // Two passes (mean, then centred sum of squares): no cancellation for large means.
      const A m = lane_sum(xr, n) / A(n);
      for (int64_t j = 0; j < n; ++j) d[j] = xr[j] - m;
      for (int64_t j = 0; j < n; ++j) o[j] = d[j] * d[j];
      const A rs = A(1) / std::sqrt(lane_sum(o, n) / A(n) + A(eps));
      mean[r] = m;
      rstd[r] = rs;
      for (int64_t j = 0; j < n; ++j) o[j] = d[j] * rs * wv[j] + bv[j];
      store_row(o, y + r * n, n);
    }
  }
}

// Rows of one partial sum of dw/db: a split that depends only on the shape (at least 8 parts
// for both threads, at most 64 rows so a part's rows are still in cache when summed), so the
// sums do not depend on the thread count.
int64_t wb_rows_per_part(int64_t rows) { return std::clamp<int64_t>(rows / 8, 1, 64); }

// With xhat = (x - mean) * rstd and gh = g * w:
//   dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat))
//   dw = sum_rows g * xhat,  db = sum_rows g
// One pass over the rows computes dx and adds g * xhat and g into the partial sums of the part
// of rows it is in (g and x are read once, not again by a column pass); the parts are added in
// order at the end, so the result does not depend on the thread count.
template <typename T>
void ln_backward(const T* g, const T* x, const T* w, const acc<T>* mean, const acc<T>* rstd, T* dx,
                 T* dw, T* db, int64_t rows, int64_t n) {
  using A = acc<T>;
  const bool wb = dw != nullptr || db != nullptr;
  const int64_t per = wb ? wb_rows_per_part(rows) : 1;
  const int64_t parts = (rows + per - 1) / per;
  // Part p's sums: sw at [2 p n, 2 p n + n), sb right after.
  std::vector<A> sums(wb ? static_cast<size_t>(2 * parts * n) : 0, A(0));
  const std::vector<A> wv = widened(w, n, A(1));
#pragma omp parallel if (rows * n > kernels::kParallelGrain && parts > 1)
  {
    RowScratch<T> s(n);
    std::vector<A> gh(n);
#pragma omp for schedule(static)
    for (int64_t p = 0; p < parts; ++p) {
      A* sw = wb ? sums.data() + 2 * p * n : nullptr;
      A* sb = wb ? sw + n : nullptr;
      for (int64_t r = p * per; r < std::min(rows, (p + 1) * per); ++r) {
        const A* gr = kernels::load_block(g + r * n, 1, n, s.a.data());
        const A* xr = kernels::load_block(x + r * n, 1, n, s.b.data());
        A* xh = s.c.data();
        const A m = mean[r], rs = rstd[r];
        if (dx == nullptr) {
          for (int64_t j = 0; j < n; ++j) xh[j] = (xr[j] - m) * rs;
        } else if constexpr (std::is_same_v<A, float>) {
          // The gradient row goes into the buffer xr came from (f32: straight into dx); gr
          // and xh stay as they are for the sums.
          float* dr = kIsF32<T> ? reinterpret_cast<float*>(dx + r * n) : s.b.data();
          ln_rows().backward(gr, xr, wv.data(), m, rs, dr, gh.data(), xh, n);
          if constexpr (!kIsF32<T>) store_row(dr, dx + r * n, n);
        } else {
          for (int64_t j = 0; j < n; ++j) {
            gh[j] = gr[j] * wv[j];
            xh[j] = (xr[j] - m) * rs;
          }
          const A sg = lane_sum(gh.data(), n) / A(n);
          // gh * xhat into the buffer xr came from (its values are no longer needed).
          A* prod = s.b.data();
          for (int64_t j = 0; j < n; ++j) prod[j] = gh[j] * xh[j];
          const A sgx = lane_sum(prod, n) / A(n);
          for (int64_t j = 0; j < n; ++j) prod[j] = rs * (gh[j] - sg - xh[j] * sgx);
          store_row(prod, dx + r * n, n);
        }
        if (!wb) continue;
        if constexpr (std::is_same_v<A, float>) {
          ln_rows().accumulate_wb(gr, xh, sw, sb, n);
        } else {
          for (int64_t j = 0; j < n; ++j) {
            sw[j] += gr[j] * xh[j];
            sb[j] += gr[j];
          }
        }
      }
    }
  }
  if (!wb) return;
  A* total = sums.data();
  for (int64_t p = 1; p < parts; ++p) {
    const A* part = sums.data() + 2 * p * n;
#pragma omp simd
    for (int64_t j = 0; j < 2 * n; ++j) total[j] += part[j];
  }
  for (int64_t j = 0; j < n; ++j) {
    if (dw) dw[j] = kernels::store<T>(total[j]);
    if (db) db[j] = kernels::store<T>(total[n + j]);
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
  MANTISSA_PROFILE_OP("layer_norm");
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
  const Device dev = input.device();
  Tensor y = empty(input.shape(), dt, dev);
  Tensor mean = empty({rows}, stat_dt, dev), rstd = empty({rows}, stat_dt, dev);
  if (kernels::gpu::any_cuda({&input, &w, &b}))
    kernels::gpu_kernels().layer_norm_forward(x, wc, bc, y, mean, rstd, rows, n, eps);
  else
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
  // The input's gradient reads the weight; all three read the input.
  return autograd::record(
      y, {input, w, b}, {x, need_x ? wc : Tensor()}, "LayerNormBackward",
      [x, wc, mean, rstd, rows, n, need_x, need_w, need_b, bias_shape](const Tensor& grad) {
        // Backward computes in the forward dtype (the engine hands the gradient in it).
        const DType dt = x.dtype();
        Tensor g = grad.to(dt).contiguous();
        const Device dev = x.device();
        Tensor dx = need_x ? empty(x.shape(), dt, dev) : Tensor();
        Tensor dw = need_w ? empty(wc.shape(), dt, dev) : Tensor();
        Tensor db = need_w || need_b ? empty({n}, dt, dev) : Tensor();
        if (x.is_cuda())
          kernels::gpu_kernels().layer_norm_backward(g, x, wc, mean, rstd, dx, dw, db, rows, n);
        else
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
