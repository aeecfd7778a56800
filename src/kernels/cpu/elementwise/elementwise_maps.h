#pragma once
// Maps the elementwise ops build on: dtype-dispatched forward maps (unary, broadcast binary)
// and fused gradient maps (g * f'(...) in one pass, in the gradient's dtype).
#include "kernels/cpu/elementwise/elementwise_dtype.h"
#include "kernels/cpu/elementwise/elementwise_loops.h"
#include "mantissa/core/sum_to.h"

namespace mantissa::kernels {

namespace detail {

// Calls fn with a float32 tag and one of its operand's type, f32 with f32 excluded: the pairs
// binary_map widens inside its loop.
template <typename Fn>
void with_float32_pair(DType a, DType b, Fn&& fn) {
  const auto with = [](DType d, auto&& g) {
    if (d == kBFloat16) return g(TypeTag<BFloat16>{});
    if (d == kFloat16) return g(TypeTag<Half>{});
    return g(TypeTag<float>{});
  };
  with(a, [&](auto ta) { with(b, [&](auto tb) { fn(ta, tb); }); });
}

inline bool is_f32_or_narrow(DType d) { return d == kFloat32 || d == kBFloat16 || d == kFloat16; }

}  // namespace detail

// f(a, b) over the broadcast shape, both operands brought to `dt` and the result stored as
// `dt` (f receives the arithmetic type; see pointwise).
template <typename F>
Tensor binary_map(const char* op, const Tensor& a, const Tensor& b, DType dt, F f) {
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  if (dt == kFloat32 && a.dtype() != b.dtype() && detail::is_f32_or_narrow(a.dtype()) &&
      detail::is_f32_or_narrow(b.dtype())) {
    // A float32 result from a bf16/f16 operand (autocast's bf16 Linear output added to the fp32
    // residual stream): pointwise widens it block by block, to the exact values a converted
    // copy would hold, instead of a conversion pass and a temporary of its own.
    Tensor out = empty(std::move(shape), dt);
    detail::with_float32_pair(a.dtype(), b.dtype(), [&](auto ta, auto tb) {
      using A = typename decltype(ta)::type;
      using B = typename decltype(tb)::type;
      if constexpr (!std::is_same_v<A, B>) pointwise<float, A, B>(out, {a, b}, f);
    });
    return out;
  }
  const Tensor x = as_dtype(a, dt);
  const Tensor y = as_dtype(b, dt);
  Tensor out = empty(std::move(shape), dt);
  dispatch_arith(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pointwise<T, T, T>(out, {x, y}, f);
  });
  return out;
}

// f(v) over a's elements in dtype dt.
template <typename F>
Tensor unary_map(const char* op, const Tensor& a, DType dt, F f) {
  const Tensor x = as_dtype(a, dt);
  Tensor out = empty(a.shape(), dt);
  dispatch_arith(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pointwise<T, T>(out, {x}, f);
  });
  return out;
}

// f(v) for math functions (exp, tanh, gelu, ...): integer inputs are computed as the default
// float dtype, floats keep their dtype; only float kernels are instantiated.
template <typename F>
Tensor float_map(const char* op, const Tensor& a, F f) {
  const DType dt = float_result_type(a.dtype());
  const Tensor x = as_dtype(a, dt);
  Tensor out = empty(a.shape(), dt);
  dispatch_floating(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pointwise<T, T>(out, {x}, f);
  });
  return out;
}

// A gradient computed in one fused pass: f(g, x, y) over g's (the broadcast) shape in g's
// dtype, with x and y brought to that dtype, then summed back to `to_shape`.
template <typename F>
Tensor grad_map(const Tensor& g, const Tensor& x, const Tensor& y, const Shape& to_shape, F f) {
  const DType dt = g.dtype();
  const Tensor xc = as_dtype(x, dt);
  const Tensor yc = as_dtype(y, dt);
  Tensor out = empty(g.shape(), dt);
  dispatch_floating(dt, "backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    pointwise<T, T, T, T>(out, {g, xc, yc}, f);
  });
  return sum_to(out, to_shape);
}

// g * f'(x) for a unary op: f(g, x) over x's shape in g's dtype.
template <typename F>
Tensor grad_map(const Tensor& g, const Tensor& x, F f) {
  const DType dt = g.dtype();
  const Tensor xc = as_dtype(x, dt);
  Tensor out = empty(g.shape(), dt);
  dispatch_floating(dt, "backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    pointwise<T, T, T>(out, {g, xc}, f);
  });
  return out;
}

}  // namespace mantissa::kernels
