#pragma once
// The fused attention's CUDA branch (flash_attention_cuda.cpp): the CPU kernel's problem and
// operands (kernels/cpu/attention/flash_attention.h), with addresses on a GPU, run by the
// tensor-core kernels of flash_attention_kernels.cu. The op reaches these through the GPU
// kernel table (kernels/gpu_kernels.h); other problems (float32, float64, a value width unlike the
// query's, widths over 128) keep the composed form (cuBLAS products around one fused softmax
// kernel).
#include "kernels/cpu/attention/flash_attention.h"
#include "mantissa/core/device.h"

namespace mantissa::kernels::gpu {

// Whether the GPU kernels take the problem: float16 or bfloat16, E == Ev <= 128.
bool flash_attention_applies(DType dtype, int64_t E, int64_t Ev);

// As kernels::flash_attention_forward / _backward, on `device` (every operand and lse there;
// lse is fp32).
void flash_attention_forward(const Device& device, const AttnProblem& p, AttnOperand q,
                             AttnOperand k, AttnOperand v, AttnOperand o, void* lse);
void flash_attention_backward(const Device& device, const AttnProblem& p, AttnOperand q,
                              AttnOperand k, AttnOperand v, AttnOperand o, AttnOperand dout,
                              const void* lse, AttnOperand dq, AttnOperand dk, AttnOperand dv);

}  // namespace mantissa::kernels::gpu
