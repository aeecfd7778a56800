#include "mantissa/train/lr_monitor.h"

#include <fmt/format.h>

#include "mantissa/core/error.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

LearningRateMonitor::LearningRateMonitor(std::string logging_interval)
    : logging_interval_(std::move(logging_interval)) {
  MANTISSA_CHECK(
      logging_interval_.empty() || logging_interval_ == "step" || logging_interval_ == "epoch",
      "LearningRateMonitor", "logging_interval must be 'step', 'epoch' or empty, got '{}'",
      logging_interval_);
}

void LearningRateMonitor::on_train_start(Trainer& trainer, TrainModule&) {
  resolved_interval_ = logging_interval_;
  if (resolved_interval_.empty()) {
    resolved_interval_ = "epoch";
    for (const auto& s : trainer.lr_schedulers()) {
      if (s.interval == "step") resolved_interval_ = "step";
    }
  }
}

void LearningRateMonitor::on_train_epoch_start(Trainer& trainer, TrainModule&) {
  if (resolved_interval_ == "epoch") record(trainer);
}

void LearningRateMonitor::on_train_batch_start(Trainer& trainer, TrainModule&, const data::Example&,
                                               int64_t batch_idx) {
  // Once per optimizer step (the first batch of an accumulation window), in the batches whose
  // step the Trainer's step row reports (every log_every_n_steps-th step: Lightning's
  // should_update_logs), so the lr lands in that row's step.
  if (resolved_interval_ != "step") return;
  if (batch_idx % trainer.options().accumulate_grad_batches != 0) return;
  if ((trainer.global_step() + 1) % trainer.options().log_every_n_steps != 0) return;
  record(trainer);
}

void LearningRateMonitor::record(Trainer& trainer) {
  optim::Optimizer* opt = trainer.optimizer();
  if (opt == nullptr) return;
  const size_t groups = opt->num_param_groups();
  std::map<std::string, double> values;
  for (size_t g = 0; g < groups; ++g) {
    std::string name = fmt::format("lr-{}", opt->name());
    if (groups > 1) name += fmt::format("/pg{}", g + 1);
    values[name] = opt->lr(g);
    lrs_[name].push_back(opt->lr(g));
  }
  trainer.send_to_loggers(values);
}

}  // namespace mantissa::train
