#pragma once
// Internal: NVFP4's E4M3 block scale codes from the amax's bits by compares, for the SIMD casts
// (nvfp4_rows_avx2.cpp, nvfp4_cast_avx512.cpp): the thresholds one tensor scale gives, made once
// per tensor scale and thread.
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
// divides. The SIMD levels count the compares in their lanes (nvfp4_rows_avx2.cpp,
// nvfp4_cast_avx512.cpp).
struct Nvfp4ScaleCodeThresholds {
  int32_t base = 0;      // A9's bits
  int32_t step[7] = {};  // A(10 + j) - A9 - 1: a signed compare's right side
  uint32_t tensor_scale_bits = 0;
  bool made = false;
  bool ok = false;

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

  void make(float tensor_scale) {
    tensor_scale_bits = scalar::bits_of(tensor_scale);
    made = true;
    ok = false;
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
