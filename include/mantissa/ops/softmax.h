#pragma once
// softmax / log_softmax along a dimension, computed in fp32 (double for f64) with the
// max-subtraction trick; output in the input dtype. A row that is entirely -inf gives NaN
// (PyTorch), never a silent uniform distribution.
#include "mantissa/core/tensor.h"

namespace mantissa {
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
}  // namespace mantissa
