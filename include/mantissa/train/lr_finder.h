#pragma once
// The learning-rate range test (Leslie Smith, "Cyclical Learning Rates for Training Neural
// Networks", 2015), as Lightning's Tuner.lr_find and LearningRateFinder run it: the learning rate
// rises from min_lr to max_lr over num_training_steps optimizer steps (exponentially, or
// linearly) while each step's loss is recorded and smoothed; the suggested learning rate is
// where the smoothed loss falls fastest. docs/trainer.md, "Finding a learning rate".
//
// LearningRateFinder is a callback of an ordinary fit: it sets every param group's lr before each
// optimizer step, records the step's loss after it, and stops the fit (should_stop) when the
// sweep is done or the loss has diverged. That fit trains the module: run it on a module built
// for the purpose (lr_find below), or load the weights back afterwards, as Lightning restores
// its own from a temporary checkpoint.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/train/callback.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

struct LRFinderOptions {
  double min_lr = 1e-8;  // the first step's lr (Lightning's defaults)
  double max_lr = 1.0;   // the last step's
  int64_t num_training_steps = 100;
  std::string mode = "exponential";  // or "linear"
  // The sweep stops once the smoothed loss exceeds this multiple of the best one (the loss has
  // diverged; the lrs beyond would only diverge faster). Unset: every step runs.
  std::optional<double> early_stop_threshold = 4.0;
  // Weight of the running average: smoothed_n = avg_n / (1 - beta^n) with avg_n = beta *
  // avg_{n-1} + (1 - beta) * loss_n, the bias-corrected moving average of Adam's moments.
  double beta = 0.98;
};

struct LRFinderResult {
  std::vector<double> lrs;     // the lr of each step taken, in order
  std::vector<double> losses;  // that step's loss (the mean over accumulated batches)
  std::vector<double>
      smoothed_losses;  // the running average above (NaN once a loss was not finite)
  // Why the sweep ended before num_training_steps ("" when it ran them all): the smoothed loss
  // passed early_stop_threshold times its best, or a loss was not finite.
  std::string stop_reason;
  // The step whose smoothed loss falls fastest (the most negative central difference, one-sided
  // at the ends, over the finite points left after dropping the first skip_begin and the last
  // skip_end steps), as Lightning's suggestion(); nullopt with fewer than two such points.
  std::optional<size_t> suggestion_index(int64_t skip_begin = 10, int64_t skip_end = 1) const;
  std::optional<double> suggestion(int64_t skip_begin = 10, int64_t skip_end = 1) const;
};

class LearningRateFinder : public Callback {
 public:
  // Throws mantissa::Error for a range that is not 0 < min_lr < max_lr (finite), a step count
  // below 2, an unknown mode, a threshold <= 1 or a beta outside [0, 1).
  explicit LearningRateFinder(LRFinderOptions options = {});

  std::string state_key() const override { return "LearningRateFinder"; }
  void on_fit_start(Trainer& trainer, TrainModule& module) override;
  void on_train_batch_start(Trainer& trainer, TrainModule& module, const data::Example& batch,
                            int64_t batch_idx) override;
  void on_train_batch_end(Trainer& trainer, TrainModule& module, const Tensor& loss,
                          const data::Example& batch, int64_t batch_idx) override;
  void on_exception(Trainer& trainer, TrainModule& module, const std::exception& error) override;

  // The lr of step `step` (0-based) of the sweep.
  double lr_at(int64_t step) const;
  const LRFinderOptions& options() const { return options_; }
  const LRFinderResult& result() const { return result_; }

 private:
  void set_lr(Trainer& trainer, double lr) const;

  LRFinderOptions options_;
  LRFinderResult result_;
  int64_t start_step_ = 0;  // the trainer's global step when the sweep began
  double average_ = 0;      // the running average before bias correction
  double best_ = 0;         // the best smoothed loss so far
};

// Runs the range test as a fit of `module` on `loader` under `options` (its precision, batch
// accumulation, clipping, ...) with the sweep's own length, no validation, checkpoints, loggers
// or early stopping, and returns what it recorded; a fit that stops because the loss diverged
// ends the sweep (its step is the last recorded) rather than failing. The module is trained by
// it: build a fresh one for the run that follows.
LRFinderResult lr_find(TrainerOptions options, TrainModule& module, const data::DataLoader& loader,
                       LRFinderOptions finder = {});

}  // namespace mantissa::train
