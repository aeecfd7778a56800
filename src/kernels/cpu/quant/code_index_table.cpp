// Builds the two-read nearest-index table of code_index_table.h.
#include "kernels/cpu/quant/code_index_table.h"

#include <algorithm>
#include <limits>

namespace mantissa::kernels::quant {
namespace {

// Number of midpoints strictly below x.
int count_below(const std::array<float, 256>& mid, float x) {
  return static_cast<int>(std::lower_bound(mid.begin(), mid.begin() + 255, x) - mid.begin());
}

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

}  // namespace

void CodeIndexTable::build(const float* code) {
  for (int i = 0; i < 255; ++i) mid[static_cast<size_t>(i)] = 0.5f * (code[i] + code[i + 1]);
  mid[255] = std::numeric_limits<float>::infinity();
  exact = true;
  for (int b = 0; b < kBinsPerSign; ++b) {
    // The magnitudes bin b covers: [lo, hi].
    float lo, hi;
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
    // Positive bin holds [lo, hi], the negative one [-hi, -lo].
    const int pos_first = count_below(mid, lo), pos_last = count_below(mid, hi);
    const int neg_first = count_below(mid, -hi), neg_last = count_below(mid, -lo);
    first[static_cast<size_t>(b)] = static_cast<uint8_t>(pos_first);
    first[static_cast<size_t>(kBinsPerSign + b)] = static_cast<uint8_t>(neg_first);
    if (pos_last - pos_first > 1 || neg_last - neg_first > 1) exact = false;
  }
}

}  // namespace mantissa::kernels::quant
