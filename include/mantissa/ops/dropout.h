#pragma once
#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa {
// Zeroes each element with probability p and scales survivors by 1/(1-p) when training;
// returns `a` itself when !training or p == 0, and zeros when p == 1 (PyTorch). p outside
// [0, 1] throws. The mask comes from `gen` (default generator when null): one uniform draw per
// element in row-major order, so a seed gives the same mask for any thread count.
Tensor dropout(const Tensor& a, double p, bool training = true, Generator* gen = nullptr);
}  // namespace mantissa
