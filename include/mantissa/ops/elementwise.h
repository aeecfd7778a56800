#pragma once
// Pointwise ops with NumPy broadcasting and PyTorch type promotion. Reduced floats are
// computed in fp32 and rounded once when stored. All are differentiable.
#include <string_view>

#include "mantissa/core/tensor.h"

namespace mantissa {

// Result dtype of a binary op (PyTorch's result_type: dimensioned tensors win over 0-dim
// ones of the same category).
DType result_type(const Tensor& a, const Tensor& b);

Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a - alpha * b
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give kDefaultFloat
// Tensor-scalar forms keep the tensor's dtype (a Python number does not promote a float
// tensor; an integer tensor with a fractional scalar becomes the default float dtype).
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
// b - a and b / a for a number b (Python's reflected operators; also operator-(double, Tensor)).
Tensor rsub(const Tensor& a, double b);
Tensor rdiv(const Tensor& a, double b);
// Integer tensors with an integral exponent stay integers (a negative one is an error).
Tensor pow(const Tensor& a, double exponent);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
// approximate: "none" (exact erf form) or "tanh", as torch.nn.functional.gelu.
Tensor gelu(const Tensor& a, std::string_view approximate = "none");
Tensor clamp(const Tensor& a, double min, double max);

// Comparisons return kBool tensors and carry no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// Against a number: the number takes the tensor's dtype unless it is fractional and the
// tensor integral (then both are compared as the default float dtype).
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor isfinite(const Tensor& a);

// where(cond, a, b): a where cond is true, else b; cond is kBool, all three broadcast.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
// A number for one branch (masked_fill style): the result keeps the tensor's dtype.
Tensor where(const Tensor& condition, const Tensor& a, double b);
Tensor where(const Tensor& condition, double a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace mantissa
