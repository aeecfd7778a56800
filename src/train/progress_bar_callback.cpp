#include "mantissa/train/progress_bar_callback.h"

#include <algorithm>
#include <cmath>

#include "mantissa/train/trainer.h"

namespace mantissa::train {

ProgressBarCallback::ProgressBarCallback()
    : bar_(std::make_unique<ProgressBar>(ProgressBar::for_stdout())) {}

ProgressBarCallback::ProgressBarCallback(std::unique_ptr<ProgressBar> bar) : bar_(std::move(bar)) {}

void ProgressBarCallback::on_train_epoch_start(Trainer& trainer, TrainModule& module) {
  if (!trainer.strategy().is_global_zero()) return;  // rank 0 draws for the job
  const auto& o = trainer.options();
  // max_epochs unset means "until max_steps" (or Lightning's 1000): show the epoch alone.
  max_epochs_ = o.max_epochs && *o.max_epochs > 0 ? *o.max_epochs : 0;
  // The batches this epoch will train: its own, or fewer when max_steps ends the run inside it
  // (a 10-step GPT run over a 1 133-batch epoch showed 10/1133 and an ETA of 40 minutes).
  int64_t total = trainer.num_training_batches();
  if (o.max_steps >= 0) {
    const int64_t steps_left = std::max<int64_t>(0, o.max_steps - trainer.global_step());
    const int64_t per_step = std::max<int64_t>(1, o.accumulate_grad_batches);
    if (steps_left <= (total - trainer.batches_in_epoch()) / per_step)
      total = trainer.batches_in_epoch() + steps_left * per_step;
  }
  // Rank 0 draws for the job, and its samples/s is the job's (all ranks), as the epoch lines'.
  last_step_ = trainer.global_step();
  bar_->start_epoch(trainer.current_epoch(), max_epochs_, total, trainer.strategy().world_size());
}

void ProgressBarCallback::on_train_batch_end(Trainer& trainer, TrainModule& module,
                                             const Tensor& loss, const data::Example& batch,
                                             int64_t batch_idx) {
  if (!trainer.strategy().is_global_zero()) return;  // rank 0 draws for the job
  std::map<std::string, double> metrics = trainer.progress_bar_metrics();
  // The step's loss (step_losses), known when the step is taken (the end of an accumulation
  // window), as the epoch line's and the loggers' are: under ddp this rank's batch loss is half
  // the story (the job's is averaged over the ranks), and under an item-weighted loss
  // (TrainModule::loss_items) a batch returns only its share of the step's. A step without a
  // loss (NaN: skipped, or without an item, step_items.h) shows none.
  if (trainer.global_step() > last_step_ && !trainer.step_losses().empty() &&
      !std::isnan(trainer.step_losses().back()))
    metrics["loss"] = trainer.step_losses().back();
  last_step_ = trainer.global_step();
  const int64_t batch_size =
      batch.input.defined() && batch.input.dim() > 0 ? batch.input.size(0) : 0;
  bar_->update(batch_idx + 1, batch_size, metrics);
}

void ProgressBarCallback::on_validation_start(Trainer& trainer, TrainModule& module) {
  if (!trainer.strategy().is_global_zero()) return;  // rank 0 draws for the job
  bar_->pause();
}

void ProgressBarCallback::on_validation_end(Trainer& trainer, TrainModule& module) {
  if (!trainer.strategy().is_global_zero()) return;  // rank 0 draws for the job
  bar_->resume();
}

void ProgressBarCallback::on_train_epoch_end(Trainer& trainer, TrainModule& module) {
  if (!trainer.strategy().is_global_zero()) return;  // rank 0 draws for the job
  bar_->end_epoch(trainer.progress_bar_metrics());
}

}  // namespace mantissa::train
