#pragma once
// The complex paths of the real ops that also take complex tensors (add/sub/mul/div, matmul,
// abs): each op checks any_complex() after its autocast entry and hands over to these.
#include "mantissa/core/tensor.h"

namespace mantissa::detail {

inline bool any_complex(const Tensor& a) { return a.dtype().is_complex(); }
inline bool any_complex(const Tensor& a, const Tensor& b) {
  return a.dtype().is_complex() || b.dtype().is_complex();
}

enum class ComplexArith { kAdd, kMul, kDiv };
// a + alpha * b, a * b, a / b with broadcasting; a real operand is promoted first.
Tensor complex_arith(ComplexArith op, const Tensor& a, const Tensor& b, double alpha = 1.0);
// a + s and a * s for a real number s (sub and div map onto them).
Tensor complex_add_scalar(const Tensor& a, double s);
Tensor complex_mul_scalar(const Tensor& a, double s);
// 2-D @ 2-D.
Tensor complex_matmul(const Tensor& a, const Tensor& b);
// |z| as a real tensor.
Tensor complex_abs(const Tensor& z);

}  // namespace mantissa::detail
