#pragma once
// Internal: scalar pieces of the 4-bit product for few rows (four_bit_gemv.h) shared by its
// levels: the code of one element and the rounding of a block's values (the lanes' sum is
// common/sixteen_lane_sum.h).
#include <cstdint>

#include "mantissa/core/bfloat16.h"
#include "mantissa/core/dtype.h"
#include "mantissa/core/half.h"

namespace mantissa::kernels::quant {

// The code of flat element e: the high nibble of its byte for even e, the low one for odd e.
inline int four_bit_code_at(const uint8_t* packed, int64_t e) {
  const uint8_t b = packed[e >> 1];
  return (e & 1) ? (b & 15) : (b >> 4);
}

// How a block's values are rounded: not at all (float32 weights), or to nearest even in
// bfloat16 or float16.
enum class ValueRounding { kNone, kBf16, kF16 };

inline ValueRounding value_rounding(DType dtype) {
  return dtype == kBFloat16  ? ValueRounding::kBf16
         : dtype == kFloat16 ? ValueRounding::kF16
                             : ValueRounding::kNone;
}

// v rounded so, as a float.
inline float round_value(float v, ValueRounding r) {
  if (r == ValueRounding::kBf16) return bf16_bits_to_float(float_to_bf16_bits(v));
  if (r == ValueRounding::kF16) return half_bits_to_float(float_to_half_bits(v));
  return v;
}

}  // namespace mantissa::kernels::quant
