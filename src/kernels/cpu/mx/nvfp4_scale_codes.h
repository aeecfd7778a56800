#pragma once
// Internal: NVFP4's E4M3 block scale codes from the amax's bits by compares, for the SIMD casts
// (nvfp4_rows_avx2.h, nvfp4_rows_bf16_avx2.cpp, nvfp4_cast_avx512.cpp): the thresholds one tensor
// scale gives, made once per tensor scale and thread.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/mx/mx_scalar.h"

namespace mantissa::kernels::mx::detail {

// The E4M3 scale codes of blocks from their amax's bits, under one tensor scale, by compares
// instead of scalar::nvfp4_block_scale's two divisions and encode. Its code is a function of the
// amax that never falls as the amax grows (each step rounds monotonically): 8 (the clamp at
// 2^-6) up to a threshold A9, then 9, .. up to 126 (the clamp at 448), Ak the least amax bits
// whose code is k or more. Where amax / 6 is a normal float from A9 on and A126 is finite,
// doubling the amax doubles s = (amax / 6) / tensor scale exactly, and E4M3 rounds 2s to the
// code 8 above s's: so A(k + 8) = Ak + 2^23 in bits, and with D = bits - A9 the code is
// 9 + 8 * (D >> 23) + the number of A10 - A9, .., A16 - A9 that D's low 23 bits reach, clamped to
// 8..126. The thresholds are found by scalar evaluations of nvfp4_block_scale near their guesses,
// and the doubling is checked at both ends (A17, A126); where it does not hold (a tensor scale
// so small or large that a division leaves the normal range), `ok` is false and the caller
// divides. The SIMD levels count the compares in their lanes (nvfp4_rows_avx2.h,
// nvfp4_cast_avx512.cpp).
struct Nvfp4ScaleCodeThresholds {
  int32_t base = 0;      // A9's bits
  int32_t step[7] = {};  // A(10 + j) - A9 - 1: a signed compare's right side
  // The same for amax that are bfloat16 values (bits whose low 16 are 0), in their high 16 bits:
  // Bk = ceil(Ak / 2^16), which doubling also moves by one octave (B(k + 8) = Bk + 128).
  int16_t base16 = 0;      // B9
  int16_t step16[7] = {};  // B(10 + j) - B9 - 1
  // The factors of codes 8..126 by their bits: factor_top[c & 7] - ((c >> 3) << 23), exact where
  // factors_ok. value(c + 8) = 2 value(c), so (1 / tensor scale) / value(c) halves with each
  // octave while it stays a normal float; every code is checked against the scalar division.
  int32_t factor_top[8] = {};
  uint32_t tensor_scale_bits = 0;
  bool made = false;
  bool ok = false;
  bool factors_ok = false;

  // The least amax bits in [0, 0x7F800000] whose code is k or more, walking from bits `guess`;
  // -1 when it lies more than 64 steps away.
  static int64_t least(int k, float tensor_scale, uint32_t guess) {
    auto reached = [&](uint32_t m) {
      return scalar::nvfp4_block_scale(scalar::float_of(m), tensor_scale).code >= k;
    };
    uint32_t m = std::min<uint32_t>(guess, 0x7F800000u);
    for (int step = 0; step < 64; ++step) {
      if (m > 0 && reached(m - 1)) {
        --m;
      } else if (!reached(m)) {
        if (m == 0x7F800000u) return -1;
        ++m;
      } else {
        return m;
      }
    }
    return -1;
  }

  // The factor of code c (8..126) as nvfp4_block_scale divides it.
  static float factor_of(int c, float tensor_scale) {
    return (1.0f / tensor_scale) / scalar::e4m3_value(static_cast<uint8_t>(c));
  }

  void make_factors(float tensor_scale) {
    factors_ok = false;
    for (int r = 0; r < 8; ++r) {
      const float f = factor_of(8 + r, tensor_scale);
      if (!(f > 0x1p-125f && f < 0x1p126f)) return;
      factor_top[r] = static_cast<int32_t>(scalar::bits_of(f)) + (1 << 23);
    }
    for (int c = 8; c <= 126; ++c)
      if (factor_top[c & 7] - ((c >> 3) << 23) !=
          static_cast<int32_t>(scalar::bits_of(factor_of(c, tensor_scale))))
        return;
    factors_ok = true;
  }

  void make(float tensor_scale) {
    tensor_scale_bits = scalar::bits_of(tensor_scale);
    made = true;
    ok = false;
    make_factors(tensor_scale);
    if (!(tensor_scale >= 0x1p-126f && tensor_scale < std::numeric_limits<float>::infinity()))
      return;
    int64_t a[10];  // A9 .. A17, then A126
    for (int k = 9; k <= 17; ++k) {
      // The code steps from k - 1 to k at s halfway between their values, amax = 6 * ts * s.
      const float s = 0.5f * (scalar::e4m3_value(static_cast<uint8_t>(k - 1)) +
                              scalar::e4m3_value(static_cast<uint8_t>(k)));
      a[k - 9] = least(k, tensor_scale, scalar::bits_of(s * kE2m1Max * tensor_scale));
      if (a[k - 9] < 0) return;
    }
    constexpr int64_t kOctave = int64_t{1} << 23;
    // A126 from A14, 14 octaves up.
    const int64_t top = a[14 - 9] + 14 * kOctave;
    if (top >= 0x7F800000 || a[17 - 9] != a[0] + kOctave ||
        scalar::float_of(static_cast<uint32_t>(a[0])) < 0x1p-123f)
      return;
    if (least(126, tensor_scale, static_cast<uint32_t>(top)) != top) return;
    base = static_cast<int32_t>(a[0]);
    for (int j = 0; j < 7; ++j) step[j] = static_cast<int32_t>(a[j + 1] - a[0] - 1);
    const auto high = [](int64_t bits) { return static_cast<int16_t>((bits + 0xFFFF) >> 16); };
    base16 = high(a[0]);
    for (int j = 0; j < 7; ++j) step16[j] = static_cast<int16_t>(high(a[j + 1]) - base16 - 1);
    ok = true;
  }
};

// This thread's thresholds for tensor_scale.
inline const Nvfp4ScaleCodeThresholds& nvfp4_scale_code_thresholds(float tensor_scale) {
  thread_local Nvfp4ScaleCodeThresholds t;
  if (!t.made || t.tensor_scale_bits != scalar::bits_of(tensor_scale)) t.make(tensor_scale);
  return t;
}

}  // namespace mantissa::kernels::mx::detail
