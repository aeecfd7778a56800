#include "mantissa/train/lr_finder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "mantissa/core/error.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/early_stopping.h"

namespace mantissa::train {
namespace {

constexpr const char* kWhere = "LearningRateFinder";

}  // namespace

std::optional<size_t> LRFinderResult::suggestion_index(int64_t skip_begin, int64_t skip_end) const {
  MANTISSA_CHECK(skip_begin >= 0 && skip_end >= 0, kWhere,
                 "skip_begin and skip_end count steps, so they must be >= 0 (got {} and {})",
                 skip_begin, skip_end);
  const auto n = static_cast<int64_t>(smoothed_losses.size());
  // The finite points left, with their steps: a step whose loss was not finite has no slope.
  std::vector<size_t> at;
  std::vector<double> y;
  for (int64_t i = skip_begin; i < n - skip_end; ++i) {
    if (!std::isfinite(smoothed_losses[static_cast<size_t>(i)])) continue;
    at.push_back(static_cast<size_t>(i));
    y.push_back(smoothed_losses[static_cast<size_t>(i)]);
  }
  if (y.size() < 2) return std::nullopt;
  // numpy.gradient with unit spacing (what Lightning takes): central differences inside,
  // one-sided ones at the two ends. Equal steps in the index are equal steps in log(lr) for an
  // exponential sweep.
  size_t best = 0;
  double steepest = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < y.size(); ++k) {
    const double slope = k == 0              ? y[1] - y[0]
                         : k + 1 == y.size() ? y[k] - y[k - 1]
                                             : (y[k + 1] - y[k - 1]) / 2;
    if (slope < steepest) steepest = slope, best = k;
  }
  return at[best];
}

std::optional<double> LRFinderResult::suggestion(int64_t skip_begin, int64_t skip_end) const {
  const std::optional<size_t> i = suggestion_index(skip_begin, skip_end);
  if (!i) return std::nullopt;
  return lrs[*i];
}

LearningRateFinder::LearningRateFinder(LRFinderOptions options) : options_(std::move(options)) {
  const LRFinderOptions& o = options_;
  MANTISSA_CHECK(
      std::isfinite(o.min_lr) && std::isfinite(o.max_lr) && o.min_lr > 0 && o.min_lr < o.max_lr,
      kWhere, "the range must be 0 < min_lr < max_lr, got min_lr {} and max_lr {}", o.min_lr,
      o.max_lr);
  MANTISSA_CHECK(o.num_training_steps >= 2, kWhere,
                 "num_training_steps must be at least 2 (a first and a last lr), got {}",
                 o.num_training_steps);
  MANTISSA_CHECK(o.mode == "exponential" || o.mode == "linear", kWhere,
                 "mode must be 'exponential' or 'linear', got '{}'", o.mode);
  MANTISSA_CHECK(!o.early_stop_threshold || *o.early_stop_threshold > 1, kWhere,
                 "early_stop_threshold must be above 1 (a multiple of the best smoothed loss), got "
                 "{}; leave it unset to run every step",
                 o.early_stop_threshold.value_or(0.0));
  MANTISSA_CHECK(o.beta >= 0 && o.beta < 1, kWhere, "beta must be in [0, 1), got {}", o.beta);
}

double LearningRateFinder::lr_at(int64_t step) const {
  const double r = static_cast<double>(step) / static_cast<double>(options_.num_training_steps - 1);
  if (options_.mode == "linear") return options_.min_lr + r * (options_.max_lr - options_.min_lr);
  return options_.min_lr * std::pow(options_.max_lr / options_.min_lr, r);
}

void LearningRateFinder::set_lr(Trainer& trainer, double lr) const {
  if (trainer.optimizers().empty()) {
    if (trainer.optimizer() != nullptr) trainer.optimizer()->set_lr(lr);
    return;
  }
  for (const auto& opt : trainer.optimizers()) opt->set_lr(lr);
}

void LearningRateFinder::on_fit_start(Trainer& trainer, TrainModule&) {
  start_step_ = trainer.global_step();
  result_ = {};
  average_ = 0;
  best_ = 0;
}

