// Unary math: neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, clamp. Derivatives that are
// cheaper in terms of the output (exp, sqrt, rsqrt, tanh, sigmoid) save the output, detached
// so the graph holds no reference cycle through it.
#include <cmath>
#include <limits>
#include <type_traits>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_maps.h"
#include "kernels/cpu/elementwise/vec_math.h"
#include "kernels/device_maps.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/ops/elementwise.h"
#include "ops/complex_arith.h"

namespace mantissa {

using kernels::EwOp;
using kernels::float_map;
using kernels::grad_map;
using kernels::unary_map;
using kernels::vec_unary;

Tensor neg(const Tensor& a) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("neg", neg, a);
  MANTISSA_CHECK(!a.dtype().is_bool(), "neg",
                 "negation of a bool tensor is not supported; use logical_not to invert a mask");
  Tensor out = unary_map("neg", EwOp::kNeg, a, a.dtype(), [](auto x) { return -x; });
  return autograd::record(out, {a}, "NegBackward",
                          [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor abs(const Tensor& a) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("abs", abs, a);
  if (detail::any_complex(a)) return detail::complex_abs(a);
  Tensor out = unary_map("abs", EwOp::kAbs, a, a.dtype(), [](auto x) {
    using A = decltype(x);
    if constexpr (std::is_floating_point_v<A>) {
      return std::abs(x);
    } else if constexpr (std::is_signed_v<A>) {
      return x < 0 ? static_cast<A>(-x) : x;
    } else {
      return x;
    }
  });
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {a}, "AbsBackward", [x = a.detach()](const Tensor& g) {
    // g * sign(x), with sign(0) = 0
    return std::vector<Tensor>{grad_map(EwOp::kAbsBackward, g, x, [](auto gv, auto xv) {
      using A = decltype(gv);
      return xv > A(0) ? gv : (xv < A(0) ? -gv : A(0));
    })};
  });
}

Tensor exp(const Tensor& a) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("exp", exp, a);
  Tensor out = float_map("exp", EwOp::kExp, a,
                         vec_unary([](auto x) { return std::exp(x); }, &kernels::vm::exp_f32));
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {out}, "ExpBackward", [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{
        grad_map(EwOp::kMulBackward, g, y, [](auto gv, auto yv) { return gv * yv; })};
  });
}

Tensor log(const Tensor& a) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("log", log, a);
  Tensor out = float_map("log", EwOp::kLog, a,
                         vec_unary([](auto x) { return std::log(x); }, &kernels::vm::log_f32));
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {a}, "LogBackward", [x = a.detach()](const Tensor& g) {
    return std::vector<Tensor>{
        grad_map(EwOp::kLogBackward, g, x, [](auto gv, auto xv) { return gv / xv; })};
  });
}

Tensor sqrt(const Tensor& a) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("sqrt", sqrt, a);
  Tensor out = float_map("sqrt", EwOp::kSqrt, a, [](auto x) { return std::sqrt(x); });
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {out}, "SqrtBackward", [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{
        grad_map(EwOp::kSqrtBackward, g, y, [](auto gv, auto yv) { return gv / (yv + yv); })};
  });
}

Tensor rsqrt(const Tensor& a) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("rsqrt", rsqrt, a);
  Tensor out = float_map("rsqrt", EwOp::kRsqrt, a, [](auto x) {
    using A = decltype(x);
    return A(1) / std::sqrt(x);
  });
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {out}, "RsqrtBackward", [y = out.detach()](const Tensor& g) {
    // d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
    return std::vector<Tensor>{grad_map(EwOp::kRsqrtBackward, g, y, [](auto gv, auto yv) {
      using A = decltype(gv);
      return A(-0.5) * gv * yv * yv * yv;
    })};
  });
}

