#pragma once
// SiLU (swish): x * sigmoid(x), as torch.nn.functional.silu. Differentiable.
#include "mantissa/core/tensor.h"

namespace mantissa {

// fp16/bf16 inputs are computed in fp32 and rounded once to the input's dtype (as PyTorch's
// kernel does); fp32 and fp64 compute in their own dtype.
Tensor silu(const Tensor& a);

// silu(gate) * up, the gated product of Llama's MLP (SwiGLU): the values and gradients of
// mul(silu(gate), up), bit for bit, in one pass each way and without storing silu(gate). Fused
// on the CPU for contiguous operands of one shape and one dtype (fp32, bf16, fp16); anything
// else runs the composed ops.
Tensor silu_mul(const Tensor& gate, const Tensor& up);

}  // namespace mantissa
