// FP8 scalar conversions (docs/numerics.md, "FP8 formats"). Encoding is core/fp8_encode.h's
// integer arithmetic on the float32 bit pattern, shared with the GPU's casts.
#include "mantissa/core/float8.h"

#include <bit>

#include "core/fp8_encode.h"
#include "mantissa/core/half.h"

namespace mantissa {

float fp8_e4m3_bits_to_float(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exp = (b >> 3) & 0xfu;
  const uint32_t mant = b & 0x7u;
  if (exp == 0xf && mant == 0x7) return std::bit_cast<float>(sign | 0x7fc00000u);
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 120u) << 23) | (mant << 20));
  // Subnormal: mant * 2^-9, exact in float.
  const float mag = static_cast<float>(mant) * 0.001953125f;
  return sign ? -mag : mag;
}

// E5M2 is the high byte of an fp16 pattern; decoding through half keeps NaN handling the same
// as fp16's (quiet, sign and payload kept).
float fp8_e5m2_bits_to_float(uint8_t b) {
  return half_bits_to_float(static_cast<uint16_t>(b << 8));
}

uint8_t float_to_fp8_e4m3_bits(float f, Fp8Saturation mode) {
  return fp8_encode::e4m3_bits(std::bit_cast<uint32_t>(f), mode == Fp8Saturation::kSatFinite);
}

uint8_t float_to_fp8_e5m2_bits(float f, Fp8Saturation mode) {
  return fp8_encode::e5m2_bits(std::bit_cast<uint32_t>(f), mode == Fp8Saturation::kSatFinite);
}

}  // namespace mantissa
