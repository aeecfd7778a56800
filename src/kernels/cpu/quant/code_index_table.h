#pragma once
// Exact nearest-entry search in a sorted 256-entry quantization map (such as the dynamic maps
// of blockwise_dynamic.h) in two table reads instead of an eight-step binary search, so it
// vectorises with two gathers.
//
// The answer for x is the number of midpoints m[i] = 0.5f * (code[i] + code[i+1]) below x, which
// is the nearest entry with ties going to the lower index (nearest_code_index). The float line
// is cut into bins by sign, exponent and the top 8 mantissa bits (|x| < 2^-26 is one bin, |x|
// >= 1 another); first[bin] is the count at the bin's smallest value. The dynamic maps have at
// most one midpoint per bin (neighbours are >= 0.7% apart, bins 0.4% wide), so the count of x
// is first[bin] + (m[first[bin]] < x). build() checks this for every bin and reports whether
// the table is exact for the given map.
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace mantissa::kernels::quant {

struct CodeIndexTable {
  // |x| bins per sign: 1 for |x| < 2^-26, one per (exponent, 8 mantissa bits) up to 1.0, and
  // the last (|x| >= 1) holds 1.0 and everything above.
  static constexpr uint32_t kMinKey = (127u - 26u) << 8;  // bits(2^-26) >> 15
  static constexpr uint32_t kMaxKey = 127u << 8;          // bits(1.0f) >> 15
  static constexpr int kBinsPerSign = static_cast<int>(kMaxKey - kMinKey) + 2;

  // first[sign * kBinsPerSign + bin], padded by 4 bytes so a 32-bit gather at any entry stays
  // inside the array.
  std::array<uint8_t, 2 * kBinsPerSign + 4> first{};
  // Midpoints, padded with +inf at index 255 so first == 255 needs no special case.
  std::array<float, 256> mid{};
  bool exact = false;  // every bin holds at most one midpoint

  // Fills the table for `code` (256 sorted floats) and sets `exact`.
  void build(const float* code);

  // Bin of x: sign * kBinsPerSign + clamp((|bits| >> 15) - kMinKey + 1, 0, kBinsPerSign - 1).
  static int bin(float x) {
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    const uint32_t key = (bits & 0x7fffffffu) >> 15;
    int b = key < kMinKey ? 0 : static_cast<int>(key - kMinKey) + 1;
    if (b > kBinsPerSign - 1) b = kBinsPerSign - 1;
    return static_cast<int>(bits >> 31) * kBinsPerSign + b;
  }

  // The nearest entry's index (ties to the lower index) when `exact`; x must not be NaN.
  uint8_t index(float x) const {
    const int c = first[static_cast<size_t>(bin(x))];
    return static_cast<uint8_t>(c + (mid[static_cast<size_t>(c)] < x ? 1 : 0));
  }
};

}  // namespace mantissa::kernels::quant
