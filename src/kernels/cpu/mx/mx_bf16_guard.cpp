// The bf16 tile's guard of the block-format product (mx_bf16_guard.h).
#include "kernels/cpu/mx/mx_bf16_guard.h"

#include <algorithm>
#include <bit>

namespace mantissa::kernels::mx {
namespace {

// An operand's values: multiples of 2^lo, magnitudes below 2^hi.
struct Range {
  int lo, hi;
};

Range range_of(const MxOperandView& v) {
  const int step = v.element == Element::kE4m3 ? -9 : (v.element == Element::kE5m2 ? -16 : -1);
  const int top = v.element == Element::kE4m3 ? 9 : (v.element == Element::kE5m2 ? 16 : 3);
  if (v.nvfp4) return {step - 9, top + 9};  // E4M3 scales: multiples of 2^-9 below 2^9
  // E8M0 scales 2^(code - 127); the NaN code 0xFF is skipped (its values are NaN, which the
  // panel packing finds).
  const int64_t n = v.blocks == MxBlocks::kAlongColumns
                        ? (v.rows + kMxBlock - 1) / kMxBlock * v.cols
                        : v.rows * ((v.cols + kMxBlock - 1) / kMxBlock);
  uint8_t lo = 0xFF, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t c = v.scales[i];
    lo = std::min(lo, c);
    hi = std::max<uint8_t>(hi, c == 0xFF ? 0 : c);
  }
  return {step + lo - 127, top + hi - 127};
}

}  // namespace

bool bf16_sums_exact(const MxOperandView& a, const MxOperandView& b, int64_t K) {
  const Range ra = range_of(a), rb = range_of(b);
  const int log2k = K > 1 ? std::bit_width(static_cast<uint64_t>(K - 1)) : 0;
  return ra.lo >= -126 && rb.lo >= -126 && ra.lo + rb.lo >= -126 && ra.hi <= 127 && rb.hi <= 127 &&
         ra.hi + rb.hi + log2k <= 127;
}

}  // namespace mantissa::kernels::mx
