// clip_grad_norm_ / clip_grad_value_: a deterministic per-gradient norm (double accumulation
// over fixed chunks), PyTorch's two-stage total norm and clip coefficient, and in-place
// elementwise updates of the gradients.
#include "mantissa/nn/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "core/inplace.h"  // map_inplace writes back with copy_unchecked on every build
#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/grad_mode.h"

namespace mantissa::nn::utils {
namespace {

using kernels::acc_t;
using kernels::kBlock;

// Elements per work item. Partial results are per chunk and combined in chunk order, so the
// total does not depend on the number of threads.
constexpr int64_t kChunk = 64 * kBlock;

enum class NormKind { kL1, kL2, kLp, kMax, kMin, kCount };

NormKind kind_of(double p) {
  if (p == std::numeric_limits<double>::infinity()) return NormKind::kMax;
  if (p == -std::numeric_limits<double>::infinity()) return NormKind::kMin;
  if (p == 0.0) return NormKind::kCount;
  if (p == 1.0) return NormKind::kL1;
  if (p == 2.0) return NormKind::kL2;
  return NormKind::kLp;
}

// A partial result: an accumulated value plus a NaN flag (max/min must propagate NaN, which
// std::max/min would drop depending on the argument order).
struct Partial {
  double value;
  bool nan = false;
};

Partial identity(NormKind k) {
  if (k == NormKind::kMax) return {0.0};  // |x| >= 0
  if (k == NormKind::kMin) return {std::numeric_limits<double>::infinity()};
  return {0.0};
}

Partial combine(NormKind k, Partial a, Partial b) {
  Partial r{0.0, a.nan || b.nan};
  if (k == NormKind::kMax) {
    r.value = std::max(a.value, b.value);
  } else if (k == NormKind::kMin) {
    r.value = std::min(a.value, b.value);
  } else {
    r.value = a.value + b.value;
  }
  return r;
}

// sum |x|, sum x^2, sum |x|^p, max |x|, min |x| or count(x != 0) over n contiguous elements.
template <typename T>
Partial partial_of(const T* p, int64_t n, NormKind k, double pw) {
  using A = acc_t<T>;
  alignas(64) A buf[kBlock];
  Partial acc = identity(k);
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const A* v = kernels::load_block(p + b, 1, m, buf);
    double s = identity(k).value;
    int nan = 0;
    switch (k) {
      case NormKind::kL1:
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < m; ++i) s += std::abs(static_cast<double>(v[i]));
        break;
      case NormKind::kL2:
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < m; ++i) s += static_cast<double>(v[i]) * static_cast<double>(v[i]);
        break;
      case NormKind::kLp:
        for (int64_t i = 0; i < m; ++i) s += std::pow(std::abs(static_cast<double>(v[i])), pw);
        break;
      case NormKind::kMax:
#pragma omp simd reduction(max : s) reduction(| : nan)
        for (int64_t i = 0; i < m; ++i) {
          const double a = std::abs(static_cast<double>(v[i]));
          nan |= a != a;
          s = a > s ? a : s;
        }
        break;
      case NormKind::kMin:
#pragma omp simd reduction(min : s) reduction(| : nan)
        for (int64_t i = 0; i < m; ++i) {
          const double a = std::abs(static_cast<double>(v[i]));
          nan |= a != a;
          s = a < s ? a : s;
        }
        break;
      case NormKind::kCount:
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < m; ++i) s += v[i] != A(0) ? 1.0 : 0.0;  // NaN counts
        break;
    }
    acc = combine(k, acc, Partial{s, nan != 0});
  }
  return acc;
}

double finish(NormKind k, Partial r, double pw) {
  if (r.nan) return std::numeric_limits<double>::quiet_NaN();
  switch (k) {
    case NormKind::kL2:
      return std::sqrt(r.value);
    case NormKind::kLp:
      return std::pow(r.value, 1.0 / pw);
    default:
      return r.value;  // L1 (sums of |x| are already NaN when an x is), max, min, count
  }
}

// The norm of one tensor, in double.
double tensor_norm(const Tensor& t, NormKind k, double pw) {
  Tensor c = t.is_contiguous() ? t : t.contiguous();
  const int64_t n = c.numel();
  return kernels::dispatch_floating(c.dtype(), "clip_grad_norm_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(c.data_ptr());
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<Partial> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (n > kernels::kParallelGrain)
    for (int64_t i = 0; i < chunks; ++i)
      parts[i] = partial_of(p + i * kChunk, std::min(kChunk, n - i * kChunk), k, pw);
    Partial acc = identity(k);
    for (const Partial& q : parts) acc = combine(k, acc, q);
    return finish(k, acc, pw);
  });
}

// Rounds v to the result dtype (float32 or float64) and returns it as double.
double round_to(double v, DType dt) {
  return dt == kFloat64 ? v : static_cast<double>(static_cast<float>(v));
}

