#include "mantissa/fp8/current_scaling.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/autocast.h"

namespace mantissa::fp8 {
namespace {

// The largest magnitude among n IEEE values of `Bits`, as bits, NaN passed over: with the sign
// cleared, a non-NaN value's bits order as its magnitude does, and every NaN's bits lie above
// infinity's, so NaNs are mapped to 0 before the integer max.
template <typename Bits>
Bits max_magnitude_bits(const Bits* p, int64_t n, Bits abs_mask, Bits inf_bits) {
  Bits best = 0;
#pragma omp parallel for schedule(static) reduction(max : best) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    Bits a = static_cast<Bits>(p[i] & abs_mask);
    a = a > inf_bits ? Bits{0} : a;
    best = a > best ? a : best;
  }
  return best;
}

}  // namespace

float tensor_amax(const Tensor& x) {
  MANTISSA_CHECK(!x.is_cuda(), "fp8 current scaling",
                 "the current recipe casts CPU tensors only; got a tensor on {}", x.device().str());
  const Tensor c = x.detach().contiguous();
  const int64_t n = c.numel();
  if (n == 0) return 0.0f;
  if (c.dtype() == kFloat32) {
    const uint32_t bits = max_magnitude_bits<uint32_t>(static_cast<const uint32_t*>(c.data_ptr()),
                                                       n, 0x7FFFFFFFu, 0x7F800000u);
    return std::bit_cast<float>(bits);
  }
  uint16_t bits = 0;
  if (c.dtype() == kBFloat16) {
    bits =
        max_magnitude_bits<uint16_t>(static_cast<const uint16_t*>(c.data_ptr()), n, 0x7FFF, 0x7F80);
  } else if (c.dtype() == kFloat16) {
    bits =
        max_magnitude_bits<uint16_t>(static_cast<const uint16_t*>(c.data_ptr()), n, 0x7FFF, 0x7C00);
  } else {
    fail("fp8 current scaling", "expected a float32, bfloat16 or float16 tensor, got {}",
         c.dtype().name());
  }
  float out = 0.0f;
  convert_buffer(&bits, c.dtype(), &out, kFloat32, 1);
  return out;
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
