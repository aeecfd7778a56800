#pragma once
// The two device ops behind GradScaler (PyTorch's _amp_foreach_non_finite_check_and_unscale_
// and _amp_update_scale_), kept apart from the scaler's bookkeeping so a CUDA backend can
// supply its own versions behind the same signatures. Both work in place on small state
// tensors and never read a value back to the caller (no host sync on a device).
#include <cstdint>
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::amp {

// For every element of every grad: widens it to its arithmetic type (fp32 for fp16/bf16),
// sets found_inf to 1.0 when it is +-inf or NaN, and writes back v * inv_scale (v unchanged
// when inv_scale is exactly 1). Non-finite values are multiplied too, so grads are modified
// even when an overflow is found. found_inf is only ever set, never cleared: the caller zeroes
// it. Preconditions (checked, mantissa::Error otherwise): found_inf and inv_scale are
// 1-element float32 tensors on the grads' device; every grad is defined, float64, float32,
// float16 or bfloat16, and all share one dtype and device. Any strides are accepted.
void foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads,
                                           const Tensor& found_inf, const Tensor& inv_scale);

// The dynamic loss-scale update rule, in place on a 1-element float32 scale and a 1-element
// int32 growth tracker:
//   found_inf != 0: scale = fp32(scale * backoff_factor) (product in double), tracker = 0
//   otherwise:      tracker + 1 == growth_interval ? (grow when fp32(scale * growth_factor)
//                   is finite; tracker = 0) : tracker += 1
// Equality, not >=: an interval <= 0 never grows. There is no floor.
void update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                   double growth_factor, double backoff_factor, int64_t growth_interval);

}  // namespace mantissa::amp
