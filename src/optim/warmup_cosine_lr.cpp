#include "mantissa/optim/warmup_cosine_lr.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "mantissa/core/error.h"

namespace mantissa::optim {

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                               double min_lr_ratio)
    : LRScheduler(optimizer),
      warmup_steps_(warmup_steps),
      total_steps_(total_steps),
      min_lr_ratio_(min_lr_ratio) {
  check_settings(warmup_steps, total_steps, min_lr_ratio);
  initial_step();
}

void WarmupCosineLR::check_settings(int64_t warmup_steps, int64_t total_steps,
                                    double min_lr_ratio) {
  MANTISSA_CHECK(warmup_steps >= 0 && total_steps >= 0, "WarmupCosineLR",
                 "warmup_steps and total_steps must not be negative, got {} and {}", warmup_steps,
                 total_steps);
  MANTISSA_CHECK(min_lr_ratio >= 0 && min_lr_ratio <= 1, "WarmupCosineLR",
                 "min_lr_ratio must be in [0, 1], got {}", min_lr_ratio);
}

void WarmupCosineLR::load_hyper(const nlohmann::json& state) {
  const int64_t warmup = saved_setting(state, "warmup_steps", warmup_steps_);
  const int64_t total = saved_setting(state, "total_steps", total_steps_);
  const double ratio = saved_setting(state, "min_lr_ratio", min_lr_ratio_);
  check_settings(warmup, total, ratio);
  warmup_steps_ = warmup;
  total_steps_ = total;
  min_lr_ratio_ = ratio;
}

double WarmupCosineLR::factor(int64_t step) const {
  if (step < warmup_steps_) {
    return static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
  }
  if (total_steps_ <= 0) return 1.0;
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps_ - warmup_steps_));
  const double t = std::min(1.0, static_cast<double>(step - warmup_steps_) / span);
  return min_lr_ratio_ + (1 - min_lr_ratio_) * 0.5 * (1 + std::cos(std::numbers::pi * t));
}

double WarmupCosineLR::lr_at(size_t group, int64_t epoch) const {
  return base_lrs()[group] * factor(epoch);
}

nlohmann::json WarmupCosineLR::hyper_json() const {
  return {{"warmup_steps", warmup_steps_},
          {"total_steps", total_steps_},
          {"min_lr_ratio", min_lr_ratio_}};
}

}  // namespace mantissa::optim
