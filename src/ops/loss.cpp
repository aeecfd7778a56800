// Losses: cross_entropy (fused log_softmax + nll), nll_loss, mse_loss.
// Per-row work runs in parallel; reductions add fixed-size chunk partials in a fixed order,
// so a loss is bit-identical for any thread count.
#include "mantissa/ops/loss.h"
#include "mantissa/core/op_profiler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "core/dtype_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "kernels/cpu/elementwise/vec_math.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/cuda_graph.h"

namespace mantissa {
namespace {

constexpr int64_t kSumChunk = 1 << 14;

// Sum of term(i) for i in [0, n): chunk partials in parallel, then added in chunk order.
template <typename A, typename F>
A deterministic_sum(int64_t n, F&& term) {
  const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<A> partial(static_cast<size_t>(chunks), A(0));
#pragma omp parallel for schedule(static) if (n > kernels::kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kSumChunk);
    A s = 0;
    for (int64_t i = c * kSumChunk; i < end; ++i) s += term(i);
    partial[c] = s;
  }
  A s = 0;
  for (A p : partial) s += p;
  return s;
}

// ---------------------------------------------------------------------------------------
// Class-index losses (cross_entropy, nll_loss)
// ---------------------------------------------------------------------------------------

// Validated (N, C) view of a class-index loss call; shared with backward.
struct ClassTargets {
  int64_t n = 0, c = 0;
  bool batched = true;  // input (N, C); false for (C) with a 0-dim target
  std::vector<int64_t> target;
  int64_t count = 0;  // targets that are not ignore_index
};

ClassTargets check_class_targets(const Tensor& input, const Tensor& target,
                                 const CrossEntropyOptions& o, const char* name) {
  MANTISSA_CHECK(input.is_floating_point(), name, "input must be floating point, got {}",
                 input.dtype().name());
  MANTISSA_CHECK(input.dim() == 1 || input.dim() == 2, name,
                 "input must have shape (N, C) or (C), got {}", shape_str(input.shape()));
  MANTISSA_CHECK(target.dtype().is_integral(), name,
                 "target must hold integer class indices (int64), got dtype {}",
                 target.dtype().name());
  ClassTargets ct;
  ct.batched = input.dim() == 2;
  ct.n = ct.batched ? input.size(0) : 1;
  ct.c = input.size(-1);
  const Shape want = ct.batched ? Shape{ct.n} : Shape{};
  MANTISSA_CHECK(target.shape() == want, name,
                 "target shape {} does not match input shape {} (expected target shape {})",
                 shape_str(target.shape()), shape_str(input.shape()), shape_str(want));
  if (target.is_cuda() && cuda::is_current_stream_capturing()) {
    // Inside a CUDA graph capture the targets' values are not known yet (each replay brings its
    // own): the GPU counts the non-ignored ones, and a target out of range makes the loss NaN.
    ct.count = -1;
    return ct;
  }
  // Checked on the host (a GPU target is copied down: one synchronisation per call).
  ct.target = target.cpu().to(kInt64).to_vector<int64_t>();
  for (int64_t t : ct.target) {
    if (t == o.ignore_index) continue;
    MANTISSA_CHECK(t >= 0 && t < ct.c, name,
                   "target {} is out of bounds for {} classes (expected 0 <= target < {} or "
                   "ignore_index {})",
                   t, ct.c, ct.c, o.ignore_index);
    ++ct.count;
  }
  return ct;
}

// Applies the reduction to per-row losses; mean divides by the non-ignored count, so a batch
// whose targets are all ignored gives 0/0 = NaN, as PyTorch does.
template <typename T, typename A>
Tensor reduce_rows(const std::vector<A>& rows, const ClassTargets& ct, Reduction r, DType dt) {
  if (r == Reduction::kNone) {
    Tensor out = empty(ct.batched ? Shape{ct.n} : Shape{}, dt);
    T* p = out.data<T>();
    for (int64_t i = 0; i < ct.n; ++i) p[i] = kernels::store<T>(rows[i]);
    return out;
  }
  A s = deterministic_sum<A>(ct.n, [&](int64_t i) { return rows[i]; });
  if (r == Reduction::kMean) s /= static_cast<A>(ct.count);
  Tensor out = empty({}, dt);
  *out.data<T>() = kernels::store<T>(s);
  return out;
}

// The gradient scale of row i from the upstream gradient (0-dim for mean/sum, (N) for none).
template <typename A>
struct RowScale {
  const A* per_row = nullptr;
  A all = 0;
  A operator()(int64_t i) const { return per_row ? per_row[i] : all; }
};

template <typename T>
std::vector<kernels::acc_t<T>> upstream(const Tensor& grad) {
  using A = kernels::acc_t<T>;
  const std::vector<double> g = grad.to_vector<double>();
  return std::vector<A>(g.begin(), g.end());
}

// Fused forward: per row, lse = max + log(sum exp(x - max)); nll = lse - x[t]; with label
// smoothing eps the row loss is (1-eps)*nll + eps/C * sum_c(lse - x_c), where the sum is
// accumulated as sum_c(max - x_c) + C*log(sum) (all terms >= 0: no cancellation).
template <typename T>
void cross_entropy_rows(const T* x, const ClassTargets& ct, const CrossEntropyOptions& o,
                        kernels::acc_t<T>* loss, double* lse_out) {
  using A = kernels::acc_t<T>;
  const int64_t C = ct.c;
  const A eps = static_cast<A>(o.label_smoothing);
#pragma omp parallel for schedule(static) if (ct.n * C > kernels::kParallelGrain && ct.n > 1)
  for (int64_t i = 0; i < ct.n; ++i) {
    const int64_t t = ct.target[i];
    if (t == o.ignore_index) {
      loss[i] = 0;
      lse_out[i] = 0;
      continue;
    }
    const T* xr = x + i * C;
    A m = -std::numeric_limits<A>::infinity();
    // The row's maximum; a NaN stays (it propagates to the row's loss).
    if constexpr (std::is_same_v<A, float>) {
      alignas(64) float xb[kernels::kBlock];
      for (int64_t b = 0; b < C && m == m; b += kernels::kBlock) {
        const int64_t c = std::min(kernels::kBlock, C - b);
        const float v = kernels::vm::max_f32(kernels::load_block(xr + b, 1, c, xb), c);
        m = (v > m || v != v) ? v : m;
      }
    } else {
      for (int64_t k = 0; k < C; ++k) {
        const A v = kernels::load(xr[k]);
        m = (v > m || v != v) ? v : m;
      }
    }
    A s = 0, dev = 0;
    if constexpr (std::is_same_v<A, float>) {
      // fp32 rows: vectorised exp(x - m) and its sum, kBlock classes at a time (fixed order).
      alignas(64) float xb[kernels::kBlock], eb[kernels::kBlock];
      for (int64_t b = 0; b < C; b += kernels::kBlock) {
        const int64_t c = std::min(kernels::kBlock, C - b);
        const float* xs = kernels::load_block(xr + b, 1, c, xb);
        s += kernels::vm::exp_shift_sum_f32(xs, m, eb, c);
        // The deviations serve label smoothing only (a serial sum: skipped without it).
        if (eps != A(0))
          for (int64_t k = 0; k < c; ++k) dev += m - xs[k];
      }
    } else {
      for (int64_t k = 0; k < C; ++k) {
        const A d = m - kernels::load(xr[k]);
        s += std::exp(-d);
        dev += d;
      }
    }
    const A log_s = std::log(s);
    const A lse = m + log_s;
    const A nll = lse - kernels::load(xr[t]);
    loss[i] = eps == A(0) ? nll
                          : (A(1) - eps) * nll +
                                eps / static_cast<A>(C) * (dev + static_cast<A>(C) * log_s);
    lse_out[i] = static_cast<double>(lse);
  }
}

// Backward: dx[i, c] = scale_i * (softmax(x_i)_c - (1-eps)*[c == t_i] - eps/C); zero rows for
// ignored targets. Softmax is recomputed from the saved logits and per-row lse.
template <typename T>
void cross_entropy_backward(const T* x, const ClassTargets& ct, const CrossEntropyOptions& o,
                            const std::vector<double>& lse, RowScale<kernels::acc_t<T>> scale,
                            T* dx) {
  using A = kernels::acc_t<T>;
  const int64_t C = ct.c;
  const A eps = static_cast<A>(o.label_smoothing);
  const A off = eps / static_cast<A>(C);
#pragma omp parallel for schedule(static) if (ct.n * C > kernels::kParallelGrain && ct.n > 1)
  for (int64_t i = 0; i < ct.n; ++i) {
    const int64_t t = ct.target[i];
    T* dr = dx + i * C;
    if (t == o.ignore_index) {
      for (int64_t k = 0; k < C; ++k) dr[k] = kernels::store<T>(A(0));
      continue;
    }
    const T* xr = x + i * C;
    const A l = static_cast<A>(lse[i]);
    const A s = scale(i);
    if constexpr (std::is_same_v<A, float>) {
      alignas(64) float xb[kernels::kBlock], pb[kernels::kBlock];
      for (int64_t b = 0; b < C; b += kernels::kBlock) {
        const int64_t c = std::min(kernels::kBlock, C - b);
        const float* xs = kernels::load_block(xr + b, 1, c, xb);
        kernels::vm::exp_shift_sum_f32(xs, l, pb, c);
        for (int64_t k = 0; k < c; ++k) {
          const A target_mass = (b + k == t ? A(1) - eps : A(0)) + off;
          pb[k] = s * (pb[k] - target_mass);
        }
        // One bulk rounding per block for fp16/bf16 (the bits of a rounding per element).
        if constexpr (kernels::kIsNarrowFloat<T>)
          kernels::store_narrow(pb, dr + b, c);
        else
          std::copy(pb, pb + c, dr + b);
      }
    } else {
      for (int64_t k = 0; k < C; ++k) {
        const A p = std::exp(kernels::load(xr[k]) - l);
        const A target_mass = (k == t ? A(1) - eps : A(0)) + off;
        dr[k] = kernels::store<T>(s * (p - target_mass));
      }
    }
  }
}

template <typename T>
RowScale<kernels::acc_t<T>> make_scale(const std::vector<kernels::acc_t<T>>& g,
                                       const ClassTargets& ct, Reduction r) {
  using A = kernels::acc_t<T>;
  RowScale<A> rs;
  if (r == Reduction::kNone) {
    rs.per_row = g.data();
  } else {
    rs.all = g[0];
    if (r == Reduction::kMean) rs.all /= static_cast<A>(ct.count);
  }
  return rs;
}

}  // namespace

