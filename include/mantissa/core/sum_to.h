#pragma once
// sum_to: reduces a broadcast gradient back to the shape of the input it came from
// (the inverse of broadcasting), used by every broadcasting op's backward.
#include "mantissa/core/tensor.h"

namespace mantissa {
// Sums g over the leading dimensions it has beyond `shape` and over dimensions where
// `shape` has size 1. Returns g itself when the shapes already match. Differentiable.
Tensor sum_to(const Tensor& g, const Shape& shape);
}  // namespace mantissa
