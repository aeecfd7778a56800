// What TrainModule::log records: per step and per epoch values, their means over an epoch or
// an evaluation, and the rows the loggers get.
#include "mantissa/train/trainer.h"

#include <optional>

#include "mantissa/core/error.h"

namespace mantissa::train {

void Trainer::log_metric(const std::string& name, double value, bool prog_bar,
                         std::optional<bool> on_step, std::optional<bool> on_epoch) {
  MANTISSA_CHECK(!stage_.empty(), "TrainModule.log",
                 "log('{}') called outside fit, validate or test", name);
  const bool training = stage_ == "train";
  // In on_train_epoch_end a value is the epoch's, as in Lightning: logged on_step it reached
  // the loggers only with a later step's row, in the next epoch (the last epoch's never).
  const bool step = on_step.value_or(training && !in_train_epoch_end_);
  const bool epoch = on_epoch.value_or(!training || in_train_epoch_end_);
  // Logged both per step and per epoch (Lightning's forked metric): the loggers get
  // <name>_step and <name>_epoch, as Lightning's do (one column mixed step values and epoch
  // means), callback_metrics both of those and <name>, the latest of the two.
  const bool forked = step && epoch;
  if (step) {
    // The loggers' step rows are training steps: a validation or test value logged on_step
    // went into the next training step's row, under that step's number.
    if (training) step_metrics_[name] = {value, forked};
    callback_metrics_[name] = value;
    if (forked) callback_metrics_[name + "_step"] = value;
  }
  if (epoch) {
    auto& s = (training ? epoch_sums_ : eval_sums_)[name];
    s.sum += value;
    s.count += 1;
    s.forked = forked;
    // The epoch is over: its monitoring callbacks (ModelCheckpoint, EarlyStopping) come next.
    if (in_train_epoch_end_) callback_metrics_[name] = s.sum / static_cast<double>(s.count);
  }
  if (prog_bar) prog_bar_metrics_[name] = value;
}

void Trainer::flush_epoch_metrics(std::map<std::string, EpochSum>& sums, int64_t step) {
  std::map<std::string, double> row;
  for (const auto& [name, s] : sums) {
    const double mean = s.sum / static_cast<double>(s.count);
    callback_metrics_[name] = mean;
    if (s.forked) callback_metrics_[name + "_epoch"] = mean;
    row[s.forked ? name + "_epoch" : name] = mean;
    if (prog_bar_metrics_.count(name)) prog_bar_metrics_[name] = mean;
  }
  sums.clear();
  if (!row.empty() && !sanity_checking_) send_to_loggers(row, step);
}

void Trainer::send_to_loggers(const std::map<std::string, double>& metrics) {
  send_to_loggers(metrics, logger_step_);
}

void Trainer::send_to_loggers(const std::map<std::string, double>& metrics, int64_t step) {
  if (options_.loggers.empty()) return;
  std::map<std::string, double> row = metrics;
  row.emplace("epoch", static_cast<double>(epoch_));  // a logged "epoch" wins, as in Lightning
  for (auto& l : options_.loggers) l->log_metrics(row, step);
}

}  // namespace mantissa::train
