#pragma once
// Optimizer updates and gradient-norm reductions on a GPU (optim_kernels.cu), for the
// parameters of Adam/AdamW/SGD that live on a GPU and for clip_grad_norm_. Plain declarations:
// included by the .cu and by the optimizers' host code. Everything runs on the current stream
// and reads nothing back to the host.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// One Adam/AdamW step over n contiguous elements, term by term in torch's order with each
// operation rounded alone (no FMA contraction), so float32/float64 results equal the CPU
// optimizer's bit for bit. Coefficients are given in double, converted once to the arithmetic
// type (float for f32/f16/bf16, double for f64) as the CPU's AdamCoeffs are.
// param_type f16/bf16: fp32 arithmetic; state_type is the parameter's type (rounded to nearest
// even when stored) or f32; master (nullable, f32): the fp32 master copy updated instead, the
// parameter receiving its rounding (an element whose parameter no longer equals the master's
// rounding restarts from the parameter, as the CPU loop does).
struct AdamUpdate {
  void* param = nullptr;
  const void* grad = nullptr;
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  void* max_exp_avg_sq = nullptr;  // amsgrad only
  float* master = nullptr;
  Scalar param_type = Scalar::f32, state_type = Scalar::f32;
  int64_t n = 0;
  double sign = 1, beta1 = 0, one_minus_beta1 = 0, beta2 = 0, one_minus_beta2 = 0,
         neg_step_size = 0, bias_corr2_sqrt = 1, eps = 0, weight_decay = 0, decay_factor = 1;
  bool l2 = false, amsgrad = false;
};
// False (nothing launched) for a type pair it does not implement.
bool launch_adam_update(const AdamUpdate& u);
// The updates us[0..count) (distinct parameters, on the current device) in as few launches as
// possible: runs of updates with the same scalars, flags and types go together, up to 40
// tensors per launch, each element updated exactly as launch_adam_update does. False (at the
// first run of an unimplemented type pair; earlier runs were launched) otherwise.
bool launch_adam_updates(const AdamUpdate* us, int64_t count);

// One SGD step over n contiguous elements, in torch.optim.SGD's order (see sgd.cpp).
// momentum_buffer: nullable (no momentum); first: the buffer starts at the gradient.
struct SgdUpdate {
  void* param = nullptr;
  const void* grad = nullptr;
  void* momentum_buffer = nullptr;
  float* master = nullptr;
  Scalar param_type = Scalar::f32, state_type = Scalar::f32;
  int64_t n = 0;
  double sign = 1, neg_lr = 0, momentum = 0, one_minus_dampening = 1, weight_decay = 0;
  bool decay = false, first = false, nesterov = false;
};
bool launch_sgd_update(const SgdUpdate& u);

// Gradient norms: kind 1 accumulates sum |x|, 2 sum x^2 (both in double, by atomics), 3 max |x|
// (NaN wins) into *acc, which the caller zeroes first. False for another type.
enum class NormKind : int { kL1 = 1, kL2 = 2, kMax = 3 };
bool launch_norm_partial(const void* data, Scalar type, int64_t n, NormKind kind, double* acc);
// The total norm from count per-tensor accumulators, as clip_grad.cpp's two stages compute it:
// each tensor's norm rounded to the result dtype (float32 unless result_f64), combined with
// the same norm, finished and rounded again; written to out[0] (one thread).
void launch_norm_finish(const double* accs, int64_t count, NormKind kind, bool result_f64,
                        double* out);
// x = x * coef in place over n contiguous elements (coef converted to the arithmetic type;
// fp16/bf16 rounded once). False for another type.
bool launch_scale_inplace(void* data, Scalar type, int64_t n, double coef);

}  // namespace mantissa::cuda::detail