Reduction reduction_from_string(std::string_view s) {
  if (s == "none") return Reduction::kNone;
  if (s == "mean") return Reduction::kMean;
  if (s == "sum") return Reduction::kSum;
  fail("reduction", "unknown reduction '{}' (valid: none, mean, sum)", s);
}

// Whether CPU autocast would widen these fp16/bf16 logits to fp32 for cross_entropy (its fp32
// policy), which the CPU kernel then does as it reads them (see cross_entropy).
bool widens_in_kernel(const Tensor& input, const Tensor& target) {
  return amp::detail::cpu_autocast_active() && !autograd::in_backward() && !input.is_cuda() &&
         !target.is_cuda() && (input.dtype() == kBFloat16 || input.dtype() == kFloat16);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  MANTISSA_PROFILE_OP("loss");
  // Under CPU autocast the fp32 policy would copy fp16/bf16 logits to fp32 and round their
  // gradient back in that cast's backward. The kernel computes in fp32 from either dtype, so it
  // reads the logits as they are and writes the gradient in their dtype: the same fp32 loss and
  // the same rounded gradient, without two fp32 copies of a (rows, classes) tensor.
  const bool widen = widens_in_kernel(input, target);
  std::optional<amp::detail::SuspendAutocast> suspend;
  if (widen) {
    if (amp::detail::t_policy_trace != nullptr)
      amp::detail::t_policy_trace->emplace_back("cross_entropy");
    suspend.emplace();
  } else {
    MANTISSA_AUTOCAST("cross_entropy", cross_entropy, input, target, o);
  }
  constexpr const char* kName = "cross_entropy";
  MANTISSA_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0, kName,
                 "label_smoothing must be in [0, 1], got {}", o.label_smoothing);
  auto ct = std::make_shared<const ClassTargets>(check_class_targets(input, target, o, kName));
  if (input.is_cuda() || target.is_cuda()) {
    const int red = static_cast<int>(o.reduction);  // 0 none, 1 mean, 2 sum
    auto f = std::make_shared<const kernels::gpu::CrossEntropyForward>(
        kernels::gpu_kernels().cross_entropy_forward(input, target, o.ignore_index,
                                                     o.label_smoothing, red, ct->count));
    if (!autograd::needs_grad(input)) return f->loss;
    return autograd::record(
        f->loss, {input}, {f->x}, "CrossEntropyBackward",
        [f, o, red, count = ct->count](const Tensor& grad) {
          return std::vector<Tensor>{kernels::gpu_kernels().cross_entropy_backward(
              *f, grad, o.ignore_index, o.label_smoothing, red, count)};
        });
  }
  Tensor x = input.detach().contiguous();
  auto lse = std::make_shared<std::vector<double>>(ct->n);
  Tensor out = kernels::dispatch_floating(input.dtype(), kName, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<kernels::acc_t<T>> rows(ct->n);
    cross_entropy_rows<T>(x.data<T>(), *ct, o, rows.data(), lse->data());
    // Widened: the fp32 rows stored as the fp32 loss (what the rows of a widened copy give).
    if (widen) return reduce_rows<float>(rows, *ct, o.reduction, kFloat32);
    return reduce_rows<T>(rows, *ct, o.reduction, input.dtype());
  });
  if (!autograd::needs_grad(input)) return out;
  return autograd::record(
      out, {input}, {x}, "CrossEntropyBackward", [x, ct, lse, o, widen](const Tensor& grad) {
        // Widened: computed in fp32 from the logits as they are and rounded once to their dtype,
        // as the widening cast's backward rounds the fp32 gradient.
        const DType dt = widen ? x.dtype() : grad.dtype();
        Tensor xs = x.to(dt).contiguous();
        Tensor dx = empty(xs.shape(), dt);
        kernels::dispatch_floating(dt, kName, [&](auto tag) {
          using T = typename decltype(tag)::type;
          const auto g = upstream<T>(grad);
          cross_entropy_backward<T>(xs.data<T>(), *ct, o, *lse, make_scale<T>(g, *ct, o.reduction),
                                    dx.data<T>());
        });
        return std::vector<Tensor>{dx};
      });
}

