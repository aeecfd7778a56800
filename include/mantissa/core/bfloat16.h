#pragma once
// bfloat16 scalar: the top half of a float32. Narrowing rounds to nearest even (not the
// truncation some libraries use), keeps subnormals, and quiets NaN while keeping its sign.
#include <bit>
#include <cstdint>

namespace mantissa {

constexpr float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

constexpr uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding_bias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding_bias) >> 16);
}

struct BFloat16 {
  uint16_t x = 0;
  constexpr BFloat16() = default;
  constexpr BFloat16(float f) : x(float_to_bf16_bits(f)) {}  // NOLINT: implicit like c10
  static constexpr BFloat16 from_bits(uint16_t bits) {
    BFloat16 b;
    b.x = bits;
    return b;
  }
  constexpr operator float() const { return bf16_bits_to_float(x); }  // NOLINT
};

}  // namespace mantissa
