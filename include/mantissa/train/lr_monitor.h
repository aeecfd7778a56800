#pragma once
// LearningRateMonitor: records the optimizer's learning rate(s) and sends them to the
// Trainer's loggers (Lightning's LearningRateMonitor). Names: "lr-<Optimizer>" ("lr-AdamW"),
// "lr-<Optimizer>/pg<i>" with several param groups. logging_interval "step" logs before every
// log_every_n_steps-th optimizer step, "epoch" at each epoch start, "" follows the schedulers
// (step when any scheduler steps per step, else epoch).
#include <map>
#include <string>
#include <vector>

#include "mantissa/train/callback.h"

namespace mantissa::train {

class LearningRateMonitor : public Callback {
 public:
  explicit LearningRateMonitor(std::string logging_interval = "");

  std::string state_key() const override { return "LearningRateMonitor"; }
  void on_train_start(Trainer& trainer, TrainModule& module) override;
  void on_train_epoch_start(Trainer& trainer, TrainModule& module) override;
  void on_train_batch_start(Trainer& trainer, TrainModule& module, const data::Example& batch,
                            int64_t batch_idx) override;

  // Every recorded value per name, in order.
  const std::map<std::string, std::vector<double>>& lrs() const { return lrs_; }

 private:
  void record(Trainer& trainer);

  std::string logging_interval_;
  std::string resolved_interval_;
  std::map<std::string, std::vector<double>> lrs_;
};

}  // namespace mantissa::train