// label_smoothing is not part of nll_loss (as in PyTorch, whose nll_loss has no such
// argument): options.label_smoothing is ignored here.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const CrossEntropyOptions& o) {
  MANTISSA_PROFILE_OP("loss");
  MANTISSA_AUTOCAST("nll_loss", nll_loss, log_probs, target, o);
  constexpr const char* kName = "nll_loss";
  auto ct = std::make_shared<const ClassTargets>(check_class_targets(log_probs, target, o, kName));
  Tensor x = log_probs.detach().contiguous();
  Tensor out = kernels::dispatch_floating(log_probs.dtype(), kName, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::acc_t<T>;
    const T* px = x.data<T>();
    std::vector<A> rows(ct->n);
    for (int64_t i = 0; i < ct->n; ++i) {
      const int64_t t = ct->target[i];
      rows[i] = t == o.ignore_index ? A(0) : -kernels::load(px[i * ct->c + t]);
    }
    return reduce_rows<T>(rows, *ct, o.reduction, log_probs.dtype());
  });
  const Shape in_shape = log_probs.shape();
  auto backward = [in_shape, ct, o](const Tensor& grad) {
    // Only the target entries get a gradient: -scale_i.
    Tensor dx = zeros(in_shape, grad.dtype());
    kernels::dispatch_floating(grad.dtype(), kName, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const auto g = upstream<T>(grad);
      const auto scale = make_scale<T>(g, *ct, o.reduction);
      T* pd = dx.data<T>();
      for (int64_t i = 0; i < ct->n; ++i) {
        const int64_t t = ct->target[i];
        if (t != o.ignore_index) pd[i * ct->c + t] = kernels::store<T>(-scale(i));
      }
    });
    return std::vector<Tensor>{dx};
  };
  return autograd::record(out, {log_probs}, "NllLossBackward", backward);
}

