// Binary arithmetic: add, sub, mul, div, pow, maximum, minimum (tensor-tensor and
// tensor-scalar) with broadcasting and PyTorch's type promotion. Each op's backward sits right
// after its forward; broadcast gradients are summed back with sum_to.
#include <cmath>
#include <functional>
#include <optional>
#include <type_traits>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/elementwise/elementwise_maps.h"
#include "kernels/device_maps.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"
#include "mantissa/core/sum_to.h"
#include "mantissa/ops/elementwise.h"
#include "ops/complex_arith.h"

namespace mantissa {
namespace {

using kernels::as_dtype;
using kernels::binary_map;
using kernels::EwOp;
using kernels::grad_map;
using kernels::unary_map;

// PyTorch refuses bool subtraction: it is almost always a mask inversion gone wrong.
void check_no_bool_sub(const Tensor& a, const Tensor* b) {
  const bool bad = a.dtype().is_bool() || (b != nullptr && b->dtype().is_bool());
  MANTISSA_CHECK(!bad, "sub",
                 "subtraction with a bool tensor is not supported; to invert a mask use "
                 "logical_not, to compare masks use ne");
}

// base^exp for integer types (exp may be negative for tensor exponents: only |base| == 1
// gives a non-zero result, as integer division would).
template <typename A>
A int_pow(A base, A exp) {
  if constexpr (std::is_signed_v<A>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? -1 : 1;
      return 0;
    }
  }
  A r = 1;
  while (exp != 0) {
    if (exp & 1) r = static_cast<A>(r * base);
    base = static_cast<A>(base * base);
    exp = static_cast<A>(exp >> 1);
  }
  return r;
}

// Keep bool out of pow (no meaningful power of a truth value; PyTorch refuses it too).
void check_pow_dtype(DType dt) {
  MANTISSA_CHECK(!dt.is_bool(), "pow", "pow is not defined for bool tensors");
}

struct GradFlags {
  bool a, b;
};
GradFlags grad_flags(const Tensor& a, const Tensor& b) {
  return {a.requires_grad(), b.requires_grad()};
}

}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  // Dimensioned tensors decide the dtype; a 0-dim tensor only matters when it is of a higher
  // category (bool < integer < float) than all dimensioned ones.
  std::optional<DType> dim_result, zero_result;
  for (const Tensor* t : {&a, &b}) {
    std::optional<DType>& slot = t->dim() > 0 ? dim_result : zero_result;
    slot = slot ? promote_types(*slot, t->dtype()) : t->dtype();
  }
  if (!dim_result) return *zero_result;
  if (!zero_result) return *dim_result;
  const DType hi = *dim_result;
  const DType lo = *zero_result;
  if (hi.is_floating_point()) return hi;
  if (hi.is_bool() || lo.is_floating_point()) return promote_types(hi, lo);
  return hi;
}

// ---- add / sub ----

