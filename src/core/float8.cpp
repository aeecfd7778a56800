// FP8 scalar conversions (docs/numerics.md, "FP8 formats"). Encoding works on the float32 bit
// pattern with integer arithmetic only, so the result is one exact RNE rounding from float32 and
// does not depend on the FPU rounding mode or on FTZ/DAZ.
#include "mantissa/core/float8.h"

#include <bit>

#include "mantissa/core/half.h"

namespace mantissa {
namespace {

constexpr uint32_t kNaNCode = 0x7f;

// Rounds m / 2^shift to the nearest integer, ties to even. shift is in [1, 31].
constexpr uint32_t shift_rne(uint32_t m, uint32_t shift) {
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

// Magnitude code for |x| (bits a, not NaN) in a format with kMant mantissa bits and bias kBias.
// The result may exceed the largest finite code; the caller handles overflow.
template <int kMant, int kBias>
constexpr uint32_t encode_magnitude(uint32_t a) {
  // Exponent field of the smallest normal FP8 value, as a float32 biased exponent.
  constexpr uint32_t kMinNormalExp = 128u - kBias;
  const uint32_t exp = a >> 23;
  if (exp >= kMinNormalExp) {
    // Normal range: drop the extra mantissa bits with RNE (a carry into the exponent is the
    // correct next binade), then rebias the exponent.
    constexpr uint32_t kDrop = 23 - kMant;
    const uint32_t r = a + ((1u << (kDrop - 1)) - 1u) + ((a >> kDrop) & 1u);
    return (r >> kDrop) - ((127u - kBias) << kMant);
  }
  // Subnormal range: count units of the subnormal quantum 2^(1 - bias - mant). Rounding up to
  // 2^mant units gives the smallest normal code, which is the right answer.
  const uint32_t m = (a & 0x7fffffu) | (exp != 0 ? 0x800000u : 0u);
  const uint32_t e = exp != 0 ? exp : 1u;  // float32 subnormals share the exponent of 2^-126
  const uint32_t shift = 151u - kBias - kMant - e;
  if (shift >= 25u) return 0;  // m < 2^24 <= half a quantum: rounds to zero
  return shift_rne(m, shift);
}

template <int kMant, int kBias, uint32_t kMaxCode, uint32_t kNoSatOverflowCode>
uint8_t encode(float f, Fp8Saturation mode) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t a = x & 0x7fffffffu;
  // NaN loses its sign in both modes: CUDA's conversion canonicalises it to 0x7F first.
  if (a > 0x7f800000u) return kNaNCode;
  // Infinity rounds past the largest code, so it takes the overflow branch too.
  const uint32_t code = a == 0x7f800000u ? kMaxCode + 1 : encode_magnitude<kMant, kBias>(a);
  if (code > kMaxCode) {
    return static_cast<uint8_t>(
        sign | (mode == Fp8Saturation::kSatFinite ? kMaxCode : kNoSatOverflowCode));
  }
  return static_cast<uint8_t>(sign | code);
}

}  // namespace

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
  // E4M3 "fn" has no inf: overflow without saturation gives NaN with the sign kept.
  return encode<3, 7, 0x7eu, 0x7fu>(f, mode);
}

uint8_t float_to_fp8_e5m2_bits(float f, Fp8Saturation mode) {
  return encode<2, 15, 0x7bu, 0x7cu>(f, mode);
}

}  // namespace mantissa
