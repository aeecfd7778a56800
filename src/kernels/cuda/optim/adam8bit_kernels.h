#pragma once
// 8-bit Adam/AdamW on a GPU (adam8bit_kernels.cu): bitsandbytes' blockwise dynamic quantization
// of the two moments (blocks of 256, absmax per block), for float32 parameters and gradients,
// and the float32-state update of the parameters too small for it. Every product, sum, quotient
// and square root is rounded on its own, in the CPU kernels' order, so the parameters, codes and
// absmaxes equal the CPU step's bit for bit (kernels/cpu/optim/adam8bit_kernels.h). Plain
// declarations: included by the .cu and by the optimizer's host code.
#include <cstdint>

namespace mantissa::cuda::detail {

// The step's scalars, computed on the host in double and rounded once to float.
struct Adam8bitStep {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;   // -lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  float eps_scaled;  // eps * sqrt(1 - beta2^t)
  float decay;       // 1 - lr * weight_decay
  bool apply_decay;
};

// codes: the signed dynamic map (256 floats, the first moment's) followed by the unsigned one
// (the second moment's), on the device. p, g: n floats; q1, q2: n codes; absmax1, absmax2: one
// float per block of 256.
void launch_adam8bit_blocks(const Adam8bitStep& s, const float* codes, float* p, const float* g,
                            uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2, int64_t n);
// m, v: float32 moments of n elements (parameters below the 8-bit size).
void launch_adam32_span(const Adam8bitStep& s, float* p, const float* g, float* m, float* v,
                        int64_t n);

}  // namespace mantissa::cuda::detail
