#pragma once
#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa {
// Zeroes each element with probability p and scales survivors by 1/(1-p) when training;
// identity otherwise. The mask comes from `gen` (default generator when null).
Tensor dropout(const Tensor& a, double p, bool training = true, Generator* gen = nullptr);
}  // namespace mantissa