namespace {

// a + alpha * b; sub is add with -alpha, reported under its own name.
Tensor add_impl(const char* op, const char* node, const Tensor& a, const Tensor& b, double alpha) {
  const DType dt = result_type(a, b);
  MANTISSA_CHECK(dt.is_floating_point() || kernels::is_integral_value(alpha), op,
                 "alpha {} must be an integer for {} tensors", std::abs(alpha), dt.name());
  Tensor out =
      alpha == 1.0
          ? binary_map(op, EwOp::kAdd, a, b, dt, [](auto x, auto y) { return x + y; })
          : binary_map(
                op, EwOp::kAdd, a, b, dt,
                [alpha](auto x, auto y) { return x + static_cast<decltype(y)>(alpha) * y; }, alpha);
  if (!autograd::needs_grad(a, b)) return out;
  // An operand's shape is kept only where it was broadcast (its gradient is then summed back to
  // it): copying both shapes every time cost two of a recorded add's heap allocations.
  const auto shape_if_broadcast = [&out](const Tensor& t) {
    return t.shape() == out.shape() ? std::nullopt : std::optional<Shape>(t.shape());
  };
  return autograd::record(
      out, {a, b}, node,
      [sa = shape_if_broadcast(a), sb = shape_if_broadcast(b), alpha,
       need = grad_flags(a, b)](const Tensor& g) {
        const auto back = [](const Tensor& t, const std::optional<Shape>& shape) {
          return shape ? sum_to(t, *shape) : t;
        };
        Tensor ga = need.a ? back(g, sa) : Tensor();
        Tensor gb = need.b ? back(alpha == 1.0 ? g : mul(g, alpha), sb) : Tensor();
        return std::vector<Tensor>{ga, gb};
      });
}

Tensor add_scalar(const char* op, const char* node, const Tensor& a, double b) {
  const DType dt = kernels::scalar_result_type(a.dtype(), b);
  Tensor out = unary_map(
      op, EwOp::kAddScalar, a, dt, [b](auto x) { return x + static_cast<decltype(x)>(b); }, b);
  return autograd::record(out, {a}, node, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("add", add, a, b, alpha);
  if (detail::any_complex(a, b))
    return detail::complex_arith(detail::ComplexArith::kAdd, a, b, alpha);
  return add_impl("add", "AddBackward", a, b, alpha);
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("sub", sub, a, b, alpha);
  if (detail::any_complex(a, b))
    return detail::complex_arith(detail::ComplexArith::kAdd, a, b, -alpha);
  check_no_bool_sub(a, &b);
  return add_impl("sub", "SubBackward", a, b, -alpha);
}

Tensor add(const Tensor& a, double b) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("add", add, a, b);
  if (detail::any_complex(a)) return detail::complex_add_scalar(a, b);
  return add_scalar("add", "AddBackward", a, b);
}

Tensor sub(const Tensor& a, double b) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("sub", sub, a, b);
  if (detail::any_complex(a)) return detail::complex_add_scalar(a, -b);
  check_no_bool_sub(a, nullptr);
  return add_scalar("sub", "SubBackward", a, -b);  // x - b and x + (-b) round identically
}

// ---- mul / div ----

Tensor mul(const Tensor& a, const Tensor& b) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("mul", mul, a, b);
  if (detail::any_complex(a, b)) return detail::complex_arith(detail::ComplexArith::kMul, a, b);
  const DType dt = result_type(a, b);
  Tensor out = binary_map("mul", EwOp::kMul, a, b, dt, [](auto x, auto y) { return x * y; });
  if (!autograd::needs_grad(a, b)) return out;
  const GradFlags need = grad_flags(a, b);
  return autograd::record(out, {a, b}, {need.a ? b : Tensor(), need.b ? a : Tensor()},
                          "MulBackward", [x = a.detach(), y = b.detach(), need](const Tensor& g) {
                            Tensor ga = need.a ? sum_to(mul(g, y), x.shape()) : Tensor();
                            Tensor gb = need.b ? sum_to(mul(g, x), y.shape()) : Tensor();
                            return std::vector<Tensor>{ga, gb};
                          });
}

Tensor mul(const Tensor& a, double b) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("mul", mul, a, b);
  if (detail::any_complex(a)) return detail::complex_mul_scalar(a, b);
  const DType dt = kernels::scalar_result_type(a.dtype(), b);
  Tensor out = unary_map(
      "mul", EwOp::kMulScalar, a, dt, [b](auto x) { return x * static_cast<decltype(x)>(b); }, b);
  return autograd::record(out, {a}, "MulBackward",
                          [b](const Tensor& g) { return std::vector<Tensor>{mul(g, b)}; });
}

Tensor div(const Tensor& a, const Tensor& b) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("div", div, a, b);
  if (detail::any_complex(a, b)) return detail::complex_arith(detail::ComplexArith::kDiv, a, b);
  // True division: integer operands give the default float dtype.
  const DType dt = kernels::float_result_type(result_type(a, b));
  Tensor out = binary_map("div", EwOp::kDiv, a, b, dt, [](auto x, auto y) { return x / y; });
  if (!autograd::needs_grad(a, b)) return out;
  // a's gradient reads b; b's reads a and b.
  const GradFlags need = grad_flags(a, b);
  return autograd::record(
      out, {a, b}, {need.b ? a : Tensor(), b}, "DivBackward",
      [x = a.detach(), y = b.detach(), need](const Tensor& g) {
        Tensor ga = need.a ? sum_to(div(g, y), x.shape()) : Tensor();
        Tensor gb = need.b
                        ? grad_map(EwOp::kDivOtherBackward, g, x, y, y.shape(),
                                   [](auto gv, auto xv, auto yv) { return -gv * xv / (yv * yv); })
                        : Tensor();
        return std::vector<Tensor>{ga, gb};
      });
}

