#pragma once
// The per-step scalars of one Adam/AdamW update, computed in double as torch does and
// converted once to the arithmetic type A (float or double). Shared by every SIMD level of the
// update kernel (adam_kernels.h).
namespace mantissa::optim::detail {

template <typename A>
struct AdamCoeffs {
  A sign;  // -1 with maximize
  A beta1, one_minus_beta1, beta2, one_minus_beta2;
  A neg_step_size;    // -lr / (1 - beta1^step)
  A bias_corr2_sqrt;  // sqrt(1 - beta2^step)
  A eps;
  A weight_decay;  // L2 (Adam): added to the gradient
  A decay_factor;  // decoupled (AdamW): 1 - lr * weight_decay; exactly 1 for Adam
};

}  // namespace mantissa::optim::detail
