// The Trainer: construction (the precision plugin, the strategy, the default callbacks and the
// checks of TrainerOptions), fast_dev_run, and the limits that end a fit (max_epochs, max_steps,
// min_epochs/min_steps, should_stop, signals).
#include "mantissa/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/early_stopping.h"
#include "mantissa/train/graphed_step.h"  // ~Trainer destroys the Trainer's GraphedStep
#include "mantissa/train/model_summary.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/signals.h"
#include "mantissa/train/timer.h"

namespace mantissa::train {

Trainer::Trainer(TrainerOptions options) : options_(std::move(options)) {
  if (options_.plugin) {
    check_accelerator(options_.accelerator);  // make_precision checks it, with the reason
    MANTISSA_CHECK(options_.precision_options.empty(), "Trainer",
                   "precision_options apply to `precision`, not to a plugin passed as `plugin`");
    // Lightning's rule: a plugin with `precision` left unset (None there) is fine, one with a
    // precision given is refused. Unset is the default "32-true", or "" (an unset string, not a
    // precision named "").
    MANTISSA_CHECK(options_.precision == "32-true" || options_.precision.empty(), "Trainer",
                   "Received both `precision={}` and `plugins={}`. Choose one.", options_.precision,
                   options_.plugin->class_name());
    // amp_backend and amp_level reach only the precisions built from `precision`: with a
    // plugin (the bitsandbytes modes of `mantissa train`) --amp-backend apex is refused here,
    // as every other precision but 16-mixed refuses it, rather than dropped without a word.
    MANTISSA_CHECK(options_.amp_backend == "native", "precision",
                   "You passed `Trainer(amp_backend='{}', precision='{}')` but it's not "
                   "supported: Apex levels run with precision '16-mixed'. Try "
                   "amp_backend='native' instead.",
                   options_.amp_backend, options_.plugin->precision());
    MANTISSA_CHECK(options_.amp_level.empty(), "precision",
                   "You have asked for `amp_level='{}'` but it's only supported with "
                   "`amp_backend='apex'`.",
                   options_.amp_level);
    plugin_ = options_.plugin;
  } else {
    std::map<std::string, std::string> extra = options_.precision_options;
    if (options_.amp_backend != "native") extra["amp_backend"] = options_.amp_backend;
    if (!options_.amp_level.empty()) extra["amp_level"] = options_.amp_level;
    plugin_ = make_precision(options_.precision,
                             {.accelerator = options_.accelerator, .extra = std::move(extra)});
  }
  // Where the module and the batches live: the first GPU when the accelerator resolves to it.
  device_ = resolve_accelerator(options_.accelerator,
                                options_.plugin ? "32-true" : options_.precision) == "gpu"
                ? cuda_device(0)
                : kCPU;
  clip_algorithm_ = grad_clip_algorithm_from_string(options_.gradient_clip_algorithm);
  strategy_ =
      make_strategy({options_.strategy, options_.devices, options_.sync_batchnorm, options_.ddp,
                     options_.collective_timeout_s, options_.sharded_checkpoints});
  if (!strategy_->is_global_zero()) options_.loggers.clear();  // rank 0 alone logs
  MANTISSA_CHECK(std::isfinite(options_.gradient_clip_val) && options_.gradient_clip_val >= 0,
                 "Trainer", "gradient_clip_val must be a finite value >= 0, got {}",
                 options_.gradient_clip_val);
  MANTISSA_CHECK(options_.accumulate_grad_batches >= 1, "Trainer",
                 "accumulate_grad_batches must be at least 1, got {}",
                 options_.accumulate_grad_batches);
  MANTISSA_CHECK(options_.max_steps >= -1, "Trainer", "max_steps must be -1 or >= 0, got {}",
                 options_.max_steps);
  MANTISSA_CHECK(!options_.max_epochs || *options_.max_epochs >= -1, "Trainer",
                 "max_epochs must be -1 or >= 0, got {}", options_.max_epochs.value_or(0));
  MANTISSA_CHECK(options_.min_epochs >= 0, "Trainer",
                 "min_epochs must be 0 (no minimum) or a number of epochs, got {}",
                 options_.min_epochs);
  MANTISSA_CHECK(options_.min_steps >= 0, "Trainer",
                 "min_steps must be 0 (no minimum) or a number of optimizer steps, got {}",
                 options_.min_steps);
  MANTISSA_CHECK(options_.log_every_n_steps >= 1, "Trainer",
                 "log_every_n_steps must be at least 1, got {}", options_.log_every_n_steps);
  MANTISSA_CHECK(options_.check_val_every_n_epoch >= 1, "Trainer",
                 "check_val_every_n_epoch must be at least 1, got {}",
                 options_.check_val_every_n_epoch);
  MANTISSA_CHECK(options_.num_sanity_val_steps >= -1, "Trainer",
                 "num_sanity_val_steps must be -1 (all) or >= 0, got {}",
                 options_.num_sanity_val_steps);
  MANTISSA_CHECK(options_.fast_dev_run >= 0, "Trainer", "fast_dev_run must be >= 0, got {}",
                 options_.fast_dev_run);
  if (options_.seed) manual_seed(*options_.seed);
  callbacks_ = options_.callbacks;
  if (options_.fast_dev_run > 0) apply_fast_dev_run();
  if (options_.enable_model_summary) callbacks_.push_back(std::make_shared<ModelSummary>());
  if (options_.max_time) {
    MANTISSA_CHECK(std::isfinite(options_.max_time->count()) && options_.max_time->count() >= 0,
                   "Trainer", "max_time must be a finite time >= 0, got {} s",
                   options_.max_time->count());
    const bool has_timer = std::any_of(callbacks_.begin(), callbacks_.end(), [](auto& c) {
      return dynamic_cast<Timer*>(c.get()) != nullptr;
    });
    if (has_timer) {
      fmt::print(stderr,
                 "mantissa: warning: max_time is ignored: a Timer callback is already among "
                 "the callbacks\n");
    } else {
      callbacks_.push_back(std::make_shared<Timer>(TimerOptions{.duration = *options_.max_time}));
    }
  }
  const bool has_checkpoint = std::any_of(callbacks_.begin(), callbacks_.end(), [](auto& c) {
    return dynamic_cast<ModelCheckpoint*>(c.get()) != nullptr;
  });
  if (options_.enable_checkpointing && !has_checkpoint) {
    ModelCheckpointOptions mc;
    mc.dirpath = options_.default_root_dir + "/checkpoints";
    callbacks_.push_back(std::make_shared<ModelCheckpoint>(mc));
  }
}

Trainer::~Trainer() = default;

void Trainer::apply_fast_dev_run() {
  const int64_t n = options_.fast_dev_run;
  options_.limit_train_batches = BatchLimit::batches(n);
  options_.limit_val_batches = BatchLimit::batches(n);
  options_.limit_test_batches = BatchLimit::batches(n);
  options_.limit_predict_batches = BatchLimit::batches(n);
  options_.val_check_interval = BatchLimit();
  options_.check_val_every_n_epoch = 1;
  options_.num_sanity_val_steps = 0;
  options_.max_epochs = 1;
  options_.max_steps = n;
  options_.enable_checkpointing = false;
  options_.loggers.clear();
  // Nothing of a smoke test is kept: no checkpoints, and no early stop on one batch's metric.
  std::erase_if(callbacks_, [](const std::shared_ptr<Callback>& c) {
    return dynamic_cast<ModelCheckpoint*>(c.get()) != nullptr ||
           dynamic_cast<EarlyStopping*>(c.get()) != nullptr;
  });
  fmt::print(
      "mantissa: running in fast_dev_run mode: {} batch(es) of training, validation, test and "
      "predict; "
      "logging and checkpointing are off\n",
      n);
}

ScopePtr Trainer::init_module() { return plugin_->tensor_init_context(); }

int64_t Trainer::max_epochs() const {
  if (options_.max_epochs && *options_.max_epochs >= 0) return *options_.max_epochs;
  if (options_.max_epochs || options_.max_steps >= 0) return INT64_MAX;  // -1: unlimited
  return 1000;
}

bool Trainer::reached_max_steps() const {
  return options_.max_steps >= 0 && global_step_ >= options_.max_steps;
}

int64_t Trainer::accumulated_batches() const {
  const int64_t accumulate = options_.accumulate_grad_batches;
  if (module_ == nullptr || !module_->automatic_optimization || accumulate <= 1) return 0;
  // The position a checkpoint records (the cut-short epoch's after fit); an epoch's last batch
  // always steps.
  const int64_t batches = cut_epoch_ && cut_epoch_->global_step == global_step_
                              ? cut_epoch_->batches
                              : batches_in_epoch_;
  if (batches >= num_training_batches_) return 0;
  return batches % accumulate;
}

double Trainer::epochs_trained() const {
  if (num_training_batches_ <= 0) return 0;
  const double per_epoch = static_cast<double>(num_training_batches_);
  // After a cut-short epoch the counters have moved on to the next epoch; cut_epoch_ says where
  // it stopped.
  if (cut_epoch_ && cut_epoch_->global_step == global_step_ && epoch_ == cut_epoch_->epoch + 1 &&
      batches_in_epoch_ == 0) {
    return static_cast<double>(cut_epoch_->epoch) +
           static_cast<double>(cut_epoch_->batches) / per_epoch;
  }
  return static_cast<double>(epoch_) + static_cast<double>(batches_in_epoch_) / per_epoch;
}

bool Trainer::can_stop_early() const {
  // epoch_ counts the epochs that have ended (end_epoch moves it on), as Lightning's
  // epoch_progress.current.processed.
  return epoch_ >= options_.min_epochs && global_step_ >= options_.min_steps;
}

bool Trainer::stop_requested() {
  if (!should_stop) return false;
  if (can_stop_early()) return true;
  if (!early_stop_deferred_) {
    early_stop_deferred_ = true;
    fmt::print(
        "mantissa: should_stop was set after {} epoch(s) and {} step(s), short of min_epochs={} "
        "/ min_steps={}: training goes on until both are reached\n",
        epoch_, global_step_, options_.min_epochs, options_.min_steps);
  }
  return false;
}

bool Trainer::poll_interrupt() {
  if (!interrupt_signal_) {
    // Under ddp every rank must stop after the same batch (or the others wait forever).
    const int signal = strategy_->agree_on_signal(pending_interrupt().value_or(0));
    if (signal != 0) interrupt_signal_ = signal;
  }
  return interrupt_signal_.has_value();
}

}  // namespace mantissa::train