// Python's repr of a float, as PyTorch's message shows norm_type ("2.0", "inf", "0.5").
std::string py_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  if (v == std::trunc(v) && std::abs(v) < 1e16) return fmt::format("{:.1f}", v);
  return fmt::format("{}", v);
}

std::vector<Tensor> grads_of(const std::vector<Tensor>& parameters, const char* where) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    MANTISSA_CHECK(parameters[i].defined(), where, "parameter {} is an undefined tensor", i);
    Tensor g = parameters[i].grad();
    if (g.defined()) grads.push_back(std::move(g));
  }
  return grads;
}

// g[i] = f(g[i]) in place, f seeing the arithmetic type (fp32 for fp16/bf16) and its result
// rounded once into the gradient's dtype.
template <typename F>
void map_inplace(const Tensor& grad, const char* where, F&& f) {
  NoGradGuard no_grad;
  // Non-contiguous gradients (user-set views) go through a contiguous copy.
  Tensor g = grad.is_contiguous() ? grad : grad.contiguous();
  const int64_t n = g.numel();
  kernels::dispatch_floating(g.dtype(), where, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    T* base = static_cast<T*>(g.data_ptr());
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kernels::kParallelGrain)
    for (int64_t c = 0; c < chunks; ++c) {
      T* p = base + c * kChunk;
      const int64_t len = std::min(kChunk, n - c * kChunk);
      alignas(64) A buf[kBlock];
      for (int64_t b = 0; b < len; b += kBlock) {
        const int64_t m = std::min(kBlock, len - b);
        const A* v = kernels::load_block(p + b, 1, m, buf);
        if constexpr (std::is_same_v<T, A>) {
          T* w = p + b;
#pragma omp simd
          for (int64_t i = 0; i < m; ++i) w[i] = f(v[i]);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < m; ++i) buf[i] = f(v[i]);
          kernels::store_narrow(buf, p + b, m);
        }
      }
    }
  });
  if (!g.is_same(grad)) {
    Tensor target = grad;  // same TensorImpl: writes through to the parameter's gradient
    mantissa::detail::copy_unchecked(target, g);
  }
}

// The total norm of gradients on one GPU: per-gradient partials accumulated on the device, the
// two stages finished there, then one read of the result (the only host sync).
double total_norm_on_gpu(const std::vector<Tensor>& tensors, NormKind k, double norm_type,
                         DType result) {
  const char* where = "clip_grad_norm_";
  const Device dev = tensors[0].device();
  for (size_t i = 0; i < tensors.size(); ++i)
    MANTISSA_CHECK(tensors[i].device() == dev, where,
                   "gradient {} is on {}, gradient 0 on {}: the total norm needs every gradient "
                   "on one device",
                   i, tensors[i].device().str(), dev.str());
  using GpuNormKind = mantissa::cuda::detail::NormKind;
  GpuNormKind kind;
  switch (k) {
    case NormKind::kL1:
      kind = GpuNormKind::kL1;
      break;
    case NormKind::kL2:
      kind = GpuNormKind::kL2;
      break;
    case NormKind::kMax:
      kind = GpuNormKind::kMax;
      break;
    default:
      fail(where,
           "norm_type {} is not supported for gradients on a GPU (1, 2 and inf are); move the "
           "gradients to the CPU for it",
           py_float(norm_type));
  }
  return kernels::gpu_kernels().grad_total_norm(tensors, kind, result == kFloat64, where);
}

}  // namespace

Tensor get_total_norm(const std::vector<Tensor>& tensors, double norm_type, bool error_if_nonfinite,
                      std::optional<bool> /*foreach*/) {
  const char* where = "clip_grad_norm_";
  if (tensors.empty()) return scalar_tensor(0.0, kFloat32);
  DType result = kFloat32;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    MANTISSA_CHECK(t.defined(), where, "tensor {} is an undefined tensor", i);
    MANTISSA_CHECK(t.dtype() == kFloat64 || t.dtype() == kFloat32 || t.dtype() == kFloat16 ||
                       t.dtype() == kBFloat16,
                   where, "gradient {} has dtype {}; expected a floating dtype", i,
                   t.dtype().name());
    if (t.dtype() == kFloat64) result = kFloat64;
  }
  const NormKind k = kind_of(norm_type);
  if (tensors[0].is_cuda()) {
    const double total = total_norm_on_gpu(tensors, k, norm_type, result);
    if (error_if_nonfinite && !std::isfinite(total))
      fail(where,
           "The total norm of order {} for gradients from `parameters` is non-finite, so it "
           "cannot be clipped. To disable this error and scale the gradients by the non-finite "
           "norm anyway, set `error_if_nonfinite=False`",
           py_float(norm_type));
    return scalar_tensor(total, result);  // on the host: it has just been read
  }
  // Stage 1: one norm per tensor, rounded to the result dtype. Stage 2: the norm of those.
  Partial acc = identity(k);
  for (const Tensor& t : tensors) {
    const double n = round_to(tensor_norm(t, k, norm_type), result);
    Partial term{0.0, std::isnan(n)};
    switch (k) {
      case NormKind::kL1:
      case NormKind::kMax:
      case NormKind::kMin:
        term.value = n;
        break;
      case NormKind::kL2:
        term.value = n * n;
        break;
      case NormKind::kLp:
        term.value = std::pow(n, norm_type);
        break;
      case NormKind::kCount:
        term.value = n != 0.0 ? 1.0 : 0.0;
        break;
    }
    acc = combine(k, acc, term);
  }
  const double total = round_to(finish(k, acc, norm_type), result);
  if (error_if_nonfinite && !std::isfinite(total))
    fail(where,
         "The total norm of order {} for gradients from `parameters` is non-finite, so it "
         "cannot be clipped. To disable this error and scale the gradients by the non-finite "
         "norm anyway, set `error_if_nonfinite=False`",
         py_float(norm_type));
  return scalar_tensor(total, result);
}

