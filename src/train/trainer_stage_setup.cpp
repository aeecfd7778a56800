// The Trainer around each stage (fit, validate, test, predict): setup (the hooks, the model
// configured and converted by the precision plugin, moved to its device), the checks of what
// configure_optimizers() returned, the run configuration a checkpoint records, teardown and the
// on_exception dispatch.
#include "mantissa/train/trainer.h"

#include <fmt/format.h>

#include "mantissa/core/error.h"
#include "train/earlier_precision_check.h"
#include "train/trainer_internal.h"

namespace mantissa::train {

using namespace detail;  // the shared helpers of trainer_internal.h

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

}  // namespace mantissa::train
