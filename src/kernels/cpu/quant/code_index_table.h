#pragma once
// Exact nearest-entry search in a sorted 256-entry quantization map (such as the dynamic maps
// of blockwise_dynamic.h) with one table read instead of an eight-step binary search, so it
// vectorises with one gather.
//
// The answer for x is the number of midpoints m[i] = 0.5f * (code[i] + code[i+1]) below x, which
// is the nearest entry with ties going to the lower index (nearest_code_index). The float line
// is cut into bins by sign, exponent and the top 8 mantissa bits (|x| < 2^-26 is one bin, |x|
// >= 1 another). Every float in a bin shares its top 17 bits, so a midpoint inside a bin is
// told apart by its low 15 bits. The dynamic maps have at most one midpoint per bin
// (neighbours are >= 0.7% apart, bins 0.4% wide), so one 32-bit entry per bin holds the count at
// the bin's start (bits 16..23), whether a midpoint lies inside (bit 15) and that midpoint's low
// 15 bits (bits 0..14). build() checks every bin and reports whether the table is exact for the
// given map.
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
  static constexpr uint32_t kHasMidpoint = 1u << 15;

  // entry[sign * kBinsPerSign + bin], see above.
  std::array<uint32_t, 2 * kBinsPerSign> entry{};
  bool exact = false;  // every bin holds at most one midpoint, and the end bins none

  // Fills the table for `code` (256 sorted floats) and sets `exact`.
  void build(const float* code);

  // Bin of x: sign * kBinsPerSign + clamp((|bits| >> 15) - kMinKey + 1, 0, kBinsPerSign - 1).
  static int bin(uint32_t bits) {
    const uint32_t key = (bits & 0x7fffffffu) >> 15;
    int b = key < kMinKey ? 0 : static_cast<int>(key - kMinKey) + 1;
    if (b > kBinsPerSign - 1) b = kBinsPerSign - 1;
    return static_cast<int>(bits >> 31) * kBinsPerSign + b;
  }

  // The nearest entry's index (ties to the lower index) when `exact`; x must not be NaN.
  uint8_t index(float x) const {
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    const uint32_t e = entry[static_cast<size_t>(bin(bits))];
    const uint32_t low = bits & 0x7fffu, mid = e & 0x7fffu;
    // Inside the bin, a larger |x| is further right for x > 0 and further left for x < 0.
    const bool past = (e & kHasMidpoint) && ((bits >> 31) ? low < mid : low > mid);
    return static_cast<uint8_t>((e >> 16) + (past ? 1 : 0));
  }
};

}  // namespace mantissa::kernels::quant
