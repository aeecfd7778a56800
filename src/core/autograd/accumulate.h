#pragma once
// Gradient summation used by the engine and AccumulateGrad: a + b for same-shape tensors,
// computed in the dtype of `a` with fp32 arithmetic for reduced floats.
#include "mantissa/core/tensor.h"

namespace mantissa::autograd {
Tensor add_gradients(const Tensor& a, const Tensor& b);
}
