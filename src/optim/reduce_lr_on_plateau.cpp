// ReduceLROnPlateau (declared in lr_scheduler.h): torch's plateau rule, its options and running
// state, kept apart from the closed-form schedulers since it is driven by a metric.
#include <algorithm>
#include <cmath>

#include "mantissa/core/error.h"
#include "mantissa/io/untrusted_json.h"
#include "mantissa/optim/lr_scheduler.h"

namespace mantissa::optim {

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, Options options)
    : LRScheduler(optimizer), options_(std::move(options)) {
  check_options(options_, "ReduceLROnPlateau");
  best_ = options_.mode == "min" ? INFINITY : -INFINITY;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) current_lrs_.push_back(optimizer.lr(g));
  initial_step();
}

void ReduceLROnPlateau::check_options(const Options& o, const std::string& where) {
  MANTISSA_CHECK(o.mode == "min" || o.mode == "max", where, "mode must be 'min' or 'max', got '{}'",
                 o.mode);
  MANTISSA_CHECK(o.threshold_mode == "rel" || o.threshold_mode == "abs", where,
                 "threshold_mode must be 'rel' or 'abs', got '{}'", o.threshold_mode);
  MANTISSA_CHECK(o.factor > 0 && o.factor < 1, where, "factor must be in (0, 1), got {}", o.factor);
  MANTISSA_CHECK(o.patience >= 0, where, "patience must not be negative, got {}", o.patience);
  MANTISSA_CHECK(o.cooldown >= 0, where, "cooldown must not be negative, got {}", o.cooldown);
  // torch leaves these unchecked; a NaN or negative one would make every value better or worse
  // than the best, or floor the lr below zero.
  MANTISSA_CHECK(std::isfinite(o.min_lr) && o.min_lr >= 0, where,
                 "min_lr must be finite and not negative, got {}", o.min_lr);
  MANTISSA_CHECK(std::isfinite(o.threshold) && o.threshold >= 0, where,
                 "threshold must be finite and not negative, got {}", o.threshold);
  MANTISSA_CHECK(std::isfinite(o.eps) && o.eps >= 0, where,
                 "eps must be finite and not negative, got {}", o.eps);
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

void ReduceLROnPlateau::base_lrs_changed(const std::vector<double>& old_base_lrs) {
  // A new lr on resume keeps the plateau's shape at the new height, as a closed-form schedule
  // does: the lr reduced so far is scaled by new / old base (factor^k times the new base after
  // k reductions, unless min_lr stopped one; the reductions to come still stop at min_lr).
  for (size_t g = 0; g < current_lrs_.size(); ++g) {
    current_lrs_[g] =
        old_base_lrs[g] > 0 ? current_lrs_[g] * (base_lrs()[g] / old_base_lrs[g]) : base_lrs()[g];
  }
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
          {"eps", o.eps}};
}

nlohmann::json ReduceLROnPlateau::running_state_json() const {
  // JSON has no infinity: the initial best is written as null.
  return {{"best", best_},
          {"num_bad_epochs", num_bad_epochs_},
          {"cooldown_counter", cooldown_counter_},
          {"current_lrs", current_lrs_}};
}

ReduceLROnPlateau::Options ReduceLROnPlateau::saved_options(const nlohmann::json& state) const {
  Options o;
  o.mode = saved_setting(state, "mode", options_.mode);
  o.factor = saved_setting(state, "factor", options_.factor);
  o.patience = saved_setting(state, "patience", options_.patience);
  o.threshold = saved_setting(state, "threshold", options_.threshold);
  o.threshold_mode = saved_setting(state, "threshold_mode", options_.threshold_mode);
  o.cooldown = saved_setting(state, "cooldown", options_.cooldown);
  o.min_lr = saved_setting(state, "min_lr", options_.min_lr);
  o.eps = saved_setting(state, "eps", options_.eps);
  check_options(o, "ReduceLROnPlateau.load_state_dict");
  return o;
}

void ReduceLROnPlateau::load_hyper(const nlohmann::json& state) {
  // Everything is read and checked first, then set: an error leaves the scheduler as it was.
  // The options are adopted as torch's load_state_dict adopts them (it updates __dict__), so a
  // scheduler built with other options continues the saved one; a state without them (written
  // by hand) keeps the constructed ones.
  const char* where = "ReduceLROnPlateau.load_state_dict";
  const Options o = saved_options(state);
  for (const char* key : {"best", "num_bad_epochs", "cooldown_counter", "current_lrs"})
    MANTISSA_CHECK(state.contains(key), where, "the state lacks its '{}'", key);
  const nlohmann::json& b = state.at("best");
  MANTISSA_CHECK(b.is_null() || b.is_number(), where, "mistyped best: {}", io::json_excerpt(b));
  // null is the initial best, the infinity of the saved mode.
  const double best = b.is_null() ? (o.mode == "min" ? INFINITY : -INFINITY) : b.get<double>();
  int64_t bad = 0, cooldown = 0;
  for (auto [key, value] : {std::pair{"num_bad_epochs", &bad}, {"cooldown_counter", &cooldown}}) {
    const nlohmann::json& v = state.at(key);
    MANTISSA_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, where,
                   "{} must be a count (an integer, not negative), got {}", key,
                   io::json_excerpt(v));
    *value = v.get<int64_t>();
  }
  const nlohmann::json& saved_lrs = state.at("current_lrs");
  MANTISSA_CHECK(saved_lrs.is_array(), where, "mistyped current_lrs: {}",
                 io::json_excerpt(saved_lrs));
  std::vector<double> lrs;
  for (const nlohmann::json& lr : saved_lrs) {
    MANTISSA_CHECK(lr.is_number() && std::isfinite(lr.get<double>()) && lr.get<double>() >= 0,
                   where, "current_lrs must hold learning rates (numbers, not negative), got {}",
                   io::json_excerpt(lr));
    lrs.push_back(lr.get<double>());
  }
  MANTISSA_CHECK(lrs.size() == current_lrs_.size(), where,
                 "the state has {} param groups, the optimizer {}", lrs.size(),
                 current_lrs_.size());
  options_ = o;
  best_ = best;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cooldown;
  current_lrs_ = std::move(lrs);
}

}  // namespace mantissa::optim