void LearningRateFinder::on_train_batch_start(Trainer& trainer, TrainModule&, const data::Example&,
                                              int64_t) {
  // Before every batch, also the accumulating ones of a window: the module's own LR schedulers
  // step after each optimizer step and would otherwise set theirs.
  const int64_t step = trainer.global_step() - start_step_;
  if (step < options_.num_training_steps) set_lr(trainer, lr_at(step));
}

void LearningRateFinder::on_train_batch_end(Trainer& trainer, TrainModule&, const Tensor&,
                                            const data::Example&, int64_t) {
  const std::vector<double>& step_losses = trainer.step_losses();
  // The steps this batch took (none while a window accumulates; a manual training_step may take
  // several), each with its lr and loss.
  while (static_cast<int64_t>(result_.losses.size()) < trainer.global_step() - start_step_ &&
         result_.stop_reason.empty()) {
    const int64_t step = static_cast<int64_t>(result_.losses.size());
    const size_t at = static_cast<size_t>(start_step_ + step);
    const double loss = at < step_losses.size() ? step_losses[at] : NAN;
    const double lr = lr_at(step);
    result_.lrs.push_back(lr);
    result_.losses.push_back(loss);
    if (!std::isfinite(loss)) {
      result_.smoothed_losses.push_back(NAN);
      result_.stop_reason =
          fmt::format("the loss of step {} (lr {:.3g}) was {}", step + 1, lr, loss);
      break;
    }
    average_ = options_.beta * average_ + (1 - options_.beta) * loss;
    const double smoothed = average_ / (1 - std::pow(options_.beta, static_cast<double>(step + 1)));
    result_.smoothed_losses.push_back(smoothed);
    if (step > 0 && options_.early_stop_threshold &&
        smoothed > *options_.early_stop_threshold * best_) {
      result_.stop_reason = fmt::format(
          "the smoothed loss {:.4g} at step {} (lr {:.3g}) exceeded {:g} times its best ({:.4g})",
          smoothed, step + 1, lr, *options_.early_stop_threshold, best_);
      break;
    }
    if (step == 0 || smoothed < best_) best_ = smoothed;
  }
  if (!result_.stop_reason.empty() ||
      static_cast<int64_t>(result_.losses.size()) >= options_.num_training_steps)
    trainer.should_stop = true;
}

void LearningRateFinder::on_exception(Trainer&, TrainModule&, const std::exception& error) {
  // The Trainer stopped the fit over a non-finite loss, gradient or weight: the step that did
  // it is the sweep's last, with no loss to record.
  if (dynamic_cast<const TrainingDiverged*>(&error) == nullptr || !result_.stop_reason.empty())
    return;
  const int64_t step = static_cast<int64_t>(result_.losses.size());
  if (step >= options_.num_training_steps) return;
  result_.lrs.push_back(lr_at(step));
  result_.losses.push_back(NAN);
  result_.smoothed_losses.push_back(NAN);
  result_.stop_reason = fmt::format("the run diverged in step {} (lr {:.3g}): {}", step + 1,
                                    lr_at(step), error.what());
}

LRFinderResult lr_find(TrainerOptions options, TrainModule& module, const data::DataLoader& loader,
                       LRFinderOptions finder) {
  auto callback = std::make_shared<LearningRateFinder>(std::move(finder));
  // The sweep alone decides the length; nothing of it is kept or validated.
  options.max_steps = callback->options().num_training_steps;
  options.max_epochs.reset();
  options.min_epochs = 0;
  options.min_steps = 0;
  options.max_time.reset();
  options.num_sanity_val_steps = 0;
  options.enable_checkpointing = false;
  options.loggers.clear();
  std::erase_if(options.callbacks, [](const std::shared_ptr<Callback>& c) {
    return dynamic_cast<ModelCheckpoint*>(c.get()) != nullptr ||
           dynamic_cast<EarlyStopping*>(c.get()) != nullptr;
  });
  options.callbacks.push_back(callback);
  Trainer trainer(std::move(options));
  try {
    trainer.fit(module, loader);
  } catch (const TrainingDiverged&) {
    // Recorded by the callback (on_exception): the sweep ends there.
  }
  trainer.strategy().unshard_module(module);  // fsdp: the module whole before the trainer goes
  return callback->result();
}

}  // namespace mantissa::train
