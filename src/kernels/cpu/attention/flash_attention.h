#pragma once
// Fused scaled-dot-product attention on the CPU, FlashAttention-2 style: the (L, S) weights are
// never stored. Forward walks key blocks with an online softmax (running max and sum, rescaling
// the output accumulator) and keeps one log-sum-exp per query row; backward recomputes each
// weight tile from it (P = exp(s - lse)) and forms dS = P * (dP - rowsum(dO * O)).
//
// Arithmetic is in acc_t (fp32, f64 for f64): operands are widened once per (batch, head) into
// per-thread scratch, the tile products accumulate in that type (kernels/cpu/gemm/tile_gemm.h) and
// each output is rounded once. Work is split over (batch, head) pairs only, each done by one
// thread in a fixed order, so results are bit-identical for any thread count and backward needs
// no atomics. Scratch is O((L + S) * E) per thread; saved state is the output and lse, O(L).
// A single query row in float32, bfloat16 or float16 (decoding one token over a KV cache) takes
// its scores as dot products from K's rows (gemm/dense_gemv.h) and one softmax pass, without
// the transposed copy of K the blocked path makes.
#include <cstdint>

#include "mantissa/core/dtype.h"

namespace mantissa::kernels {

// One operand: element (b, h, row, col) at data + b * sb + h * sh + row * sr + col (in
// elements of the problem's dtype; columns are contiguous).
struct AttnOperand {
  void* data;
  int64_t sb, sh, sr;
};

struct AttnProblem {
  DType dtype;           // of every operand: f64, f32, f16 or bf16
  int64_t batch, heads;  // leading dimensions
  int64_t L, S, E, Ev;   // queries, keys, query/key width, value width (all > 0)
  bool causal;           // key j > query i masked (top-left aligned, as PyTorch)
  double scale;          // of the scores q . k
};

// o = softmax(q k^T * scale [+ causal mask]) v. lse (batch * heads * L values of acc_t,
// contiguous) receives each row's log-sum-exp of the scaled scores, which backward needs.
void flash_attention_forward(const AttnProblem& p, AttnOperand q, AttnOperand k, AttnOperand v,
                             AttnOperand o, void* lse);

// Gradients dq, dk, dv (written, not accumulated) from the forward's inputs, its output o and
// lse, and the output gradient dout.
void flash_attention_backward(const AttnProblem& p, AttnOperand q, AttnOperand k, AttnOperand v,
                              AttnOperand o, AttnOperand dout, const void* lse, AttnOperand dq,
                              AttnOperand dk, AttnOperand dv);

}  // namespace mantissa::kernels
