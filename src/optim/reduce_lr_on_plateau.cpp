// ReduceLROnPlateau (declared in lr_scheduler.h): torch's plateau rule, its options and running
// state, kept apart from the closed-form schedulers since it is driven by a metric.
#include <algorithm>
#include <cmath>

#include "mantissa/core/error.h"
#include "mantissa/optim/lr_scheduler.h"

namespace mantissa::optim {

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, Options options)
    : LRScheduler(optimizer), options_(std::move(options)) {
  const auto& o = options_;
  MANTISSA_CHECK(o.mode == "min" || o.mode == "max", "ReduceLROnPlateau",
                 "mode must be 'min' or 'max', got '{}'", o.mode);
  MANTISSA_CHECK(o.threshold_mode == "rel" || o.threshold_mode == "abs", "ReduceLROnPlateau",
                 "threshold_mode must be 'rel' or 'abs', got '{}'", o.threshold_mode);
  MANTISSA_CHECK(o.factor > 0 && o.factor < 1, "ReduceLROnPlateau",
                 "factor must be in (0, 1), got {}", o.factor);
  MANTISSA_CHECK(o.patience >= 0 && o.cooldown >= 0 && o.min_lr >= 0, "ReduceLROnPlateau",
                 "patience, cooldown and min_lr must not be negative");
  best_ = o.mode == "min" ? INFINITY : -INFINITY;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) current_lrs_.push_back(optimizer.lr(g));
  initial_step();
}

double ReduceLROnPlateau::lr_at(size_t group, int64_t /*epoch*/) const {
  return current_lrs_[group];
}

bool ReduceLROnPlateau::is_better(double a) const {
  const bool rel = options_.threshold_mode == "rel";
  if (options_.mode == "min") {
    return rel ? a < best_ * (1.0 - options_.threshold) : a < best_ - options_.threshold;
  }
  return rel ? a > best_ * (1.0 + options_.threshold) : a > best_ + options_.threshold;
}

void ReduceLROnPlateau::step() {
  fail("ReduceLROnPlateau.step",
       "needs the monitored value: call step(metric) (in a Trainer, set the scheduler config's "
       "monitor to a logged metric)");
}

void ReduceLROnPlateau::step(double metric) {
  MANTISSA_CHECK(!std::isnan(metric), "ReduceLROnPlateau.step", "the monitored value is NaN");
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  if (num_bad_epochs_ > options_.patience) {
    for (size_t g = 0; g < current_lrs_.size(); ++g) {
      const double old_lr = optimizer().lr(g);
      const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
      if (old_lr - new_lr > options_.eps) current_lrs_[g] = new_lr;
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  advance();
}

nlohmann::json ReduceLROnPlateau::hyper_json() const {
  const auto& o = options_;
  return {{"mode", o.mode},
          {"factor", o.factor},
          {"patience", o.patience},
          {"threshold", o.threshold},
          {"threshold_mode", o.threshold_mode},
          {"cooldown", o.cooldown},
          {"min_lr", o.min_lr},
          {"eps", o.eps},
          {"best", best_},
          {"num_bad_epochs", num_bad_epochs_},
          {"cooldown_counter", cooldown_counter_},
          {"current_lrs", current_lrs_}};
}

void ReduceLROnPlateau::load_hyper(const nlohmann::json& state) {
  // Read and checked first, then set: an error leaves the scheduler as it was.
  double best = 0;
  int64_t bad = 0, cooldown = 0;
  std::vector<double> lrs;
  try {
    // JSON has no infinity: the initial best is written as null.
    const auto& b = state.at("best");
    best = b.is_null() ? (options_.mode == "min" ? INFINITY : -INFINITY) : b.get<double>();
    bad = state.at("num_bad_epochs").get<int64_t>();
    cooldown = state.at("cooldown_counter").get<int64_t>();
    lrs = state.at("current_lrs").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    fail("ReduceLROnPlateau.load_state_dict", "missing or mistyped field: {}", e.what());
  }
  MANTISSA_CHECK(lrs.size() == current_lrs_.size(), "ReduceLROnPlateau.load_state_dict",
                 "the state has {} param groups, the optimizer {}", lrs.size(),
                 current_lrs_.size());
  best_ = best;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cooldown;
  current_lrs_ = std::move(lrs);
}

}  // namespace mantissa::optim
