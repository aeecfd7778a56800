// Trainer::fit: the sanity check, the epochs and their batches, the validations inside and at
// the end of an epoch, the epoch's end (its metrics, schedulers and hooks) and the warnings
// about a run that did not train (a non-finite loss, a loss scaler that skipped most steps).
#include "mantissa/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "mantissa/autograd/anomaly_mode.h"
#include "mantissa/core/warning.h"
#include "mantissa/data/distributed_sampler.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/early_stopping.h"
#include "mantissa/train/precision_registry.h"
#include "train/trainer_internal.h"

namespace mantissa::train {

using namespace detail;  // the shared helpers of trainer_internal.h

void Trainer::fit(TrainModule& module, const data::DataLoader& train_loader,
                  const data::DataLoader* val_loader, const std::string& ckpt_path) {
  ProfilerSession profiling(profiler());
  try {
    try {
      fit_impl(module, strategy_->training_loader(train_loader), val_loader, ckpt_path);
    } catch (const autograd::AnomalyDetected& e) {
      // A non-finite value in a training step is the run diverging, found earlier and named
      // (docs/anomaly.md): the same error as the Trainer's own divergence checks throw, so a
      // caller reports it as one (`mantissa train`: metrics JSON, exit status 4). This rank
      // alone found it: under ddp the strategy ends the job below.
      throw TrainingDiverged(e.what());
    }
  } catch (const std::exception& e) {
    notify_exception(e);
    strategy_->on_exception(e);  // ddp: ends the job naming this rank (others would wait)
    throw;
  }
}

void Trainer::fit_impl(TrainModule& module, const data::DataLoader& train_loader,
                       const data::DataLoader* val_loader, const std::string& ckpt_path) {
  // A limit that leaves no batch is refused before anything is set up or trained (Lightning
  // checks it when the loaders are set up, before the fit starts).
  const int64_t training_batches =
      options_.overfit_batches
          ? options_.overfit_batches->resolve(train_loader.size(), "overfit_batches", "train")
          : options_.limit_train_batches.resolve(train_loader.size(), "limit_train_batches",
                                                 "train");
  if (val_loader != nullptr && !options_.overfit_batches)
    evaluation_batches(*val_loader, options_.limit_val_batches, "validate");
  setup(module, "fit");
  // Anomaly detection for the whole fit, with the model's parameters labelled so reports
  // name the layer (docs/anomaly.md).
  std::optional<autograd::detect_anomaly> anomaly;
  if (options_.detect_anomaly) anomaly.emplace(module.named_parameters());
  anomaly_events_.clear();
  config_ = module.configure_optimizers();
  check_optimizer_config(module);
  num_training_batches_ = training_batches;
  // Each step then sums the epoch's batches but divides the loss by the (larger) setting, as
  // Lightning does: the gradient shrinks by that factor, which is rarely what was meant.
  if (options_.accumulate_grad_batches > num_training_batches_ && num_training_batches_ > 0) {
    warn_once(fmt::format(
        "accumulate_grad_batches {} exceeds the {} training batches of an epoch: each optimizer "
        "step sums the epoch's {} batches but divides the loss by {}, shrinking the gradient; "
        "use at most {}",
        options_.accumulate_grad_batches, num_training_batches_, num_training_batches_,
        options_.accumulate_grad_batches, num_training_batches_));
  }
  epoch_ = 0;
  global_step_ = 0;
  batches_in_epoch_ = 0;
  logger_step_ = 0;
  cut_epoch_.reset();
  has_validated_ = false;
  should_stop = false;
  early_stop_deferred_ = false;
  interrupt_signal_.reset();  // a signal still pending (arrived before fit) stops it at once
  step_losses_.clear();
  window_losses_.clear();
  epoch_end_due_ = false;
  // No validation batch (limit_val_batches 0, an empty loader) turns validation off, as in
  // Lightning: its hooks ran on zero batches, and a callback that checks after validation
  // (EarlyStopping with check_on_train_epoch_end = false) failed on a metric never logged.
  // Under ddp the job's batches decide, not this rank's shard: a rank whose shard is empty
  // (fewer examples than ranks) still validates, adding nothing to the sums.
  if (val_loader != nullptr && !options_.overfit_batches &&
      evaluation_batches(*val_loader, options_.limit_val_batches, "validate") == 0) {
    val_loader = nullptr;
  }
  record_run_config(train_loader);
  ckpt_path_ = ckpt_path;
  strategy_->unshard_module(module);  // fsdp: an earlier fit's module whole before the restore
  if (!ckpt_path.empty()) restore_checkpoint(*this, load_checkpoint_file(ckpt_path), ckpt_path);
  strategy_->setup_optimizers(module, optimizers(), *plugin_);  // fsdp shards the parameters

  stage_ = "train";
  module.train();
  MANTISSA_HOOK(on_fit_start);
  if (val_loader != nullptr && options_.num_sanity_val_steps != 0) run_sanity_check(*val_loader);
  MANTISSA_HOOK(on_train_start);
  const int64_t last_epoch = max_epochs();
  // No batch per epoch (limit_train_batches 0, an empty loader): nothing to train. Looping
  // over empty epochs would never reach max_steps when the epochs are unlimited.
  while (num_training_batches_ > 0 && epoch_ < last_epoch && !reached_max_steps() &&
         !stop_requested() && !poll_interrupt()) {
    if (batches_in_epoch_ >= num_training_batches_ && batches_in_epoch_ > 0 && !epoch_end_due_) {
      // Resumed from a checkpoint written at the end of an epoch: finish that epoch's
      // bookkeeping (its epoch schedulers stepped after the checkpoint was written). A
      // checkpoint from before the epoch's end (epoch_end_due_) goes to train_epoch, which
      // runs no batch but that epoch's validation and end.
      step_schedulers("epoch", epoch_ + 1);
      ++epoch_;
      batches_in_epoch_ = 0;
      continue;
    }
    ProfileScope profile(profiler(), "run_training_epoch");
    train_epoch(train_loader, val_loader, batches_in_epoch_);
  }
  if (interrupted()) {
    // An interrupted fit: the callbacks save (ModelCheckpoint: last.safetensors), the loggers
    // flush, and the end-of-training hooks do not run, as in Lightning.
    for (auto& cb : callbacks_) cb->on_train_interrupted(*this, module);
  } else {
    MANTISSA_HOOK(on_train_end);
    MANTISSA_HOOK(on_fit_end);
  }
  // Also after a signal: fit returns normally then (Lightning, which exits the process on
  // Ctrl-C, runs no teardown there), and what setup prepared must still be released.
  strategy_->teardown_module(module);  // fsdp: the module stays sharded (unshard_module)
  teardown("fit");
  for (auto& l : options_.loggers) l->finalize();
  stage_.clear();
}

void Trainer::run_sanity_check(const data::DataLoader& val_loader) {
  // Metrics of the check are discarded: what callbacks and loggers see starts with training.
  const auto saved_metrics = callback_metrics_;
  const auto saved_prog_bar = prog_bar_metrics_;
  sanity_checking_ = true;
  // At most the batches a validation runs, as Lightning's min(num_sanity_val_steps, the
  // validation batches after limit_val_batches): the check read batches that no validation of
  // the run would read (all of them for -1).
  const BatchLimit val_limit = options_.overfit_batches ? BatchLimit::batches(num_training_batches_)
                                                        : options_.limit_val_batches;
  const int64_t val_batches = evaluation_batches(val_loader, val_limit, "validate");
  const int64_t n = options_.num_sanity_val_steps < 0
                        ? val_batches
                        : std::min(options_.num_sanity_val_steps, val_batches);
  try {
    run_eval(val_loader, "validate", BatchLimit::batches(n));
  } catch (...) {
    sanity_checking_ = false;
    throw;
  }
  sanity_checking_ = false;
  callback_metrics_ = saved_metrics;
  prog_bar_metrics_ = saved_prog_bar;
}

void Trainer::train_epoch(const data::DataLoader& train_loader, const data::DataLoader* val_loader,
                          int64_t start_batch) {
  MANTISSA_HOOK(on_train_epoch_start);
  // The order is a function of (seed, epoch): a resumed run skips the consumed batches without
  // loading them and sees the same batches afterwards. overfit_batches: the first batches, in
  // order, every epoch; under ddp this rank's share of them (its sampler, unshuffled), so the
  // ranks' batches together are one process's first batches with the global batch, as with
  // Lightning's DistributedSampler (every rank read the same first batches).
  std::vector<int64_t> order;
  if (const data::DistributedSampler* shard = train_loader.sampler();
      options_.overfit_batches && shard != nullptr) {
    order = data::DistributedSampler(shard->dataset_size(), shard->num_replicas(), shard->rank(),
                                     /*shuffle=*/false, shard->seed(), shard->drop_last())
                .indices(0);
  } else if (options_.overfit_batches) {
    order.resize(static_cast<size_t>(train_loader.dataset().size()));
    std::iota(order.begin(), order.end(), int64_t{0});
  } else {
    order = train_loader.indices(epoch_);
  }
  const int64_t n = num_training_batches_;
  step_batches_.clear();  // a step an earlier epoch's stop cut short
  const auto scaler_at_start = plugin_->loss_scale_state();
  const int64_t steps_at_start = global_step_;
  epoch_skips_validation_ =
      val_loader != nullptr && (epoch_ + 1) % options_.check_val_every_n_epoch != 0;
  if (epoch_skips_validation_) val_loader = nullptr;
  int64_t val_every = 0;
  if (val_loader != nullptr) {
    val_every = std::max<int64_t>(1, options_.val_check_interval.resolve_interval(n));
  }
  // A checkpoint saved between a batch and its validation (a step checkpoint at a validation
  // boundary): that validation runs before training continues.
  if (validation_due_ && val_loader != nullptr) {
    validation_due_ = false;  // running: a checkpoint written in its hooks does not repeat it
    run_eval(*val_loader, "validate",
             options_.overfit_batches ? BatchLimit::batches(n) : options_.limit_val_batches);
  }
  validation_due_ = false;
  epoch_end_due_ = false;
  logger_step_ = global_step_;  // the batch before the checkpoint is complete now
  for (int64_t b = start_batch; b < n; ++b) {
    // Lightning's loggers count the batches that stepped before this one; a resumed run's
    // first batch starts from the checkpoint's count, which may precede its pending
    // validation.
    logger_step_ = global_step_;
    // Known before the batch: its hooks (a step checkpoint) see it.
    validation_due_ = val_loader != nullptr && ((b + 1) % val_every == 0 || b + 1 == n);
    {
      // The batch is freed before a validation below (it must not add to that peak).
      data::Example raw;
      {
        ProfileScope profile(profiler(), "get_train_batch");
        raw = next_training_batch(train_loader, order, b, n);
      }
      ProfileScope profile(profiler(), "run_training_batch");
      train_batch(raw, b, n);
    }
    // max_steps or should_stop ending the epoch early ends it like its last batch: with a
    // validation (Lightning's too), so the metrics and checkpoints at the end describe the
    // final weights.
    const bool last = b + 1 == n || reached_max_steps() || stop_requested();
    // A step whose loss was finite can still leave non-finite weights; the next step's loss
    // would show it, but after an epoch's (or the run's) last step the validation, the
    // checkpoints and the final metrics would describe them first.
    if (last) check_weights_finite_after_step();
    const bool scheduled = val_loader != nullptr && ((b + 1) % val_every == 0 || b + 1 == n);
    if (val_loader != nullptr && (scheduled || last)) {
      // A validation only because max_steps or should_stop stopped the epoch here is one that
      // a longer run (or this run resumed from its checkpoint) does not have at this step. Its
      // forward must leave no trace in the state that training reads next: transformer-engine's
      // records its amaxes into the FP8 history, which would feed the resumed run's scales and
      // break the bit-exact resume. So the plugin's state is put back as the last training step
      // left it (only when the validation changed it: loading has side effects in some plugins,
      // e.g. Apex's).
      std::optional<nlohmann::json> plugin_state;
      if (!scheduled) plugin_state = plugin_->state_dict();
      // Running, no longer due: a checkpoint written in its hooks does not repeat it.
      validation_due_ = false;
      validating_mid_epoch_ = scheduled && !last;
      const ClearOnExit clear_mid_epoch{validating_mid_epoch_};
      run_eval(*val_loader, "validate",
               options_.overfit_batches ? BatchLimit::batches(n) : options_.limit_val_batches);
      if (plugin_state && plugin_->state_dict() != *plugin_state) {
        plugin_->load_state_dict(*plugin_state);
      }
    }
    validation_due_ = false;
    logger_step_ = global_step_;  // the batch, with its validation, is complete
    // A signal stops the run inside the epoch (its checkpoint resumes at the next batch);
    // on the epoch's last batch the epoch ends first, so its hooks and checkpoints run. Inside
    // a gradient-accumulation window it waits for the window's optimizer step: a checkpoint
    // written mid-window cannot be resumed (the accumulated gradients are not saved).
    if (b + 1 < n && accumulated_batches() == 0 && poll_interrupt()) return;
    if (reached_max_steps() || stop_requested()) break;
  }
  warn_if_scaler_skipped_most(scaler_at_start, steps_at_start);
  end_epoch();
}

void Trainer::warn_if_loss_not_finite(const std::map<std::string, double>& results,
                                      const std::string& stage) {
  if (loss_warned_) return;
  for (const auto& [name, value] : results) {
    if (std::isfinite(value) || name.find("loss") == std::string::npos) continue;
    loss_warned_ = true;
    const std::string what = stage == "validate" ? "validation" : stage;
    // float16's range is the likely cause where the precision computes in it (the registry's
    // math) or keeps a loss scaler for it (Apex's fp16 modes).
    const PrecisionEntry* entry = find_precision(plugin_->precision());
    const bool fp16 = (entry != nullptr && entry->math == PrecisionMath::kFloat16) ||
                      plugin_->loss_scale_state().has_value();
    warn(fmt::format(
        "the {} metric '{}' is {} (epoch {}, after {} optimizer steps): the model's forward "
        "does not give finite values on that data in {}, so the metrics of this {} say nothing "
        "about the weights{}",
        what, name, std::isnan(value) ? "nan" : "inf", epoch_ + 1, global_step_,
        plugin_->precision(), what,
        fp16 ? "; float16 overflows above 65504: lower the learning rate or use bf16-mixed" : ""));
    return;
  }
}

void Trainer::warn_if_scaler_skipped_most(const std::optional<Precision::LossScaleState>& at_start,
                                          int64_t steps_at_start) {
  const auto now = plugin_->loss_scale_state();
  if (!at_start || !now || scaler_warned_) return;
  const int64_t steps = global_step_ - steps_at_start;
  const int64_t skipped = now->skipped_steps - at_start->skipped_steps;
  // A fresh scaler backs off a few times before it finds its scale (PyTorch's starts at 2^16
  // too); half of an epoch's steps skipped or more means the run is hardly training.
  if (steps < 4 || 2 * skipped < steps) return;
  scaler_warned_ = true;
  warn(fmt::format(
      "the loss scaler skipped {} of the {} optimizer steps of epoch {} (inf/NaN gradients even "
      "at loss scale {:g}), so the weights changed in {} of them: the float16 forward or "
      "backward overflows. Lower the learning rate, clip gradients (gradient_clip_val, "
      "--gradient-clip-val), or "
      "train in bf16-mixed, whose range is float32's",
      skipped, steps, epoch_ + 1, now->scale, steps - skipped));
}

void Trainer::end_epoch() {
  // The epoch's rows go with its last step's row, as Lightning logs them (its step counter is
  // moved back by one around them).
  const int64_t epoch_row_step = std::max<int64_t>(0, logger_step_ - 1);
  flush_epoch_metrics(epoch_sums_, epoch_row_step);
  // What the hooks below log is the epoch's (Lightning's defaults in on_train_epoch_end:
  // on_epoch, not on_step); it reaches callback_metrics at once, so the monitoring callbacks
  // see it, and the loggers in a row of this epoch after the hooks.
  in_train_epoch_end_ = true;
  const ClearOnExit clear_epoch_end{in_train_epoch_end_};
  // Callbacks, the module, then monitoring callbacks (checkpoints see what the module logged).
  auto callback_epoch_end = [&](Callback& cb) {
    ProfileScope profile(profiler(), callback_action(profiler(), cb, "on_train_epoch_end"));
    cb.on_train_epoch_end(*this, *module_);
  };
  for (auto& cb : callbacks_) {
    if (!cb->is_monitoring()) callback_epoch_end(*cb);
  }
  {
    ProfileScope profile(profiler(), "[TrainModule]on_train_epoch_end");
    module_->on_train_epoch_end();
  }
  for (auto& cb : callbacks_) {
    if (cb->is_monitoring()) callback_epoch_end(*cb);
  }
  in_train_epoch_end_ = false;
  flush_epoch_metrics(epoch_sums_, epoch_row_step);
  // An epoch that max_steps or should_stop cut short: the counters move on to the next epoch
  // as Lightning's do, but the epoch schedulers do not step for an epoch that did not finish,
  // and a checkpoint saved now (save_checkpoint after fit) records the batch to resume at, so
  // the resumed run trains the rest of the epoch and steps them at its end, once.
  if (batches_in_epoch_ < num_training_batches_) {
    cut_epoch_ = CutEpoch{epoch_, batches_in_epoch_, global_step_};
  } else {
    step_schedulers("epoch", epoch_ + 1);
  }
  ++epoch_;
  batches_in_epoch_ = 0;
}

}  // namespace mantissa::train
