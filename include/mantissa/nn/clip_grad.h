#pragma once
// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_ and the two halves of
// clip_grad_norm_, get_total_norm and clip_grads_with_norm_). Gradients are changed in place;
// parameters without a gradient are skipped. Under fp16 loss scaling, call
// GradScaler::unscale_(optimizer) first so the clip sees true gradients (docs/grad_scaler.md).
//
// Numerics: each gradient's norm is accumulated in double with a fixed chunking (the same
// result for any thread count) and rounded to the result dtype, then the per-gradient norms
// are combined with the same norm, as PyTorch's two stages do. The result dtype is float64
// when any gradient is float64 and float32 otherwise (PyTorch would give an fp16/bf16 norm for
// all-fp16/bf16 gradients; mantissa keeps fp32 so the norm itself cannot overflow).
#include <optional>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::nn::utils {

// Scales all gradients of `parameters` together so that their total norm_type-norm (the
// norm of all gradients concatenated) is at most max_norm: every gradient is multiplied by
// min(max_norm / (total_norm + 1e-6), 1), always (also when the factor is 1, so a NaN norm
// spreads NaN like PyTorch). norm_type: any p (2 by default), +-infinity, or 0 (count of
// non-zeros). Returns the total norm before clipping as a 0-dim tensor (0.0 when no parameter
// has a gradient). error_if_nonfinite: throw, leaving gradients untouched, when the total norm
// is inf or NaN; keep it false under fp16 loss scaling so the scaler can skip the step instead.
// foreach is accepted for PyTorch parity and ignored (there is one CPU implementation).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false,
                       std::optional<bool> foreach = std::nullopt);

// Clamps every gradient element into [-clip_value, clip_value] (bounds rounded to the gradient
// dtype first; NaN stays NaN; a negative clip_value sets every element to clip_value, as
// torch.clamp with min > max does).
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value,
                      std::optional<bool> foreach = std::nullopt);

// The total norm of `tensors` (gradients, not parameters) as clip_grad_norm_ computes it.
Tensor get_total_norm(const std::vector<Tensor>& tensors, double norm_type = 2.0,
                      bool error_if_nonfinite = false, std::optional<bool> foreach = std::nullopt);

// Multiplies the gradients of `parameters` by min(max_norm / (total_norm + 1e-6), 1), the
// coefficient computed in total_norm's dtype.
void clip_grads_with_norm_(const std::vector<Tensor>& parameters, double max_norm,
                           const Tensor& total_norm, std::optional<bool> foreach = std::nullopt);

}  // namespace mantissa::nn::utils