Tensor tanh(const Tensor& a) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("tanh", tanh, a);
  Tensor out = float_map("tanh", EwOp::kTanh, a,
                         vec_unary([](auto x) { return std::tanh(x); }, &kernels::vm::tanh_f32));
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {out}, "TanhBackward", [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{grad_map(EwOp::kTanhBackward, g, y, [](auto gv, auto yv) {
      using A = decltype(gv);
      return gv * (A(1) - yv * yv);
    })};
  });
}

Tensor sigmoid(const Tensor& a) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("sigmoid", sigmoid, a);
  Tensor out = float_map("sigmoid", EwOp::kSigmoid, a,
                         vec_unary(
                             [](auto x) {
                               using A = decltype(x);
                               // exp overflow gives 1/inf = 0, the right limit
                               return A(1) / (A(1) + std::exp(-x));
                             },
                             &kernels::vm::sigmoid_f32));
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {out}, "SigmoidBackward", [y = out.detach()](const Tensor& g) {
    return std::vector<Tensor>{grad_map(EwOp::kSigmoidBackward, g, y, [](auto gv, auto yv) {
      using A = decltype(gv);
      return gv * yv * (A(1) - yv);
    })};
  });
}

Tensor clamp(const Tensor& a, double min, double max) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("clamp", clamp, a, min, max);
  MANTISSA_CHECK(!std::isnan(min) && !std::isnan(max), "clamp",
                 "bounds must not be NaN (got {}, {})", min, max);
  // An integer tensor stays integral unless a bound is fractional (infinite bounds are fine).
  auto whole = [](double v) { return std::isinf(v) || kernels::is_integral_value(v); };
  DType dt = a.dtype();
  if (!dt.is_floating_point() && !(whole(min) && whole(max))) dt = kDefaultFloat;
  MANTISSA_CHECK(!dt.is_bool(), "clamp", "clamp is not defined for bool tensors");
  // Integer bounds outside the type's range never clamp (the CUDA kernel gets them clipped).
  double lo = min, hi = max;
  if (!dt.is_floating_point()) {
    kernels::dispatch_arith(dt, "clamp", [&](auto tag) {
      using T = typename decltype(tag)::type;
      constexpr double tmin = static_cast<double>(std::numeric_limits<T>::lowest());
      constexpr double tmax = static_cast<double>(std::numeric_limits<T>::max());
      lo = std::min(std::max(min, tmin), tmax);
      hi = std::min(std::max(max, tmin), tmax);
    });
  }
  Tensor out = unary_map(
      "clamp", EwOp::kClamp, a, dt,
      [min, max](auto x) {
        using A = decltype(x);
        // min(max(x, lo), hi) as PyTorch: when lo > hi everything becomes hi. NaN stays NaN.
        if constexpr (std::is_floating_point_v<A>) {
          const A lo = static_cast<A>(min);
          const A hi = static_cast<A>(max);
          if (x != x) return x;
          const A v = x < lo ? lo : x;
          return v > hi ? hi : v;
        } else {
          // Bounds outside the type's range never clamp; compare in double to avoid overflow.
          constexpr double tmin = static_cast<double>(std::numeric_limits<A>::lowest());
          constexpr double tmax = static_cast<double>(std::numeric_limits<A>::max());
          const double lo = std::min(std::max(min, tmin), tmax);
          const double hi = std::min(std::max(max, tmin), tmax);
          const double d = static_cast<double>(x);
          A v = d < lo ? static_cast<A>(lo) : x;
          return static_cast<double>(v) > hi ? static_cast<A>(hi) : v;
        }
      },
      lo, hi);
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(
      out, {a}, {a}, "ClampBackward", [x = a.detach(), min, max](const Tensor& g) {
        // Gradient passes where min <= x <= max (inclusive, as PyTorch); NaN inputs get none.
        return std::vector<Tensor>{grad_map(
            EwOp::kClampBackward, g, x,
            [min, max](auto gv, auto xv) {
              using A = decltype(gv);
              return (xv >= static_cast<A>(min) && xv <= static_cast<A>(max)) ? gv : A(0);
            },
            min, max)};
      });
}

}  // namespace mantissa