Tensor div(const Tensor& a, double b) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("div", div, a, b);
  if (detail::any_complex(a)) return detail::complex_mul_scalar(a, 1.0 / b);
  const DType dt = kernels::float_result_type(a.dtype());
  Tensor out = unary_map(
      "div", EwOp::kDivScalar, a, dt, [b](auto x) { return x / static_cast<decltype(x)>(b); }, b);
  return autograd::record(out, {a}, "DivBackward",
                          [b](const Tensor& g) { return std::vector<Tensor>{div(g, b)}; });
}

// ---- pow ----

Tensor pow(const Tensor& a, double exponent) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("pow", pow, a, exponent);
  const DType dt = kernels::scalar_result_type(a.dtype(), exponent);
  check_pow_dtype(dt);
  MANTISSA_CHECK(dt.is_floating_point() || exponent >= 0, "pow",
                 "integers to negative integer powers are not allowed (exponent {})", exponent);
  Tensor out;
  if (exponent == 2.0) {
    out = unary_map(
        "pow", EwOp::kPowScalar, a, dt, [](auto x) { return x * x; }, 2.0);
  } else {
    out = unary_map(
        "pow", EwOp::kPowScalar, a, dt,
        [exponent](auto x) {
          using A = decltype(x);
          if constexpr (std::is_integral_v<A>) {
            return int_pow<A>(x, static_cast<A>(exponent));
          } else {
            return std::pow(x, static_cast<A>(exponent));
          }
        },
        exponent);
  }
  if (!autograd::needs_grad(a)) return out;
  // x^0 has a zero gradient that reads nothing.
  return autograd::record(
      out, {a}, {exponent == 0.0 ? Tensor() : a}, "PowBackward",
      [x = a.detach(), exponent](const Tensor& g) {
        // d/dx x^e = e x^(e-1); exactly zero for e == 0 (also where x^-1 would be inf).
        if (exponent == 0.0) return std::vector<Tensor>{zeros(x.shape(), g.dtype(), g.device())};
        Tensor gx = exponent == 2.0 ? grad_map(
                                          EwOp::kPowScalarBackward, g, x,
                                          [](auto gv, auto xv) { return gv * (xv + xv); }, 2.0)
                                    : grad_map(
                                          EwOp::kPowScalarBackward, g, x,
                                          [exponent](auto gv, auto xv) {
                                            using A = decltype(xv);
                                            return gv * static_cast<A>(exponent) *
                                                   std::pow(xv, static_cast<A>(exponent - 1.0));
                                          },
                                          exponent);
        return std::vector<Tensor>{gx};
      });
}

Tensor pow(const Tensor& a, const Tensor& exponent) {
  MANTISSA_PROFILE_OP("elementwise");
  MANTISSA_AUTOCAST("pow", pow, a, exponent);
  const DType dt = result_type(a, exponent);
  check_pow_dtype(dt);
  Tensor out = binary_map("pow", EwOp::kPow, a, exponent, dt, [](auto x, auto y) {
    using A = decltype(x);
    if constexpr (std::is_integral_v<A>) {
      return int_pow<A>(x, y);
    } else {
      return std::pow(x, y);
    }
  });
  if (!autograd::needs_grad(a, exponent)) return out;
  return autograd::record(
      out, {a, exponent}, {a, exponent}, "PowBackward",
      [x = a.detach(), y = exponent.detach(), need = grad_flags(a, exponent)](const Tensor& g) {
        // Base: e x^(e-1), zero where e == 0. Exponent: x^e log x, zero where x == 0 and
        // e >= 0 (the limit PyTorch uses instead of 0 * -inf).
        Tensor ga = need.a
                        ? grad_map(EwOp::kPowBaseBackward, g, x, y, x.shape(),
                                   [](auto gv, auto xv, auto yv) {
                                     using A = decltype(xv);
                                     return yv == A(0) ? A(0) : gv * yv * std::pow(xv, yv - A(1));
                                   })
                        : Tensor();
        Tensor gb = need.b ? grad_map(EwOp::kPowExpBackward, g, x, y, y.shape(),
                                      [](auto gv, auto xv, auto yv) {
                                        using A = decltype(xv);
                                        return (xv == A(0) && yv >= A(0))
                                                   ? A(0)
                                                   : gv * std::pow(xv, yv) * std::log(xv);
                                      })
                           : Tensor();
        return std::vector<Tensor>{ga, gb};
      });
}