// ---------------------------------------------------------------------------------------
// mse_loss
// ---------------------------------------------------------------------------------------

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  MANTISSA_PROFILE_OP("loss");
  MANTISSA_AUTOCAST("mse_loss", mse_loss, input, target, reduction);
  constexpr const char* kName = "mse_loss";
  MANTISSA_CHECK(input.shape() == target.shape(), kName,
                 "input shape {} and target shape {} must match (no broadcasting)",
                 shape_str(input.shape()), shape_str(target.shape()));
  MANTISSA_CHECK(input.is_floating_point() && target.is_floating_point(), kName,
                 "input and target must be floating point, got {} and {}", input.dtype().name(),
                 target.dtype().name());
  // Mixed dtypes meet in the promoted dtype; the casts are graph nodes, so each gradient
  // flows back in its own input's dtype.
  const DType dt = promote_types(input.dtype(), target.dtype());
  const Tensor a = input.to(dt), b = target.to(dt);
  Tensor xa = a.detach().contiguous(), xb = b.detach().contiguous();
  const int64_t n = xa.numel();
  Tensor out = kernels::dispatch_floating(dt, kName, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = kernels::acc_t<T>;
    const T* pa = xa.data<T>();
    const T* pb = xb.data<T>();
    if (reduction == Reduction::kNone) {
      Tensor o = empty(xa.shape(), dt);
      T* po = o.data<T>();
#pragma omp parallel for schedule(static) if (n > kernels::kParallelGrain)
      for (int64_t i = 0; i < n; ++i) {
        const A d = kernels::load(pa[i]) - kernels::load(pb[i]);
        po[i] = kernels::store<T>(d * d);
      }
      return o;
    }
    A s = deterministic_sum<A>(n, [&](int64_t i) {
      const A d = kernels::load(pa[i]) - kernels::load(pb[i]);
      return d * d;
    });
    if (reduction == Reduction::kMean) s /= static_cast<A>(n);  // n == 0 gives NaN (PyTorch)
    Tensor o = empty({}, dt);
    *o.data<T>() = kernels::store<T>(s);
    return o;
  });
  const bool want_a = a.requires_grad(), want_b = b.requires_grad();
  if (!autograd::needs_grad(a, b)) return out;
  return autograd::record(out, {a, b}, {xa, xb}, "MseLossBackward",
                          [xa, xb, reduction, want_a, want_b](const Tensor& grad) {
                            // d/da = 2 (a - b) * g * (1/n for mean); d/db is its negation.
                            const DType gd = grad.dtype();
                            Tensor ga = xa.to(gd).contiguous(), gb = xb.to(gd).contiguous();
                            Tensor g = grad.contiguous();
                            const int64_t n = ga.numel();
                            Tensor da = want_a ? empty(ga.shape(), gd) : Tensor();
                            Tensor db = want_b ? empty(ga.shape(), gd) : Tensor();
                            kernels::dispatch_floating(gd, kName, [&](auto tag) {
                              using T = typename decltype(tag)::type;
                              using A = kernels::acc_t<T>;
                              const T* pa = ga.data<T>();
                              const T* pb = gb.data<T>();
                              const T* pg = g.data<T>();
                              const bool per_elem = reduction == Reduction::kNone;
                              A all = per_elem ? A(0) : kernels::load(pg[0]);
                              if (reduction == Reduction::kMean) all /= static_cast<A>(n);
                              T* pda = want_a ? da.data<T>() : nullptr;
                              T* pdb = want_b ? db.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (n > kernels::kParallelGrain)
                              for (int64_t i = 0; i < n; ++i) {
                                const A s = per_elem ? kernels::load(pg[i]) : all;
                                const A v =
                                    A(2) * (kernels::load(pa[i]) - kernels::load(pb[i])) * s;
                                if (pda) pda[i] = kernels::store<T>(v);
                                if (pdb) pdb[i] = kernels::store<T>(-v);
                              }
                            });
                            return std::vector<Tensor>{da, db};
                          });
}

}  // namespace mantissa
