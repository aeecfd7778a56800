#pragma once
// Fused scaled-dot-product attention on a GPU (flash_attention_kernels.cu), FlashAttention-2
// style on the tensor cores: the (L, S) scores are never written to memory. Plain declarations
// (no mantissa C++ headers), for the Tensor-level code in flash_attention_cuda.cpp.
//
// float16 and bfloat16 operands only, query/key and value width E <= 128 (the same width):
// products of 16-bit operands accumulate in fp32 (mma.sync m16n8k16), softmax in fp32; the
// weights P and their gradient dS are rounded to the operand type once, where they enter a
// product, as the composed form's stored weights are. Backward runs two kernels, one for dK and
// dV (each block owns keys, walks the queries) and one for dQ (each block owns queries, walks
// the keys), recomputing the weights from the saved log-sum-exp in both: no atomics, so the
// gradients are bit-reproducible.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// Element (b, h, row, col) at data + b * sb + h * sh + row * sr + col, in elements; columns are
// contiguous.
struct FlashOperand {
  void* data;
  int64_t sb, sh, sr;
};

struct FlashShape {
  int64_t batch, heads;
  int64_t L, S, E;  // queries, keys, width of q, k and v (> 0)
  bool causal;      // key j > query i masked (top-left aligned, as PyTorch)
  double scale;     // of the scores q . k
};

// Whether the kernels take operands of this type and width.
bool flash_attention_supports(Scalar type, int64_t E);

// o = softmax(scale * q k^T [+ causal mask]) v, and lse[(b * heads + h) * L + i] = the natural
// log-sum-exp of row i's scaled scores (fp32, on the device), which backward reads.
void launch_flash_attention_forward(Scalar type, const FlashShape& p, FlashOperand q,
                                    FlashOperand k, FlashOperand v, FlashOperand o, float* lse);

// dq, dk, dv (written, not accumulated) from the forward's operands, its output o and lse, and
// the output gradient dout. Uses a (batch * heads * L) fp32 scratch from the caching allocator.
void launch_flash_attention_backward(Scalar type, const FlashShape& p, FlashOperand q,
                                     FlashOperand k, FlashOperand v, FlashOperand o,
                                     FlashOperand dout, const float* lse, FlashOperand dq,
                                     FlashOperand dk, FlashOperand dv);

}  // namespace mantissa::cuda::detail
