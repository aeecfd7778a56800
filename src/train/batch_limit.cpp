#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "mantissa/core/error.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

BatchLimit BatchLimit::batches(int64_t n) {
  MANTISSA_CHECK(n >= 0, "Trainer", "a batch count must not be negative, got {}", n);
  BatchLimit l;
  l.is_fraction_ = false;
  l.value_ = static_cast<double>(n);
  return l;
}

BatchLimit BatchLimit::fraction(double f) {
  MANTISSA_CHECK(std::isfinite(f) && f >= 0 && f <= 1, "Trainer",
                 "a fraction of an epoch must be in [0, 1], got {}", f);
  BatchLimit l;
  l.value_ = f;
  return l;
}

namespace {
int64_t truncated(int64_t total, double fraction) {
  return static_cast<int64_t>(static_cast<double>(total) * fraction);
}

// The smallest fraction of three significant digits that leaves one batch of `total`: 1/total
// rounded up (0.334 for 3; 1/3 printed as 0.333333 would leave none), checked with the same
// arithmetic the limit uses.
std::string smallest_fraction(int64_t total) {
  int digits = 3;  // three significant digits of 1/total: 0.125 for 8, 0.0123 for 81
  for (int64_t t = total; t >= 10 && digits < 18; t /= 10) ++digits;
  int64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  // Integer arithmetic for the rounding up; the result is then checked as the limit computes.
  int64_t k = (scale + total - 1) / total;
  auto as_fraction = [&] { return static_cast<double>(k) / static_cast<double>(scale); };
  while (truncated(total, as_fraction()) < 1) ++k;
  std::string text = fmt::format("{}", std::min(as_fraction(), 1.0));
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // still read as a fraction
  return text;
}
}  // namespace

int64_t BatchLimit::resolve(int64_t total, std::string_view option, std::string_view loader) const {
  if (!is_fraction_) return std::min(total, static_cast<int64_t>(value_));
  const int64_t n = truncated(total, value_);
  // Lightning's check and message (_parse_num_batches): a fraction that leaves no batch is a
  // request that cannot be met, not "one batch" (a run validating on one batch reports a
  // number that describes almost none of the data) nor "no batch" (0 turns validation off).
  MANTISSA_CHECK(n > 0 || value_ == 0 || total == 0, "Trainer",
                 "You requested to check {} of the {} dataloader but {} * {} < 1. Please "
                 "increase the {} argument. Try at least {}={} (or a batch count such as 1)",
                 value_, loader, value_, total, option, option, smallest_fraction(total));
  return n;
}

int64_t BatchLimit::resolve_interval(int64_t total) const {
  if (!is_fraction_) return std::min(total, static_cast<int64_t>(value_));
  if (value_ == 0) return 0;
  return std::max<int64_t>(std::min<int64_t>(1, total), truncated(total, value_));
}

}  // namespace mantissa::train
