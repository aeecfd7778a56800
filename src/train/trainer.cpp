#include "mantissa/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>
#include <optional>

#include "mantissa/autograd/anomaly_mode.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/managed_precision.h"
#include "mantissa/core/warning.h"
#include "mantissa/data/distributed_sampler.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/early_stopping.h"
#include "mantissa/train/graphed_step.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/model_summary.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/signals.h"
#include "mantissa/train/timer.h"
#include "train/earlier_precision_check.h"
#include "train/loss_reach_check.h"

// Calls a hook on every callback (in order), then on the module: Lightning's order. Each
// call is an action of the profiler ("[Callback]<state_key>.<hook>", "[TrainModule]<hook>").
#define MANTISSA_HOOK(hook, ...)                                                   \
  do {                                                                             \
    for (auto& cb_ : callbacks_) {                                                 \
      ProfileScope profile_(profiler(), callback_action(profiler(), *cb_, #hook)); \
      cb_->hook(*this, *module_ __VA_OPT__(, ) __VA_ARGS__);                       \
    }                                                                              \
    ProfileScope profile_(profiler(), profiler() ? "[TrainModule]" #hook : "");    \
    module_->hook(__VA_ARGS__);                                                    \
  } while (0)

namespace mantissa::train {
namespace {

// Whether `optimizer` is one of those configure_optimizers() returned.
bool is_one_of(const std::vector<std::shared_ptr<optim::Optimizer>>& own,
               const optim::Optimizer& optimizer) {
  return std::any_of(own.begin(), own.end(), [&](const auto& o) { return o.get() == &optimizer; });
}

std::string callback_action(const Profiler* profiler, const Callback& cb, const char* hook) {
  return profiler ? "[Callback]" + cb.state_key() + "." + hook : std::string();
}

// A fit, validate or test as one profiling session: op timing runs inside it, and the report
// is printed when the outermost one ends normally.
class ProfilerSession {
 public:
  explicit ProfilerSession(Profiler* profiler) : profiler_(profiler) {
    if (profiler_) profiler_->setup();
  }
  ~ProfilerSession() {
    if (!profiler_) return;
    profiler_->teardown();
    if (std::uncaught_exceptions() == 0) {
      try {
        profiler_->describe();
      } catch (const Error& e) {
        fmt::print(stderr, "mantissa: warning: {}\n", e.what());
      }
    }
  }
  ProfilerSession(const ProfilerSession&) = delete;
  ProfilerSession& operator=(const ProfilerSession&) = delete;

 private:
  Profiler* profiler_;
};

// Clears a flag when the scope ends, also by an exception.
struct ClearOnExit {
  bool& flag;
  ~ClearOnExit() { flag = false; }
};

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
      make_strategy({options_.strategy, options_.devices, options_.sync_batchnorm, options_.ddp});
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

void Trainer::record_run_config(const data::DataLoader& train_loader) {
  RunConfig c;
  c.dataset_size = train_loader.dataset().size();
  c.batch_size = train_loader.batch_size() * strategy_->world_size();  // the global batch
  c.shuffle = train_loader.shuffle();
  c.loader_seed = train_loader.seed();
  c.drop_last = train_loader.drop_last();
  c.num_training_batches = num_training_batches_;
  c.seed = options_.seed;
  const optim::Optimizer& opt = *config_.optimizer;
  for (size_t g = 0; g < opt.num_param_groups(); ++g) {
    c.configured_lrs.push_back(opt.lr(g));
    nlohmann::json options = opt.group_options(g);
    options.erase("lr");  // compared as configured_lrs, with the schedulers' base lrs
    c.configured_group_options.push_back(std::move(options));
  }
  for (const auto& s : config_.lr_schedulers)
    c.scheduler_base_lrs.push_back(s.scheduler->base_lrs());
  run_config_ = std::move(c);
}

namespace {

// Complex parameters train under 32-true (complex64) and 64-true (complex128) only: the
// low-precision plugins cast, scale or quantize real tensors, and there is no complex
// float16, bfloat16, fp8 or 4-bit format (docs/complex.md).
void check_complex_parameters(TrainModule& module, const std::string& precision) {
  if (precision == "32-true" || precision == "64-true") return;
  for (const auto& [name, p] : module.named_parameters()) {
    MANTISSA_CHECK(!p.dtype().is_complex(), "Trainer",
                   "precision '{}' does not support complex parameters ('{}' is {}); train "
                   "complex models with precision '32-true' (complex64) or '64-true' "
                   "(complex128)",
                   precision, name, p.dtype().name());
  }
}

}  // namespace

void Trainer::setup(TrainModule& module, const std::string& stage) {
  module_ = &module;
  module.trainer_ = this;
  // Before configure_model, as Lightning's: a module's setup may prepare what its layers need.
  MANTISSA_HOOK(setup, stage);
  if (!module.model_configured_) {
    ScopePtr scope = plugin_->module_init_context();
    module.configure_model();
    module.model_configured_ = true;
  }
  check_complex_parameters(module, plugin_->precision());
  // Once per plugin: validate() or test() after fit() must not convert the layers again.
  if (module.converted_by_ != plugin_.get()) {
    plugin_->convert_module(module);
    if (!module.converted_precision_.empty()) {
      check_not_left_in_earlier_precision(module, module.converted_precision_,
                                          module.converted_param_dtype_, *plugin_);
    }
    module.converted_by_ = plugin_.get();
    module.converted_precision_ = plugin_->precision();
    module.converted_param_dtype_ = plugin_->param_dtype();
  }
  // After the conversion, so a precision's dtype casts run on the CPU once and the GPU gets the
  // final tensors (Lightning moves the module in its strategy's setup the same way).
  if (device_.is_cuda()) module.to(device_);
  strategy_->setup_module(module);
  // The module's hyperparameters (what it was built from) go beside its metrics (hparams.yaml
  // in the loggers' directory).
  if (!module.hparams().empty()) {
    for (auto& l : options_.loggers) l->log_hyperparams(module.hparams());
  }
}

void Trainer::check_optimizer_config(const TrainModule& module) {
  if (config_.optimizer) {
    MANTISSA_CHECK(config_.optimizers.empty(), "Trainer",
                   "configure_optimizers() of {} set both `optimizer` and `optimizers`; return "
                   "one optimizer in `optimizer` or all of them in `optimizers`",
                   module.name());
    config_.optimizers = {config_.optimizer};
  }
  MANTISSA_CHECK(!config_.optimizers.empty(), "Trainer",
                 "configure_optimizers() of {} returned no optimizer", module.name());
  for (const auto& o : config_.optimizers) {
    MANTISSA_CHECK(o != nullptr, "Trainer",
                   "configure_optimizers() of {} returned a null optimizer", module.name());
  }
  config_.optimizer = config_.optimizers.front();
  if (module.automatic_optimization) {
    MANTISSA_CHECK(config_.optimizers.size() == 1, "Trainer",
                   "{} returned {} optimizers; training with several optimizers needs manual "
                   "optimisation: set automatic_optimization = false in its constructor and step "
                   "them in training_step (manual_backward, manual_step; docs/trainer.md)",
                   module.name(), config_.optimizers.size());
  } else {
    // As Lightning: under manual optimisation the module owns these decisions.
    MANTISSA_CHECK(options_.accumulate_grad_batches == 1, "Trainer",
                   "accumulate_grad_batches={} is not supported with manual optimisation "
                   "(automatic_optimization = false): accumulate in training_step by stepping "
                   "every n batches",
                   options_.accumulate_grad_batches);
    MANTISSA_CHECK(options_.gradient_clip_val == 0, "Trainer",
                   "gradient_clip_val is not supported with manual optimisation "
                   "(automatic_optimization = false): call clip_gradients(optimizer, value) in "
                   "training_step before manual_step");
  }
  if (options_.cuda_graphs) check_cuda_graphs_allowed(module);
  for (const auto& s : config_.lr_schedulers) {
    MANTISSA_CHECK(s.scheduler != nullptr, "Trainer", "an LR scheduler config has no scheduler");
    MANTISSA_CHECK(s.interval == "step" || s.interval == "epoch", "Trainer",
                   "LR scheduler interval must be 'step' or 'epoch', got '{}'", s.interval);
    MANTISSA_CHECK(s.frequency >= 1, "Trainer", "LR scheduler frequency must be >= 1, got {}",
                   s.frequency);
    MANTISSA_CHECK(is_one_of(config_.optimizers, s.scheduler->optimizer()), "Trainer",
                   "the {} scheduler belongs to an optimizer that configure_optimizers() did not "
                   "return",
                   s.scheduler->name());
    MANTISSA_CHECK(!s.scheduler->needs_metric() || !s.monitor.empty(), "Trainer",
                   "the {} scheduler is stepped with a metric: set `monitor` in its "
                   "LRSchedulerConfig to the name of a logged metric (e.g. \"val_loss\")",
                   s.scheduler->name());
  }
}

void Trainer::teardown(const std::string& stage) { MANTISSA_HOOK(teardown, stage); }

void Trainer::notify_exception(const std::exception& exception) {
  if (module_ == nullptr) return;
  for (auto& cb : callbacks_) {
    // The stage's own error is the one to report: a callback failing while it reacts to it
    // must neither hide it nor keep the other callbacks (or ddp's abort) from running.
    try {
      cb->on_exception(*this, *module_, exception);
    } catch (const std::exception& e) {
      fmt::print(stderr, "mantissa: warning: {}.on_exception failed ({}) while handling: {}\n",
                 cb->state_key(), e.what(), exception.what());
    }
  }
}

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
  if (!ckpt_path.empty()) restore_checkpoint(*this, load_checkpoint_file(ckpt_path), ckpt_path);

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
        raw = train_loader.batch(order, b);
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
      "backward overflows. Lower the learning rate, clip gradients (gradient_clip_val), or "
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

data::Example Trainer::batch_to_device(const data::Example& raw) const {
  if (device_.is_cpu()) return raw;
  return {raw.input.defined() ? raw.input.to(device_) : raw.input,
          raw.target.defined() ? raw.target.to(device_) : raw.target};
}

void Trainer::train_batch(const data::Example& raw, int64_t b, int64_t n) {
  const data::Example batch = plugin_->convert_input(batch_to_device(raw));
  MANTISSA_HOOK(on_train_batch_start, batch, b);
  if (!module_->automatic_optimization) {
    const Tensor loss = train_batch_manual(batch, b);
    batches_in_epoch_ = b + 1;
    MANTISSA_HOOK(on_train_batch_end, loss, batch, b);
    return;
  }
  optim::Optimizer& opt = *config_.optimizer;
  const int64_t accum = options_.accumulate_grad_batches;
  const bool first_in_window = b % accum == 0;
  const bool step_batch = (b + 1) % accum == 0 || b + 1 == n;
  Tensor step_loss;
  amp::GradScaler* scaler = plugin_->scaler();
  const bool watch_scaler = scaler != nullptr && autograd::is_anomaly_enabled();
  std::string overflow_report;
  // The closure the precision plugin's optimizer step runs: training_step, zero_grad at the
  // start of an accumulation window, backward of the (scaled) loss between the backward hooks.
  auto closure = [&]() -> Tensor {
    if (options_.cuda_graphs) return step_loss = graphed_forward_backward(batch, b);
    const Tensor loss = in_training_step_scope([&] { return module_->training_step(batch, b); });
    if (first_in_window) zero_grad_with_hooks(opt);
    if (!loss.defined()) return loss;  // skip: no backward, no optimizer step
    MANTISSA_CHECK(loss.numel() == 1, "Trainer",
                   "training_step must return a scalar loss, got shape {}", loss.shape());
    if (!checked_loss_reach_) {
      // Before the backward, which would only say "does not require grad", or, when the loss
      // reaches old layers a plugin swapped out, train nothing without a word.
      checked_loss_reach_ = true;
      detail::check_loss_reaches_parameters(loss, *module_, opt, plugin_->precision());
      plugin_->check_first_training_step();
    }
    record_training_loss(loss.item(), batch, b);
    // Mean losses over the accumulated batches give the big batch's gradient.
    const Tensor scaled = accum > 1 ? div(loss, static_cast<double>(accum)) : loss;
    const Tensor to_backward = plugin_->pre_backward(scaled);
    MANTISSA_HOOK(on_before_backward, to_backward);
    strategy_->before_backward(/*sync_gradients=*/step_batch);
    {
      ProfileScope profile(profiler(), "backward");
      if (watch_scaler) {
        // Overflowing gradients are how a loss scaler finds its scale: remember where the
        // first one came from for the skipped-step report instead of stopping the run.
        autograd::TolerateBackwardAnomalies tolerate;
        plugin_->backward(to_backward);
        if (overflow_report.empty()) overflow_report = tolerate.first_report();
      } else {
        plugin_->backward(to_backward);
      }
    }
    strategy_->after_backward();
    MANTISSA_HOOK(on_after_backward);
    step_loss = loss.detach();
    return step_loss;
  };
  if (step_batch) {
    auto after_closure = [&] {
      strategy_->before_optimizer_step(opt, *plugin_);
      MANTISSA_HOOK(on_before_optimizer_step, opt);
      plugin_->clip_gradients(opt, options_.gradient_clip_val, clip_algorithm_);
    };
    const double scale_before = watch_scaler ? scaler->get_scale() : 0.0;
    const int64_t skipped_before = watch_scaler ? scaler->skipped_steps() : 0;
    {
      // The closure (training_step, backward) runs inside: "optimizer_step" covers the whole
      // step, as Lightning's; the parts have their own actions.
      ProfileScope profile(profiler(), "optimizer_step");
      try {
        plugin_->optimizer_step(opt, closure, after_closure);
      } catch (const optim::NonFiniteGradient& e) {
        throw_gradient_diverged(e, b);
      }
    }
    if (watch_scaler) report_scaler_step(*scaler, scale_before, skipped_before, overflow_report);
    ++global_step_;
    if (autograd::is_anomaly_enabled()) check_update_under_anomaly();
    warn_once_if_float16_adam_state();
    step_losses_.push_back(strategy_->mean_over_ranks(mean_of(window_losses_)));
    window_losses_.clear();
    // Schedulers advance on every step, also one a loss scaler skipped (as Lightning does).
    step_schedulers("step", global_step_);
    send_step_metrics_every_n(global_step_ - 1);
  } else {
    closure();
  }
  batches_in_epoch_ = b + 1;
  MANTISSA_HOOK(on_train_batch_end, step_loss, batch, b);
}

void Trainer::check_cuda_graphs_allowed(const TrainModule& module) const {
  const char* kWhere = "Trainer";
  MANTISSA_CHECK(device_.is_cuda(), kWhere,
                 "cuda_graphs (--cuda-graphs) needs a GPU (--accelerator gpu); this fit runs on {}",
                 device_.str());
  MANTISSA_CHECK(module.automatic_optimization, kWhere,
                 "cuda_graphs (--cuda-graphs) needs automatic optimisation: {} steps its "
                 "optimizers itself",
                 module.name());
  MANTISSA_CHECK(options_.accumulate_grad_batches == 1, kWhere,
                 "cuda_graphs (--cuda-graphs) cannot accumulate gradients "
                 "(accumulate_grad_batches={}): each replay writes one batch's gradient",
                 options_.accumulate_grad_batches);
  MANTISSA_CHECK(strategy_->world_size() == 1, kWhere,
                 "cuda_graphs (--cuda-graphs) runs in one process; this fit has {} ranks",
                 strategy_->world_size());
  MANTISSA_CHECK(!options_.detect_anomaly, kWhere,
                 "cuda_graphs (--cuda-graphs) and detect_anomaly (--detect-anomaly) exclude each "
                 "other: anomaly detection reads every op's output on the host, which a graph "
                 "does not repeat");
  MANTISSA_CHECK(plugin_->precision().rfind("apex", 0) != 0, kWhere,
                 "cuda_graphs (--cuda-graphs) is not available with the Apex precision {}",
                 plugin_->precision());
}

// One batch's forward and backward through the CUDA graph (TrainerOptions::cuda_graphs): the
// module's training_loss captured once with its backward, then replayed; the loss's value then
// goes to on_training_loss, the divergence check and the step's loss, as training_step's would.
Tensor Trainer::graphed_forward_backward(const data::Example& batch, int64_t b) {
  optim::Optimizer& opt = *config_.optimizer;
  if (graphed_step_ == nullptr) {
    std::vector<Tensor> params;
    for (size_t g = 0; g < opt.num_param_groups(); ++g)
      for (const Tensor& p : opt.params(g)) params.push_back(p);
    graphed_step_ =
        std::make_unique<GraphedStep>(std::move(params), [this](const std::vector<Tensor>& in) {
          const Tensor loss = module_->training_loss({in[0], in[1]});
          MANTISSA_CHECK(loss.defined(), "Trainer",
                         "cuda_graphs (--cuda-graphs) needs {}::training_loss, the loss as a pure "
                         "function of the batch (train_module.h); it returned none",
                         module_->name());
          return loss;
        });
  }
  zero_grad_with_hooks(opt);
  const Tensor loss = in_training_step_scope([&] {
    return graphed_step_->run({batch.input, batch.target}, plugin_->scaler());
  });
  const double value = loss.item();
  module_->on_training_loss(value);
  record_training_loss(value, batch, b);
  MANTISSA_HOOK(on_after_backward);
  return loss;
}

Tensor Trainer::in_training_step_scope(const std::function<Tensor()>& body) {
  ProfileScope profile(profiler(), "[TrainModule]training_step");
  ScopePtr scope = plugin_->forward_context();
  const auto managed = managed_scope(*plugin_, *module_, "training_step");
  return body();
}

void Trainer::zero_grad_with_hooks(optim::Optimizer& opt) {
  MANTISSA_HOOK(on_before_zero_grad, opt);
  ProfileScope profile(profiler(), "zero_grad");
  opt.zero_grad();
}

void Trainer::record_training_loss(double value, const data::Example& batch, int64_t b) {
  // Under ddp every rank asks (another rank's loss may be the one that diverged).
  if (!std::isfinite(value) || strategy_->world_size() > 1)
    stop_if_any_rank_diverged(loss_divergence(value, batch, b));
  window_losses_.push_back(value);
}

void Trainer::send_step_metrics_every_n(int64_t steps_before) {
  if (global_step_ > steps_before && strategy_->world_size() > 1 && !step_metrics_.empty()) {
    // Under ddp what a step logged is the job's: the mean over the ranks (as step_losses), in
    // the loggers, the progress bar and callback_metrics alike. Every rank logged the same
    // names (one module), so the map's order lines the values up.
    std::vector<double> values;
    for (const auto& [name, m] : step_metrics_) values.push_back(m.value);
    strategy_->mean_over_ranks(values);
    size_t i = 0;
    for (auto& [name, m] : step_metrics_) {
      m.value = values[i++];
      callback_metrics_[name] = m.value;
      if (m.forked) callback_metrics_[name + "_step"] = m.value;
      if (prog_bar_metrics_.count(name)) prog_bar_metrics_[name] = m.value;
    }
  }
  // Every log_every_n_steps optimizer steps (a manual batch may take several steps at once).
  const int64_t n = options_.log_every_n_steps;
  if (global_step_ / n == steps_before / n || step_metrics_.empty()) return;
  std::map<std::string, double> row;
  for (const auto& [name, m] : step_metrics_) row[m.forked ? name + "_step" : name] = m.value;
  send_to_loggers(row);
  step_metrics_.clear();
}

Tensor Trainer::train_batch_manual(const data::Example& batch, int64_t b) {
  const int64_t steps_before = global_step_;
  Tensor loss;
  in_manual_step_ = true;
  try {
    // As in automatic optimisation, casts by hand in training_step warn; the Trainer calls it
    // makes from there (manual_backward, manual_step, clip_gradients) are internal.
    loss = in_training_step_scope([&] { return module_->training_step(batch, b); });
  } catch (...) {
    in_manual_step_ = false;
    throw;
  }
  in_manual_step_ = false;
  double value = NAN;
  if (loss.defined()) {
    MANTISSA_CHECK(loss.numel() == 1, "Trainer",
                   "training_step must return a scalar loss (or nothing), got shape {}",
                   loss.shape());
    loss = loss.detach();
    value = loss.item();
  }
  // The history keeps one entry per optimizer step (the checkpoint relies on it): every step
  // this batch took records the loss training_step returned (NaN when it returned none).
  if (global_step_ > steps_before) value = strategy_->mean_over_ranks(value);
  for (int64_t s = steps_before; s < global_step_; ++s) step_losses_.push_back(value);
  send_step_metrics_every_n(steps_before);
  return loss;
}

void Trainer::check_manual_call(const char* what) const {
  MANTISSA_CHECK(module_ != nullptr && !module_->automatic_optimization, "TrainModule",
                 "{} is for manual optimisation: set automatic_optimization = false in the "
                 "module's constructor (with automatic optimisation the Trainer does it)",
                 what);
  MANTISSA_CHECK(in_manual_step_, "TrainModule", "{} may only be called inside training_step",
                 what);
}

void Trainer::manual_backward(const Tensor& loss) {
  check_manual_call("manual_backward");
  InternalCastScope internal;  // the plugin's casts, not the user's
  MANTISSA_CHECK(loss.defined() && loss.numel() == 1, "TrainModule",
                 "manual_backward needs a scalar loss");
  const double value = loss.item();
  if (!std::isfinite(value) || strategy_->world_size() > 1)
    stop_if_any_rank_diverged(
        loss_divergence(value, data::Example{}, -1));  // the batch is not known here
  const Tensor to_backward = plugin_->pre_backward(loss);
  MANTISSA_HOOK(on_before_backward, to_backward);
  strategy_->before_backward(/*sync_gradients=*/true);
  {
    ProfileScope profile(profiler(), "backward");
    plugin_->backward(to_backward);
  }
  strategy_->after_backward();
  MANTISSA_HOOK(on_after_backward);
}

namespace {
void check_own_optimizer(const std::vector<std::shared_ptr<optim::Optimizer>>& own,
                         const optim::Optimizer& optimizer, const char* what) {
  MANTISSA_CHECK(is_one_of(own, optimizer), "TrainModule",
                 "{}: this {} is not one of the optimizers configure_optimizers() "
                 "returned",
                 what, optimizer.name());
}
}  // namespace

bool Trainer::manual_step(optim::Optimizer& optimizer) {
  check_manual_call("manual_step");
  InternalCastScope internal;  // the plugin's casts, not the user's
  check_own_optimizer(config_.optimizers, optimizer, "manual_step");
  // The closure of a manual step has run already (training_step did the backward): it only
  // tells the plugin that there is something to step.
  const Tensor ran = scalar_tensor(0.0, kFloat32);
  auto closure = [&]() { return ran; };
  auto after_closure = [&] {
    strategy_->before_optimizer_step(optimizer, *plugin_);
    MANTISSA_HOOK(on_before_optimizer_step, optimizer);
  };
  bool stepped = false;
  {
    ProfileScope profile(profiler(), "optimizer_step");
    try {
      stepped = plugin_->optimizer_step(optimizer, closure, after_closure);
    } catch (const optim::NonFiniteGradient& e) {
      throw_gradient_diverged(e, -1);
    }
  }
  ++global_step_;
  if (autograd::is_anomaly_enabled()) check_update_under_anomaly();
  warn_once_if_float16_adam_state();
  return stepped;
}

void Trainer::manual_clip_gradients(optim::Optimizer& optimizer, double clip_val,
                                    GradClipAlgorithm algorithm) {
  check_manual_call("clip_gradients");
  InternalCastScope internal;
  check_own_optimizer(config_.optimizers, optimizer, "clip_gradients");
  MANTISSA_CHECK(std::isfinite(clip_val) && clip_val >= 0, "TrainModule",
                 "clip_gradients needs a finite clip value >= 0, got {}", clip_val);
  // Clipping must see true gradients: under loss scaling unscale first (the step then does
  // not unscale again), as torch's recipe scaler.unscale_(opt); clip; scaler.step(opt).
  if (amp::GradScaler* scaler = plugin_->scaler();
      scaler != nullptr && !optimizer.step_supports_amp_scaling() &&
      scaler->stage(optimizer) == amp::OptState::kReady) {
    scaler->unscale_(optimizer);
  }
  plugin_->clip_gradients(optimizer, clip_val, algorithm);
}

void Trainer::report_scaler_step(const amp::GradScaler& scaler, double scale_before,
                                 int64_t skipped_before, const std::string& overflow_report) {
  auto emit = [&](std::string line) {
    fmt::print(stderr, "mantissa: anomaly: {}\n", line);
    anomaly_events_.push_back(std::move(line));
  };
  const double scale_after = scaler.get_scale();
  if (scaler.skipped_steps() > skipped_before) {
    emit(fmt::format("step {}: optimizer step skipped, inf/NaN gradients at loss scale {}{}",
                     global_step_, scale_before,
                     overflow_report.empty() ? std::string() : "; first: " + overflow_report));
  }
  if (scale_after != scale_before) {
    emit(fmt::format("step {}: loss scale {} -> {} ({})", global_step_, scale_before, scale_after,
                     scale_after < scale_before ? "backoff after inf/NaN gradients"
                                                : "growth after a run of clean steps"));
  }
}

void Trainer::step_schedulers(const std::string& interval, int64_t count) {
  // Under manual optimisation the module steps its schedulers itself (Lightning's rule): the
  // Trainer stepping them too would apply each epoch's decay twice.
  if (!module_->automatic_optimization) return;
  for (auto& s : config_.lr_schedulers) {
    if (s.interval != interval || count % s.frequency != 0) continue;
    // The Trainer steps a scheduler only after the optimizer steps of its step or epoch, so an
    // optimizer that has not stepped yet (in this process) had its steps skipped: a
    // GradScaler's inf/NaN gradients on the first steps of a 16-mixed run (the initial scale of
    // 65536 is there to be backed off from), a training_step that returned no loss, or a resume
    // at an epoch's end whose epoch schedulers step before any new optimizer step. torch warns
    // there all the same (Lightning users see it under AMP), but the order is right: the
    // warning would blame an order the user did not choose, on a normal run.
    s.scheduler->skip_step_order_check();
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

namespace {
// An evaluation's limit resolved against the longest shard's batches (the same on every rank;
// a collective under ddp), its error naming limit_val_batches or limit_test_batches.
int64_t resolve_eval_limit(Strategy& strategy, const BatchLimit& limit,
                           const data::DataLoader& shard, const std::string& stage) {
  const bool validating = stage == "validate";
  return limit.resolve(strategy.max_over_ranks(shard.size()),
                       validating ? "limit_val_batches" : "limit_test_batches",
                       validating ? "val" : "test");
}
}  // namespace

std::map<std::string, double> Trainer::run_eval(const data::DataLoader& loader,
                                                const std::string& stage, const BatchLimit& limit) {
  const std::string previous_stage = stage_;
  const bool was_training = module_->is_training();
  eval_sums_.clear();
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
  // Under ddp this rank's part of the set (no example on two ranks), the job's global batches
  // that its shard holds: a shorter shard may run one batch fewer (no collective inside the
  // loop, so the ranks need not run the same number).
  strategy_->before_evaluation();
  const data::DataLoader& shard = strategy_->evaluation_loader(loader);
  const int64_t n = std::min(resolve_eval_limit(*strategy_, limit, shard, stage), shard.size());
  const std::vector<int64_t> order = shard.indices(shard.epoch());
  ProfileScope profile_loop(profiler(), validating ? "run_validation" : "run_test");
  for (int64_t b = 0; b < n; ++b) {
    data::Example raw;
    {
      ProfileScope profile(profiler(), validating ? "get_validation_batch" : "get_test_batch");
      raw = shard.batch(order, b);
    }
    const data::Example batch = plugin_->convert_input(batch_to_device(raw));
    ScopePtr scope = plugin_->forward_context();
    ProfileScope profile(profiler(),
                         validating ? "[TrainModule]validation_step" : "[TrainModule]test_step");
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
  sum_eval_metrics_over_ranks();
  std::map<std::string, double> results;
  for (const auto& [name, s] : eval_sums_) results[name] = s.sum / static_cast<double>(s.count);
  warn_if_loss_not_finite(results, stage);
  flush_epoch_metrics(eval_sums_, logger_step_);
  // Before on_validation_end: a ModelCheckpoint saving there has a validation behind it.
  if (validating && !sanity_checking_) has_validated_ = true;
  if (validating) {
    MANTISSA_HOOK(on_validation_end);
  } else {
    MANTISSA_HOOK(on_test_end);
  }
  stage_ = previous_stage;
  if (was_training) module_->train();
  return results;
}

int64_t Trainer::evaluation_batches(const data::DataLoader& loader, const BatchLimit& limit,
                                    const std::string& stage) {
  return resolve_eval_limit(*strategy_, limit, strategy_->evaluation_loader(loader), stage);
}

void Trainer::sum_eval_metrics_over_ranks() {
  if (strategy_->world_size() <= 1) return;
  // Lightning leaves this to log(sync_dist=True), averaging the ranks' means; unsynced, each
  // rank's EarlyStopping and ModelCheckpoint would judge its own shard, disagree, and stop or
  // save apart. Here what was logged is always the job's: the batches' values summed and
  // counted over every rank (a value a module logged once per rank, already reduced, stays
  // itself). A rank whose shard was empty logged no per-batch value: the names are the union.
  std::vector<std::string> names;
  for (const auto& [name, s] : eval_sums_) names.push_back(name);
  names = strategy_->union_over_ranks(names);
  std::vector<double> values;
  for (const std::string& name : names) {
    const auto it = eval_sums_.find(name);
    const EpochSum s = it == eval_sums_.end() ? EpochSum{} : it->second;
    values.insert(values.end(), {s.sum, static_cast<double>(s.count), s.forked ? 1.0 : 0.0});
  }
  strategy_->sum_over_ranks(values);
  for (size_t i = 0; i < names.size(); ++i) {
    eval_sums_[names[i]] = {values[3 * i], static_cast<int64_t>(values[3 * i + 1]),
                            values[3 * i + 2] > 0};
  }
}

std::string Trainer::eval_checkpoint_path(const std::string& ckpt_path) const {
  if (ckpt_path != "best" && ckpt_path != "last") return ckpt_path;
  // "best" and "last" name the ModelCheckpoint's files, as Lightning's trainer.test(ckpt_path=)
  // reads them. (A file of that name is then reached as ./best.)
  const ModelCheckpoint* mc = nullptr;
  for (const auto& cb : callbacks_) {
    if (const auto* c = dynamic_cast<const ModelCheckpoint*>(cb.get())) {
      MANTISSA_CHECK(mc == nullptr, "Trainer",
                     "ckpt_path=\"{}\" is ambiguous with several ModelCheckpoint callbacks; give "
                     "the file's path",
                     ckpt_path);
      mc = c;
    }
  }
  MANTISSA_CHECK(mc != nullptr, "Trainer",
                 "ckpt_path=\"{}\" names a checkpoint of the ModelCheckpoint callback, but this "
                 "Trainer has none; give the file's path",
                 ckpt_path);
  const std::string& path = ckpt_path == "best" ? mc->best_model_path() : mc->last_model_path();
  MANTISSA_CHECK(!path.empty(), "Trainer",
                 "ckpt_path=\"{}\": the ModelCheckpoint has not saved {} checkpoint yet (fit "
                 "first{}); give the file's path",
                 ckpt_path, ckpt_path == "best" ? "a" : "a last",
                 ckpt_path == "last" ? ", with save_last" : "");
  return path;
}

std::map<std::string, double> Trainer::validate(TrainModule& module, const data::DataLoader& loader,
                                                const std::string& ckpt_path) {
  return evaluate(module, loader, ckpt_path, "validate", options_.limit_val_batches);
}

std::map<std::string, double> Trainer::test(TrainModule& module, const data::DataLoader& loader,
                                            const std::string& ckpt_path) {
  return evaluate(module, loader, ckpt_path, "test", options_.limit_test_batches);
}

std::map<std::string, double> Trainer::evaluate(TrainModule& module, const data::DataLoader& loader,
                                                const std::string& ckpt_path,
                                                const std::string& stage, const BatchLimit& limit) {
  ProfilerSession profiling(profiler());
  try {
    evaluation_batches(loader, limit, stage);  // a limit that leaves no batch: before setup
    setup(module, stage);
    if (!ckpt_path.empty())
      load_checkpoint_weights(module, eval_checkpoint_path(ckpt_path), plugin_.get());
    auto results = run_eval(loader, stage, limit);
    teardown(stage);
    for (auto& l : options_.loggers) l->finalize();
    return results;
  } catch (const std::exception& e) {
    notify_exception(e);
    throw;
  }
}

std::vector<Tensor> Trainer::predict(TrainModule& module, const data::DataLoader& loader,
                                     const std::string& ckpt_path) {
  ProfilerSession profiling(profiler());
  try {
    std::vector<Tensor> outputs = predict_impl(module, loader, ckpt_path);
    teardown("predict");
    return outputs;
  } catch (const std::exception& e) {
    notify_exception(e);
    throw;
  }
}

std::vector<Tensor> Trainer::predict_impl(TrainModule& module, const data::DataLoader& loader,
                                          const std::string& ckpt_path) {
  // Before setup, as fit / validate / test check theirs: a fraction leaving no batch is an error.
  const int64_t batches =
      options_.limit_predict_batches.resolve(loader.size(), "limit_predict_batches", "predict");
  setup(module, "predict");
  if (!ckpt_path.empty())
    load_checkpoint_weights(module, eval_checkpoint_path(ckpt_path), plugin_.get());
  const std::string previous_stage = stage_;
  const bool was_training = module_->is_training();
  stage_ = "predict";
  NoGradGuard no_grad;
  module_->eval();
  strategy_->before_evaluation();  // under ddp: every rank predicts with rank 0's buffers
  // Under ddp the ranks share the batches (rank r predicts batches r, r + N, ...) and then
  // exchange their outputs, so each returns the list one process would, in 1/N of the time.
  // A loader the caller sharded already (its own sampler) is predicted whole on each rank.
  const bool shared = strategy_->world_size() > 1 && loader.sampler() == nullptr;
  const int64_t first = shared ? strategy_->rank() : 0,
                stride = shared ? strategy_->world_size() : 1;
  std::vector<Tensor> outputs;
  const std::vector<int64_t> order = loader.indices(loader.epoch());
  ProfileScope profile_loop(profiler(), "run_predict");
  for (int64_t b = first; b < batches; b += stride) {
    data::Example raw;
    {
      ProfileScope profile(profiler(), "get_predict_batch");
      raw = loader.batch(order, b);
    }
    const data::Example batch = plugin_->convert_input(batch_to_device(raw));
    Tensor out;
    {
      ScopePtr scope = plugin_->forward_context();
      ProfileScope profile(profiler(), "[TrainModule]predict_step");
      const auto managed = managed_scope(*plugin_, *module_, "predict_step");
      out = module_->predict_step(batch, b);
    }
    if (out.defined()) {
      out = out.detach();
      if (out.dtype().is_reduced_float()) out = out.to(kFloat32);
    }
    outputs.push_back(out);
  }
  if (shared) outputs = interleave_ranks_predictions(outputs, batches);
  stage_ = previous_stage;
  if (was_training) module_->train();
  return outputs;
}

std::vector<Tensor> Trainer::interleave_ranks_predictions(const std::vector<Tensor>& mine,
                                                          int64_t batches) {
  const std::vector<std::vector<Tensor>> lists = strategy_->gather_over_ranks(mine);
  const int64_t world = strategy_->world_size();
  std::vector<Tensor> all;
  all.reserve(static_cast<size_t>(batches));
  for (int64_t b = 0; b < batches; ++b) {
    const std::vector<Tensor>& from = lists[static_cast<size_t>(b % world)];
    const auto i = static_cast<size_t>(b / world);
    MANTISSA_CHECK(i < from.size(), "Trainer.predict",
                   "rank {} returned {} predictions, batch {} of {} missing", b % world,
                   from.size(), b, batches);
    Tensor t = from[i];
    // Another rank's outputs arrive on the CPU; they go where this rank's own are.
    if (t.defined() && b % world != strategy_->rank() && t.device() != device_) t = t.to(device_);
    all.push_back(std::move(t));
  }
  return all;
}

void Trainer::save_checkpoint(const std::string& path) {
  MANTISSA_CHECK(module_ != nullptr && config_.optimizer != nullptr, "Trainer.save_checkpoint",
                 "nothing to save before fit() has set up a module and its optimizer ({})", path);
  module_->on_before_save_checkpoint();      // on every rank: it may gather over the ranks
  if (!strategy_->is_global_zero()) return;  // rank 0 writes for every rank
  if (accumulated_batches() > 0) {
    warn_once(fmt::format(
        "a checkpoint was written inside a gradient-accumulation window (at a batch that is not "
        "a multiple of accumulate_grad_batches={}, e.g. by a val_check_interval that is not): "
        "the window's accumulated gradients are not saved, so resuming from it is refused. "
        "Checkpoints written at optimizer steps resume exactly",
        options_.accumulate_grad_batches));
  }
  save_checkpoint_file(path, collect_checkpoint(*this));
}

}  // namespace mantissa::train
