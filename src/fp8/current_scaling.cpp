#include "mantissa/fp8/current_scaling.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/autocast.h"

namespace mantissa::fp8 {

namespace {
// x as the current recipe's amax pass and cast read it.
Tensor checked_source(const Tensor& x) {
  MANTISSA_CHECK(!x.is_cuda(), "fp8 current scaling",
                 "the current recipe casts CPU tensors only; got a tensor on {}", x.device().str());
  Tensor c = x.detach().contiguous();
  MANTISSA_CHECK(c.dtype() == kFloat32 || c.dtype() == kBFloat16 || c.dtype() == kFloat16,
                 "fp8 current scaling", "expected a float32, bfloat16 or float16 tensor, got {}",
                 c.dtype().name());
  return c;
}
}  // namespace

float tensor_amax(const Tensor& x) {
  const Tensor c = checked_source(x);
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
  // quantize() that hands the cast this amax pass's result, which it need not take again.
  const Tensor src = checked_source(x);
  MANTISSA_CHECK(fp8.is_float8(), "fp8 quantize", "expected an FP8 dtype, got {}", fp8.name());
  const kernels::fp8::Amax local = kernels::fp8::amax(src.data_ptr(), src.dtype(), src.numel());
  float amax = local.amax;
  reduce_amaxes_across_ranks(&amax, 1);
  const float scale = current_scale_for(amax, fp8, recipe);
  Fp8Tensor q;
  q.data = empty(src.shape(), fp8);
  q.scale_inv = 1.0f / scale;
  auto* codes = static_cast<uint8_t*>(q.data.data_ptr());
  kernels::fp8::CastStats st;
  if (widen && gemm_widens_codes() && src.numel() > 0) {
    q.widened_codes = empty(src.shape(), kBFloat16);
    st = kernels::fp8::scaled_cast_widened_after_amax(
        src.data_ptr(), src.dtype(), codes, static_cast<uint16_t*>(q.widened_codes.data_ptr()),
        src.numel(), scale, fp8, local);
  } else {
    st = kernels::fp8::scaled_cast_after_amax(src.data_ptr(), src.dtype(), codes, src.numel(),
                                              scale, fp8, local);
  }
  state.set_last_cast(slot, amax, scale);
  state.add_counts(slot, {src.numel(), st.saturated, st.flushed,
                          static_cast<double>(st.amax) * scale / fp8_max(fp8)});
  return q;
}

}  // namespace mantissa::fp8
