#pragma once
// OCP FP8 scalars (E4M3 "fn" and E5M2), docs/numerics.md "FP8 formats". Narrowing is one RNE
// rounding from float32. Saturating mode (TransformerEngine, the default) clamps overflow and inf
// to ±max and maps NaN to 0x7F; non-saturating mode (torch.to / __NV_NOSAT) gives NaN (E4M3) or inf
// (E5M2) on overflow.
#include <cstdint>

namespace mantissa {

enum class Fp8Saturation : uint8_t { kSatFinite, kNoSat };

float fp8_e4m3_bits_to_float(uint8_t b);
float fp8_e5m2_bits_to_float(uint8_t b);
uint8_t float_to_fp8_e4m3_bits(float f, Fp8Saturation mode = Fp8Saturation::kSatFinite);
uint8_t float_to_fp8_e5m2_bits(float f, Fp8Saturation mode = Fp8Saturation::kSatFinite);

struct Float8E4M3 {
  uint8_t x = 0;
  static constexpr float kMax = 448.0f;
  Float8E4M3() = default;
  Float8E4M3(float f) : x(float_to_fp8_e4m3_bits(f)) {}  // NOLINT: implicit, saturating
  static Float8E4M3 from_bits(uint8_t bits) {
    Float8E4M3 v;
    v.x = bits;
    return v;
  }
  operator float() const { return fp8_e4m3_bits_to_float(x); }  // NOLINT
};

struct Float8E5M2 {
  uint8_t x = 0;
  static constexpr float kMax = 57344.0f;
  Float8E5M2() = default;
  Float8E5M2(float f) : x(float_to_fp8_e5m2_bits(f)) {}  // NOLINT: implicit, saturating
  static Float8E5M2 from_bits(uint8_t bits) {
    Float8E5M2 v;
    v.x = bits;
    return v;
  }
  operator float() const { return fp8_e5m2_bits_to_float(x); }  // NOLINT
};

}  // namespace mantissa
