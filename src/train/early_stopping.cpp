#include "mantissa/train/early_stopping.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : options_(std::move(options)) {
  MANTISSA_CHECK(!options_.monitor.empty(), "EarlyStopping",
                 "monitor must name a logged metric (e.g. \"val_loss\")");
  MANTISSA_CHECK(options_.mode == "min" || options_.mode == "max", "EarlyStopping",
                 "mode must be 'min' or 'max', got '{}'", options_.mode);
  MANTISSA_CHECK(options_.patience >= 0, "EarlyStopping", "patience must be >= 0, got {}",
                 options_.patience);
  MANTISSA_CHECK(std::isfinite(options_.min_delta), "EarlyStopping",
                 "min_delta must be finite, got {}", options_.min_delta);
}

std::string EarlyStopping::state_key() const {
  return fmt::format("EarlyStopping{{monitor={}, mode={}}}", options_.monitor, options_.mode);
}

void EarlyStopping::setup(Trainer& trainer, TrainModule&, const std::string&) {
  const TrainerOptions& t = trainer.options();
  check_on_train_epoch_end_ = options_.check_on_train_epoch_end.value_or(
      t.val_check_interval.is_fraction() && t.val_check_interval.value() == 1.0 &&
      t.check_val_every_n_epoch == 1);
}

bool EarlyStopping::better(double a, double b) const {
  return options_.mode == "min" ? a < b : a > b;
}

void EarlyStopping::on_train_epoch_end(Trainer& trainer, TrainModule&) {
  // An epoch that check_val_every_n_epoch leaves without validation has no new value to judge
  // (Lightning checks after the validations then): checking would count the last validation's
  // value again, or find none after the first epoch.
  if (check_on_train_epoch_end_ && !trainer.epoch_skips_validation()) check(trainer);
}

void EarlyStopping::on_validation_end(Trainer& trainer, TrainModule&) {
  if (!check_on_train_epoch_end_ && !trainer.sanity_checking()) check(trainer);
}

std::string EarlyStopping::evaluate(double current) {
  const std::string& m = options_.monitor;
  if (options_.check_finite && !std::isfinite(current)) {
    return fmt::format("Monitored metric {} = {} is not finite. Previous best value was {}.", m,
                       current, best_score_ ? fmt::format("{:.3f}", *best_score_) : "none");
  }
  if (options_.stopping_threshold &&
      (better(current, *options_.stopping_threshold) || current == *options_.stopping_threshold)) {
    return fmt::format("Stopping threshold reached: {} = {} {} {}.", m, current,
                       options_.mode == "min" ? "<=" : ">=", *options_.stopping_threshold);
  }
  if (options_.divergence_threshold && better(*options_.divergence_threshold, current)) {
    return fmt::format("Divergence threshold reached: {} = {} {} {}. Signaling Trainer to stop.", m,
                       current, options_.mode == "min" ? ">" : "<", *options_.divergence_threshold);
  }
  // An improvement beats the best by more than |min_delta|.
  const double delta = std::fabs(options_.min_delta);
  const double shifted = options_.mode == "min" ? current + delta : current - delta;
  // Before the first value the best is the worst possible, as in Lightning (torch.inf for
  // "min"): a NaN (with check_finite = false) is then no improvement. Taken as the best, it
  // was one nothing could beat, and the run stopped after `patience` checks however much the
  // metric improved.
  const double best = best_score_.value_or(options_.mode == "min" ? INFINITY : -INFINITY);
  if (better(shifted, best)) {
    best_score_ = current;
    wait_count_ = 0;
    return "";
  }
  ++wait_count_;
  if (wait_count_ >= options_.patience) {
    return fmt::format(
        "Monitored metric {} did not improve in the last {} records. Best score: {:.3f}.", m,
        wait_count_, best);
  }
  return "";
}

void EarlyStopping::check(Trainer& trainer) {
  const auto& metrics = trainer.callback_metrics();
  auto it = metrics.find(options_.monitor);
  if (it == metrics.end()) {
    std::vector<std::string> keys;
    for (const auto& kv : metrics) keys.push_back(kv.first);
    const std::string msg = fmt::format(
        "early stopping is conditioned on the metric '{}', which is not available; use one of "
        "[{}] or log it in the TrainModule",
        options_.monitor, fmt::join(keys, ", "));
    MANTISSA_CHECK(!options_.strict, "EarlyStopping", "{}", msg);
    warn(msg);
    return;
  }
  const std::string reason = evaluate(it->second);
  if (reason.empty()) return;
  trainer.should_stop = true;
  stopped_epoch_ = trainer.current_epoch();
  stopped_reason_ = reason;
  if (options_.verbose) fmt::print("mantissa: early stopping: {}\n", reason);
}

nlohmann::json EarlyStopping::state_dict() const {
  nlohmann::json j;
  j["wait_count"] = wait_count_;
  j["stopped_epoch"] = stopped_epoch_;
  j["best_score"] = best_score_ ? nlohmann::json(*best_score_) : nlohmann::json(nullptr);
  j["patience"] = options_.patience;
  return j;
}

void EarlyStopping::load_state_dict(const nlohmann::json& state) {
  try {
    const int64_t wait = state.at("wait_count").get<int64_t>();
    const int64_t stopped = state.at("stopped_epoch").get<int64_t>();
    MANTISSA_CHECK(wait >= 0 && stopped >= 0, "EarlyStopping",
                   "checkpoint state has negative wait_count or stopped_epoch");
    const auto& best = state.at("best_score");
    best_score_.reset();
    if (!best.is_null()) best_score_ = best.get<double>();
    wait_count_ = wait;
    stopped_epoch_ = stopped;
  } catch (const nlohmann::json::exception& e) {
    fail("EarlyStopping", "corrupt callback state in checkpoint: {}", e.what());
  }
}

}  // namespace mantissa::train
