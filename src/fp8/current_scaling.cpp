#include "mantissa/fp8/current_scaling.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/autocast.h"

namespace mantissa::fp8 {

float tensor_amax(const Tensor& x) {
  MANTISSA_CHECK(!x.is_cuda(), "fp8 current scaling",
                 "the current recipe casts CPU tensors only; got a tensor on {}", x.device().str());
  const Tensor c = x.detach().contiguous();
  MANTISSA_CHECK(c.dtype() == kFloat32 || c.dtype() == kBFloat16 || c.dtype() == kFloat16,
                 "fp8 current scaling", "expected a float32, bfloat16 or float16 tensor, got {}",
                 c.dtype().name());
  return kernels::fp8::amax(c.data_ptr(), c.dtype(), c.numel()).amax;
}

float current_scale(float amax, float fp8_max, bool power_2, float epsilon) {
  // NaN fails every comparison: it is caught below, as in TE.
  if (amax < epsilon) amax = epsilon;
  if (std::isinf(amax) || amax == 0.0f || std::isnan(amax)) return 1.0f;
  float scale = fp8_max / amax;
  if (std::isinf(scale)) scale = std::numeric_limits<float>::max();
  if (power_2) scale = std::bit_cast<float>(std::bit_cast<uint32_t>(scale) & 0xFF800000u);
  return scale;
}

float current_scale_for(float amax, DType fp8, const Recipe& recipe) {
  return current_scale(amax, fp8_max(fp8), recipe.use_power_2_scales, recipe.amax_epsilon);
}

Fp8Tensor quantize_current(const Tensor& x, DType fp8, ScalingState& state, int slot,
                           const Recipe& recipe, bool widen) {
  float amax = tensor_amax(x);
  reduce_amaxes_across_ranks(&amax, 1);
  const float scale = current_scale_for(amax, fp8, recipe);
  QuantizeResult r = quantize(x, fp8, scale, widen);
  state.set_last_cast(slot, amax, scale);
  state.add_counts(slot, r.counts);
  return r.q;
}

}  // namespace mantissa::fp8
