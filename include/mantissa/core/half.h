#pragma once
// IEEE binary16 scalar. Conversions are exact widening and round-to-nearest-even narrowing with
// subnormals, signed zero, inf and NaN; NaN keeps its sign and top payload bits and is made
// quiet in both directions, exactly as the F16C instructions VCVTPS2PH / VCVTPH2PS do, so SIMD
// and scalar paths agree bit for bit.
#include <bit>
#include <cstdint>

namespace mantissa {

constexpr float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {
    // Inf, or NaN made quiet (payload kept) as VCVTPH2PS does, so bulk and scalar agree.
    const uint32_t quiet = mant != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mant << 13));
  }
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal: value = mant * 2^-24, exact in float.
  const float mag = static_cast<float>(mant) * 5.9604644775390625e-08f;
  return sign ? -mag : mag;
}

constexpr uint16_t float_to_half_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u | ((x >> 13) & 0x3ffu);  // NaN: quiet, keep payload
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf (or is inf)
  if (x < 0x38800000u) {
    // Result is subnormal or zero: adding 0.5 aligns the binary point so the FPU's own RNE
    // rounds at 2^-24, then the low bits are the half mantissa.
    const float r = std::bit_cast<float>(x) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(r) - 0x3f000000u);
  }
  const uint32_t mant_odd = (x >> 13) & 1u;
  x += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round half to even
  return sign | static_cast<uint16_t>(x >> 13);
}

struct Half {
  uint16_t x = 0;
  constexpr Half() = default;
  constexpr Half(float f) : x(float_to_half_bits(f)) {}  // NOLINT: implicit like c10::Half
  static constexpr Half from_bits(uint16_t bits) {
    Half h;
    h.x = bits;
    return h;
  }
  constexpr operator float() const { return half_bits_to_float(x); }  // NOLINT
};

}  // namespace mantissa
