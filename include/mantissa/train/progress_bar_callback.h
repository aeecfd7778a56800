#pragma once
// Drives a ProgressBar from the Trainer's hooks: one bar per training epoch showing the epoch's
// mean loss ("loss (epoch mean)"), samples/s (validation time excluded) and every metric logged
// with prog_bar=true (validation metrics at the end).
#include <memory>

#include "mantissa/train/callback.h"
#include "mantissa/train/report/progress_bar.h"

namespace mantissa::train {

class ProgressBarCallback : public Callback {
 public:
  // Writes to stdout (a redrawn line on a terminal, plain lines otherwise).
  ProgressBarCallback();
  explicit ProgressBarCallback(std::unique_ptr<ProgressBar> bar);

  std::string state_key() const override { return "ProgressBarCallback"; }
  void on_train_epoch_start(Trainer& trainer, TrainModule& module) override;
  void on_train_batch_end(Trainer& trainer, TrainModule& module, const Tensor& loss,
                          const data::Example& batch, int64_t batch_idx) override;
  void on_train_epoch_end(Trainer& trainer, TrainModule& module) override;
  // Validation passes pause the bar's clock for samples/s and the ETA.
  void on_validation_start(Trainer& trainer, TrainModule& module) override;
  void on_validation_end(Trainer& trainer, TrainModule& module) override;

 private:
  std::unique_ptr<ProgressBar> bar_;
  int64_t max_epochs_ = 0;
  int64_t last_step_ = 0;  // the global step at the last batch (ddp: a step was taken since)
};

}  // namespace mantissa::train
