#include <algorithm>
#include <cmath>

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

int64_t BatchLimit::resolve(int64_t total) const {
  if (!is_fraction_) return std::min(total, static_cast<int64_t>(value_));
  if (value_ == 0) return 0;
  // Lightning: int(total * fraction), at least one batch for a non-zero fraction.
  return std::max<int64_t>(std::min<int64_t>(1, total),
                           static_cast<int64_t>(static_cast<double>(total) * value_));
}

}  // namespace mantissa::train
