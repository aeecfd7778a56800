#pragma once
// Dtype plumbing shared by the elementwise ops: the dispatch over dtypes that have arithmetic,
// bringing operands to the computation dtype, and the dtype a Python-style scalar gives.
#include <cmath>

#include "core/dtype_dispatch.h"

namespace mantissa::kernels {

template <typename T>
using HasArithmetic = std::negation<IsFloat8<T>>;

// Floats, integers and bool: every dtype but Float8, which ops ask the caller to cast first.
template <typename F>
decltype(auto) dispatch_arith(DType dt, const char* where, F&& fn) {
  return dispatch_if<HasArithmetic>(
      dt, where, "{} has no arithmetic; cast it to float32, float16 or bfloat16 first",
      std::forward<F>(fn));
}

// t's values in dtype dt, for reading by a kernel (the op records its own backward). Same
// dtype: t's own handle, no new TensorImpl (a detach() here cost two allocations per operand
// on every small op); otherwise a converted copy made without history.
inline Tensor as_dtype(const Tensor& t, DType dt) {
  return t.dtype() == dt ? t : t.detach().to(dt);
}

inline bool is_integral_value(double v) { return std::isfinite(v) && std::floor(v) == v; }

// The dtype of `t op scalar`: a number never changes a float tensor's dtype; an integral
// number keeps an integer tensor's dtype (bool becomes int64); a fractional one makes it the
// default float dtype.
inline DType scalar_result_type(DType t, double s) {
  if (t.is_floating_point() || t.is_complex()) return t;
  if (!is_integral_value(s)) return kDefaultFloat;
  return t.is_bool() ? kInt64 : t;
}

// The dtype math functions (exp, log, ...) run in: integer inputs become the default float.
// Complex stays complex, so an op without a complex path says so instead of converting.
inline DType float_result_type(DType t) {
  return t.is_floating_point() || t.is_complex() ? t : kDefaultFloat;
}

}  // namespace mantissa::kernels