void clip_grads_with_norm_(const std::vector<Tensor>& parameters, double max_norm,
                           const Tensor& total_norm, std::optional<bool> /*foreach*/) {
  const char* where = "clip_grads_with_norm_";
  // torch scales by max_norm / total_norm whatever its sign: a negative max_norm flipped every
  // gradient (a step uphill) without a word. Always a mistake, so refused (as the Trainer's
  // gradient_clip_val is).
  // NaN fails `>= 0` too, but "a negative one would flip every gradient" is not its fault: a
  // NaN coefficient would turn every gradient into NaN.
  MANTISSA_CHECK(!std::isnan(max_norm), where,
                 "max_norm must be a number >= 0 (inf turns clipping off), got nan: it would "
                 "make every gradient NaN");
  MANTISSA_CHECK(max_norm >= 0, where,
                 "max_norm must be >= 0, got {}: a negative one would flip every gradient",
                 max_norm);
  const std::vector<Tensor> grads = grads_of(parameters, where);
  if (grads.empty()) return;
  MANTISSA_CHECK(total_norm.defined() && total_norm.numel() == 1, where,
                 "total_norm must be a one-element tensor");
  // max_norm / (total_norm + 1e-6) in the norm's dtype. Python evaluates number / tensor as
  // tensor.reciprocal() * number, so that is what is rounded here; clamp(max=1) keeps NaN.
  double coef;
  if (total_norm.dtype() == kFloat64) {
    const double c = (1.0 / (total_norm.item() + 1e-6)) * max_norm;
    coef = c > 1.0 ? 1.0 : c;
  } else {
    const float denom = static_cast<float>(total_norm.item()) + static_cast<float>(1e-6);
    const float c = (1.0f / denom) * static_cast<float>(max_norm);
    coef = c > 1.0f ? 1.0f : c;
  }
  // Multiplied always, even by 1: no branch on the value (PyTorch avoids a device sync).
  for (const Tensor& g : grads) {
    if (g.is_cuda()) {
      kernels::gpu_kernels().scale_inplace(g, coef, where);
      continue;
    }
    kernels::dispatch_floating(g.dtype(), where, [&](auto tag) {
      using A = acc_t<typename decltype(tag)::type>;
      const A c = static_cast<A>(coef);
      map_inplace(g, where, [c](A x) { return x * c; });
    });
  }
}

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite, std::optional<bool> foreach) {
  const std::vector<Tensor> grads = grads_of(parameters, "clip_grad_norm_");
  if (grads.empty()) return scalar_tensor(0.0, kFloat32);
  Tensor total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach);
  clip_grads_with_norm_(parameters, max_norm, total, foreach);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value,
                      std::optional<bool> /*foreach*/) {
  const char* where = "clip_grad_value_";
  // NaN bounds would pass every gradient through unchanged (comparisons with NaN are false):
  // no clipping, without a word.
  MANTISSA_CHECK(!std::isnan(clip_value), where,
                 "clip_value must be a number, got nan: nothing would be clipped");
  for (const Tensor& g : grads_of(parameters, where)) {
    kernels::dispatch_floating(g.dtype(), where, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      // Bounds rounded to the gradient dtype, as torch.clamp converts its scalars.
      const A lo = kernels::load(kernels::store<T>(static_cast<A>(-clip_value)));
      const A hi = kernels::load(kernels::store<T>(static_cast<A>(clip_value)));
      // max then min: NaN passes through both (comparisons with NaN are false), and lo > hi
      // gives hi, like torch.clamp.
      map_inplace(g, where, [lo, hi](A x) {
        const A y = x < lo ? lo : x;
        return hi < y ? hi : y;
      });
    });
  }
}

}  // namespace mantissa::nn::utils
