// Builds the one-read nearest-index table of code_index_table.h.
#include "kernels/cpu/quant/code_index_table.h"

#include <algorithm>
#include <limits>

namespace mantissa::kernels::quant {
namespace {

// Number of midpoints strictly below x.
int count_below(const std::array<float, 255>& mid, float x) {
  return static_cast<int>(std::lower_bound(mid.begin(), mid.end(), x) - mid.begin());
}

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

// The entry of one bin whose values run from `first_value` to `last_value` (in increasing
// order), all sharing their top 17 bits except in the end bins.
uint32_t make_entry(const std::array<float, 255>& mid, float first_value, float last_value,
                    bool end_bin, bool& exact) {
  const int first = count_below(mid, first_value);
  const int last = count_below(mid, last_value);
  uint32_t e = static_cast<uint32_t>(first) << 16;
  if (last == first) return e;
  if (last - first > 1 || end_bin) {
    exact = false;
    return e;
  }
  // One midpoint m = mid[first] inside: x is past it when m < x.
  return e | CodeIndexTable::kHasMidpoint |
         (std::bit_cast<uint32_t>(mid[static_cast<size_t>(first)]) & 0x7fffu);
}

}  // namespace

void CodeIndexTable::build(const float* code) {
  std::array<float, 255> mid;
  for (int i = 0; i < 255; ++i) mid[static_cast<size_t>(i)] = 0.5f * (code[i] + code[i + 1]);
  exact = true;
  for (int b = 0; b < kBinsPerSign; ++b) {
    // The magnitudes bin b covers: [lo, hi].
    float lo, hi;
    const bool end_bin = b == 0 || b == kBinsPerSign - 1;
    if (b == 0) {
      lo = 0.0f;
      hi = from_bits((kMinKey << 15) - 1);
    } else if (b == kBinsPerSign - 1) {
      lo = 1.0f;
      hi = std::numeric_limits<float>::infinity();
    } else {
      const uint32_t key = kMinKey + static_cast<uint32_t>(b) - 1;
      lo = from_bits(key << 15);
      hi = from_bits((key << 15) | 0x7fffu);
    }
    // Positive bin: [lo, hi]; negative bin: [-hi, -lo].
    entry[static_cast<size_t>(b)] = make_entry(mid, lo, hi, end_bin, exact);
    entry[static_cast<size_t>(kBinsPerSign + b)] = make_entry(mid, -hi, -lo, end_bin, exact);
  }
}

}  // namespace mantissa::kernels::quant