// ---- maximum / minimum ----
// NaN propagates (either operand). On ties the gradient is split evenly, as PyTorch does.

namespace {

// maximum (beats = greater) and minimum (beats = less): x is picked where it beats y or is NaN;
// the gradient goes to the operand picked.
template <typename Beats>
Tensor extremum(const char* op, const char* node, EwOp code, EwOp backward_code, const Tensor& a,
                const Tensor& b, Beats beats) {
  const DType dt = result_type(a, b);
  Tensor out = binary_map(op, code, a, b, dt,
                          [beats](auto x, auto y) { return (beats(x, y) || x != x) ? x : y; });
  if (!autograd::needs_grad(a, b)) return out;
  return autograd::record(
      out, {a, b}, {a, b}, node,
      [x = a.detach(), y = b.detach(), need = grad_flags(a, b), beats,
       backward_code](const Tensor& g) {
        // g for `self`, none where `other` beats it, half on a tie.
        auto share = [beats](auto gv, auto self, auto other) {
          using A = decltype(gv);
          return self == other ? gv * A(0.5) : (beats(other, self) ? A(0) : gv);
        };
        Tensor ga = need.a
                        ? grad_map(backward_code, g, x, y, x.shape(),
                                   [share](auto gv, auto xv, auto yv) { return share(gv, xv, yv); })
                        : Tensor();
        Tensor gb = need.b
                        ? grad_map(backward_code, g, y, x, y.shape(),
                                   [share](auto gv, auto yv, auto xv) { return share(gv, yv, xv); })
                        : Tensor();
        return std::vector<Tensor>{ga, gb};
      });
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  MANTISSA_AUTOCAST("maximum", maximum, a, b);
  return extremum("maximum", "MaximumBackward", EwOp::kMaximum, EwOp::kMaximumBackward, a, b,
                  std::greater<>{});
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  MANTISSA_AUTOCAST("minimum", minimum, a, b);
  return extremum("minimum", "MinimumBackward", EwOp::kMinimum, EwOp::kMinimumBackward, a, b,
                  std::less<>{});
}

// ---- scalar on the left ----

Tensor rsub(const Tensor& a, double b) {
  MANTISSA_AUTOCAST("rsub", rsub, a, b);
  check_no_bool_sub(a, nullptr);
  const DType dt = kernels::scalar_result_type(a.dtype(), b);
  Tensor out = unary_map(
      "rsub", EwOp::kRsubScalar, a, dt, [b](auto x) { return static_cast<decltype(x)>(b) - x; }, b);
  return autograd::record(out, {a}, "RsubBackward",
                          [](const Tensor& g) { return std::vector<Tensor>{neg(g)}; });
}

Tensor rdiv(const Tensor& a, double b) {
  MANTISSA_AUTOCAST("rdiv", rdiv, a, b);
  const DType dt = kernels::float_result_type(a.dtype());
  Tensor out = unary_map(
      "rdiv", EwOp::kRdivScalar, a, dt, [b](auto x) { return static_cast<decltype(x)>(b) / x; }, b);
  if (!autograd::needs_grad(a)) return out;
  return autograd::record(out, {a}, {a}, "RdivBackward", [x = a.detach(), b](const Tensor& g) {
    // d/dx b/x = -b / x^2
    return std::vector<Tensor>{grad_map(
        EwOp::kRdivBackward, g, x,
        [b](auto gv, auto xv) {
          using A = decltype(gv);
          return -gv * static_cast<A>(b) / (xv * xv);
        },
        b)};
  });
}

// ---- operators ----

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return rdiv(b, a); }

}  // namespace mantissa
