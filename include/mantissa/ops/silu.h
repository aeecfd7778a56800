#pragma once
// SiLU (swish): x * sigmoid(x), as torch.nn.functional.silu. Differentiable.
#include "mantissa/core/tensor.h"

namespace mantissa {

// fp16/bf16 inputs are computed in fp32 and rounded once to the input's dtype (as PyTorch's
// kernel does); fp32 and fp64 compute in their own dtype.
Tensor silu(const Tensor& a);

}  // namespace mantissa
