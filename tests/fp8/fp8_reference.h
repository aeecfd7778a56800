#pragma once
// An FP8 reference for the recipe tests, worked out from the OCP FP8 formats alone (not the
// library's conversions): the value of every code, and the saturating round-to-nearest-even
// code of a float32 (NaN -> 0x7F, beyond the largest finite value -> ±max, ties to the even
// code, the sign kept for zero).
#include <cmath>
#include <cstdint>

namespace mantissa::fp8::reference {

// The value of an FP8 code (NaN for the NaN codes, ±inf for E5M2's infinities).
inline double decode(uint8_t code, bool e4m3) {
  const int sign = code >> 7;
  const int exp_bits = e4m3 ? 4 : 5, man_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int e = (code >> man_bits) & ((1 << exp_bits) - 1);
  const int m = code & ((1 << man_bits) - 1);
  if (e4m3 && e == 15 && m == 7) return std::nan("");
  if (!e4m3 && e == 31) return m == 0 ? (sign ? -INFINITY : INFINITY) : std::nan("");
  const double v = e == 0
                       ? std::ldexp(static_cast<double>(m), 1 - bias - man_bits)
                       : std::ldexp(static_cast<double>((1 << man_bits) + m), e - bias - man_bits);
  return sign ? -v : v;
}

inline uint8_t encode(float y, bool e4m3) {
  if (std::isnan(y)) return 0x7F;
  const double max = e4m3 ? 448.0 : 57344.0;
  const uint8_t sign = std::signbit(y) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(y));
  if (a >= max) return sign | (e4m3 ? 0x7E : 0x7B);
  uint8_t best = 0;
  double best_err = INFINITY;
  for (int c = 0; c < 128; ++c) {
    const double v = decode(static_cast<uint8_t>(c), e4m3);
    if (!std::isfinite(v)) continue;
    const double err = std::fabs(v - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = static_cast<uint8_t>(c);
      best_err = err;
    }
  }
  return sign | best;
}

}  // namespace mantissa::fp8::reference
