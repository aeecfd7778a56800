#include "mantissa/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/managed_precision.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/checkpoint.h"
#include "mantissa/train/early_stopping.h"
#include "mantissa/train/model_checkpoint.h"
#include "mantissa/train/model_summary.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/signals.h"

// Calls a hook on every callback (in order), then on the module: Lightning's order.
#define MANTISSA_HOOK(hook, ...)                                                        \
  do {                                                                                  \
    for (auto& cb_ : callbacks_) cb_->hook(*this, *module_ __VA_OPT__(, ) __VA_ARGS__); \
    module_->hook(__VA_ARGS__);                                                         \
  } while (0)

namespace mantissa::train {
namespace {

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

Trainer::Trainer(TrainerOptions options) : options_(std::move(options)) {
  if (options_.plugin) {
    check_accelerator(options_.accelerator);  // make_precision checks it, with the reason
    MANTISSA_CHECK(options_.precision_options.empty(), "Trainer",
                   "precision_options apply to `precision`, not to a plugin passed as `plugin`");
    MANTISSA_CHECK(options_.precision == "32-true", "Trainer",
                   "Received both `precision={}` and `plugins={}`. Choose one.", options_.precision,
                   options_.plugin->class_name());
    plugin_ = options_.plugin;
  } else {
    std::map<std::string, std::string> extra = options_.precision_options;
    if (options_.amp_backend != "native") extra["amp_backend"] = options_.amp_backend;
    if (!options_.amp_level.empty()) extra["amp_level"] = options_.amp_level;
    plugin_ = make_precision(options_.precision,
                             {.accelerator = options_.accelerator, .extra = std::move(extra)});
  }
  clip_algorithm_ = grad_clip_algorithm_from_string(options_.gradient_clip_algorithm);
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
      "mantissa: running in fast_dev_run mode: {} batch(es) of training, validation and test; "
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

bool Trainer::poll_interrupt() {
  if (!interrupt_signal_) interrupt_signal_ = pending_interrupt();
  return interrupt_signal_.has_value();
}

void Trainer::record_run_config(const data::DataLoader& train_loader) {
  RunConfig c;
  c.dataset_size = train_loader.dataset().size();
  c.batch_size = train_loader.batch_size();
  c.shuffle = train_loader.shuffle();
  c.loader_seed = train_loader.seed();
  c.drop_last = train_loader.drop_last();
  c.num_training_batches = num_training_batches_;
  c.seed = options_.seed;
  const optim::Optimizer& opt = *config_.optimizer;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) c.configured_lrs.push_back(opt.lr(g));
  for (const auto& s : config_.lr_schedulers)
    c.scheduler_base_lrs.push_back(s.scheduler->base_lrs());
  run_config_ = std::move(c);
}

void Trainer::setup(TrainModule& module) {
  module_ = &module;
  module.trainer_ = this;
  if (!module.model_configured_) {
    ScopePtr scope = plugin_->module_init_context();
    module.configure_model();
    module.model_configured_ = true;
  }
  // Once per plugin: validate() or test() after fit() must not convert the layers again.
  if (module.converted_by_ != plugin_.get()) {
    plugin_->convert_module(module);
    module.converted_by_ = plugin_.get();
  }
}

void Trainer::fit(TrainModule& module, const data::DataLoader& train_loader,
                  const data::DataLoader* val_loader, const std::string& ckpt_path) {
  setup(module);
  config_ = module.configure_optimizers();
  MANTISSA_CHECK(config_.optimizer != nullptr, "Trainer",
                 "configure_optimizers() of {} returned no optimizer", module.name());
  for (const auto& s : config_.lr_schedulers) {
    MANTISSA_CHECK(s.scheduler != nullptr, "Trainer", "an LR scheduler config has no scheduler");
    MANTISSA_CHECK(s.interval == "step" || s.interval == "epoch", "Trainer",
                   "LR scheduler interval must be 'step' or 'epoch', got '{}'", s.interval);
    MANTISSA_CHECK(s.frequency >= 1, "Trainer", "LR scheduler frequency must be >= 1, got {}",
                   s.frequency);
    MANTISSA_CHECK(&s.scheduler->optimizer() == config_.optimizer.get(), "Trainer",
                   "the {} scheduler belongs to another optimizer than the one returned by "
                   "configure_optimizers()",
                   s.scheduler->name());
    MANTISSA_CHECK(!s.scheduler->needs_metric() || !s.monitor.empty(), "Trainer",
                   "the {} scheduler is stepped with a metric: set `monitor` in its "
                   "LRSchedulerConfig to the name of a logged metric (e.g. \"val_loss\")",
                   s.scheduler->name());
  }
  num_training_batches_ = options_.overfit_batches
                              ? options_.overfit_batches->resolve(train_loader.size())
                              : options_.limit_train_batches.resolve(train_loader.size());
  epoch_ = 0;
  global_step_ = 0;
  batches_in_epoch_ = 0;
  should_stop = false;
  interrupt_signal_.reset();  // a signal still pending (arrived before fit) stops it at once
  step_losses_.clear();
  window_losses_.clear();
  record_run_config(train_loader);
  if (!ckpt_path.empty()) restore_checkpoint(*this, load_checkpoint_file(ckpt_path), ckpt_path);

  stage_ = "train";
  module.train();
  MANTISSA_HOOK(on_fit_start);
  if (val_loader != nullptr && options_.num_sanity_val_steps != 0) run_sanity_check(*val_loader);
  MANTISSA_HOOK(on_train_start);
  const int64_t last_epoch = max_epochs();
  while (epoch_ < last_epoch && !reached_max_steps() && !should_stop && !poll_interrupt()) {
    if (batches_in_epoch_ >= num_training_batches_ && batches_in_epoch_ > 0) {
      // Resumed from a checkpoint written at the end of an epoch: finish that epoch's
      // bookkeeping (its epoch schedulers stepped after the checkpoint was written).
      step_schedulers("epoch", epoch_ + 1);
      ++epoch_;
      batches_in_epoch_ = 0;
      continue;
    }
    train_epoch(train_loader, val_loader, batches_in_epoch_);
  }
  if (interrupted()) {
    // Lightning's interrupt path: the callbacks save (ModelCheckpoint: last.safetensors), the
    // loggers flush, and the end-of-training hooks do not run.
    for (auto& cb : callbacks_) cb->on_train_interrupted(*this, module);
  } else {
    MANTISSA_HOOK(on_train_end);
    MANTISSA_HOOK(on_fit_end);
  }
  for (auto& l : options_.loggers) l->finalize();
  stage_.clear();
}

void Trainer::run_sanity_check(const data::DataLoader& val_loader) {
  // Metrics of the check are discarded: what callbacks and loggers see starts with training.
  const auto saved_metrics = callback_metrics_;
  const auto saved_prog_bar = prog_bar_metrics_;
  sanity_checking_ = true;
  const BatchLimit limit = options_.num_sanity_val_steps < 0
                               ? BatchLimit()
                               : BatchLimit::batches(options_.num_sanity_val_steps);
  try {
    run_eval(val_loader, "validate", limit);
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
  // order, every epoch.
  std::vector<int64_t> order;
  if (options_.overfit_batches) {
    order.resize(static_cast<size_t>(train_loader.dataset().size()));
    std::iota(order.begin(), order.end(), int64_t{0});
  } else {
    order = train_loader.indices(epoch_);
  }
  const int64_t n = num_training_batches_;
  if ((epoch_ + 1) % options_.check_val_every_n_epoch != 0) val_loader = nullptr;
  int64_t val_every = 0;
  if (val_loader != nullptr) {
    val_every = std::max<int64_t>(1, options_.val_check_interval.resolve(n));
  }
  for (int64_t b = start_batch; b < n; ++b) {
    train_batch(train_loader.batch(order, b), b, n);
    // max_steps ending the epoch early ends it like its last batch: with a validation, so the
    // metrics reported at the end describe the final weights.
    const bool last = b + 1 == n || reached_max_steps();
    if (val_loader != nullptr && ((b + 1) % val_every == 0 || last)) {
      run_eval(*val_loader, "validate",
               options_.overfit_batches ? BatchLimit::batches(n) : options_.limit_val_batches);
    }
    // A signal stops the run inside the epoch (its checkpoint resumes at the next batch);
    // on the epoch's last batch the epoch ends first, so its hooks and checkpoints run.
    if (b + 1 < n && poll_interrupt()) return;
    if (reached_max_steps() || should_stop) break;
  }
  end_epoch();
}

void Trainer::end_epoch() {
  flush_epoch_metrics();
  // Callbacks, the module, then monitoring callbacks (checkpoints see what the module logged).
  for (auto& cb : callbacks_) {
    if (!cb->is_monitoring()) cb->on_train_epoch_end(*this, *module_);
  }
  module_->on_train_epoch_end();
  for (auto& cb : callbacks_) {
    if (cb->is_monitoring()) cb->on_train_epoch_end(*this, *module_);
  }
  step_schedulers("epoch", epoch_ + 1);
  ++epoch_;
  batches_in_epoch_ = 0;
}

// Marks a step of a plugin that manages dtypes (all but plain 32-true), so autocast regions
// and parameter casts made by hand in it warn (mantissa/core/managed_precision.h).
static std::unique_ptr<ManagedPrecisionScope> managed_scope(const Precision& plugin,
                                                            const TrainModule& module,
                                                            const char* hook) {
  if (plugin.class_name() == "Precision") return nullptr;
  return std::make_unique<ManagedPrecisionScope>(
      fmt::format("{} ({})", plugin.class_name(), plugin.precision()),
      fmt::format("{}.{}", module.name(), hook));
}

void Trainer::train_batch(const data::Example& raw, int64_t b, int64_t n) {
  const data::Example batch = plugin_->convert_input(raw);
  MANTISSA_HOOK(on_train_batch_start, batch, b);
  optim::Optimizer& opt = *config_.optimizer;
  const int64_t accum = options_.accumulate_grad_batches;
  const bool first_in_window = b % accum == 0;
  const bool step_batch = (b + 1) % accum == 0 || b + 1 == n;
  Tensor step_loss;
  // Lightning's closure: training_step, zero_grad at the start of an accumulation window,
  // backward of the (scaled) loss between the backward hooks.
  auto closure = [&]() -> Tensor {
    Tensor loss;
    {
      ScopePtr scope = plugin_->forward_context();
      const auto managed = managed_scope(*plugin_, *module_, "training_step");
      loss = module_->training_step(batch, b);
    }
    if (first_in_window) {
      MANTISSA_HOOK(on_before_zero_grad, opt);
      opt.zero_grad();
    }
    if (!loss.defined()) return loss;  // skip: no backward, no optimizer step
    MANTISSA_CHECK(loss.numel() == 1, "Trainer",
                   "training_step must return a scalar loss, got shape {}", loss.shape());
    const double value = loss.item();
    if (!std::isfinite(value) && plugin_->scaler() == nullptr) {
      fail("Trainer",
           "the loss became {} at epoch {} step {} (batch {}) in {}; lower the learning rate, "
           "clip gradients (gradient_clip_val) or use a wider precision",
           value, epoch_ + 1, global_step_, b, plugin_->precision());
    }
    window_losses_.push_back(value);
    // Mean losses over the accumulated batches give the big batch's gradient.
    const Tensor scaled = accum > 1 ? div(loss, static_cast<double>(accum)) : loss;
    const Tensor to_backward = plugin_->pre_backward(scaled);
    MANTISSA_HOOK(on_before_backward, to_backward);
    plugin_->backward(to_backward);
    MANTISSA_HOOK(on_after_backward);
    step_loss = loss.detach();
    return step_loss;
  };
  if (step_batch) {
    auto after_closure = [&] {
      MANTISSA_HOOK(on_before_optimizer_step, opt);
      plugin_->clip_gradients(opt, options_.gradient_clip_val, clip_algorithm_);
    };
    plugin_->optimizer_step(opt, closure, after_closure);
    ++global_step_;
    step_losses_.push_back(mean_of(window_losses_));
    window_losses_.clear();
    // Schedulers advance on every step, also one a loss scaler skipped (as Lightning does).
    step_schedulers("step", global_step_);
    if (global_step_ % options_.log_every_n_steps == 0 && !step_metrics_.empty()) {
      send_to_loggers(step_metrics_);
      step_metrics_.clear();
    }
  } else {
    closure();
  }
  batches_in_epoch_ = b + 1;
  MANTISSA_HOOK(on_train_batch_end, step_loss, batch, b);
}

void Trainer::step_schedulers(const std::string& interval, int64_t count) {
  for (auto& s : config_.lr_schedulers) {
    if (s.interval != interval || count % s.frequency != 0) continue;
    if (!s.scheduler->needs_metric()) {
      s.scheduler->step();
      continue;
    }
    auto it = callback_metrics_.find(s.monitor);
    if (it == callback_metrics_.end()) {
      std::vector<std::string> keys;
      for (const auto& kv : callback_metrics_) keys.push_back(kv.first);
      MANTISSA_CHECK(!s.strict, "Trainer",
                     "the {} scheduler monitors '{}', which was not logged; logged metrics: [{}]. "
                     "Log it (with on_epoch for an 'epoch' interval) or change `monitor`",
                     s.scheduler->name(), s.monitor, fmt::join(keys, ", "));
      fmt::print(stderr,
                 "mantissa: warning: the {} scheduler monitors '{}', which was not logged; this "
                 "step is skipped\n",
                 s.scheduler->name(), s.monitor);
      continue;
    }
    s.scheduler->step(it->second);
  }
}

void Trainer::log_metric(const std::string& name, double value, bool prog_bar,
                         std::optional<bool> on_step, std::optional<bool> on_epoch) {
  MANTISSA_CHECK(!stage_.empty(), "TrainModule.log",
                 "log('{}') called outside fit, validate or test", name);
  const bool training = stage_ == "train";
  if (on_step.value_or(training)) {
    step_metrics_[name] = value;
    callback_metrics_[name] = value;
  }
  if (on_epoch.value_or(!training)) {
    auto& s = epoch_sums_[name];
    s.first += value;
    s.second += 1;
  }
  if (prog_bar) prog_bar_metrics_[name] = value;
}

void Trainer::flush_epoch_metrics() {
  std::map<std::string, double> means;
  for (const auto& [name, s] : epoch_sums_) {
    means[name] = s.first / static_cast<double>(s.second);
    callback_metrics_[name] = means[name];
    if (prog_bar_metrics_.count(name)) prog_bar_metrics_[name] = means[name];
  }
  epoch_sums_.clear();
  if (!means.empty() && !sanity_checking_) send_to_loggers(means);
}

void Trainer::send_to_loggers(const std::map<std::string, double>& metrics) {
  for (auto& l : options_.loggers) l->log_metrics(metrics, global_step_);
}

std::map<std::string, double> Trainer::run_eval(const data::DataLoader& loader,
                                                const std::string& stage, const BatchLimit& limit) {
  const std::string previous_stage = stage_;
  const bool was_training = module_->is_training();
  auto saved_sums = std::move(epoch_sums_);  // a validation inside a training epoch
  epoch_sums_.clear();
  stage_ = stage;
  NoGradGuard no_grad;
  module_->eval();
  const bool validating = stage == "validate";
  if (validating) {
    MANTISSA_HOOK(on_validation_start);
    MANTISSA_HOOK(on_validation_epoch_start);
  } else {
    MANTISSA_HOOK(on_test_start);
    MANTISSA_HOOK(on_test_epoch_start);
  }
  const std::vector<int64_t> order = loader.indices(loader.epoch());
  const int64_t n = limit.resolve(loader.size());
  for (int64_t b = 0; b < n; ++b) {
    const data::Example batch = plugin_->convert_input(loader.batch(order, b));
    ScopePtr scope = plugin_->forward_context();
    const auto managed =
        managed_scope(*plugin_, *module_, validating ? "validation_step" : "test_step");
    if (validating) {
      module_->validation_step(batch, b);
    } else {
      module_->test_step(batch, b);
    }
  }
  if (validating) {
    MANTISSA_HOOK(on_validation_epoch_end);
  } else {
    MANTISSA_HOOK(on_test_epoch_end);
  }
  std::map<std::string, double> results;
  for (const auto& [name, s] : epoch_sums_) results[name] = s.first / static_cast<double>(s.second);
  flush_epoch_metrics();
  if (validating) {
    MANTISSA_HOOK(on_validation_end);
  } else {
    MANTISSA_HOOK(on_test_end);
  }
  epoch_sums_ = std::move(saved_sums);
  stage_ = previous_stage;
  if (was_training) module_->train();
  return results;
}

std::map<std::string, double> Trainer::validate(TrainModule& module,
                                                const data::DataLoader& loader) {
  setup(module);
  auto results = run_eval(loader, "validate", options_.limit_val_batches);
  for (auto& l : options_.loggers) l->finalize();
  return results;
}

std::map<std::string, double> Trainer::test(TrainModule& module, const data::DataLoader& loader) {
  setup(module);
  auto results = run_eval(loader, "test", options_.limit_test_batches);
  for (auto& l : options_.loggers) l->finalize();
  return results;
}

void Trainer::save_checkpoint(const std::string& path) {
  MANTISSA_CHECK(module_ != nullptr && config_.optimizer != nullptr, "Trainer.save_checkpoint",
                 "nothing to save before fit() has set up a module and its optimizer ({})", path);
  save_checkpoint_file(path, collect_checkpoint(*this));
}

}  // namespace mantissa::train
