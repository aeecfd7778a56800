// One training batch under automatic optimisation: the closure (training_step, zero_grad,
// backward between its hooks), the precision plugin's optimizer step with clipping and
// accumulation, CUDA graph replay, the step's loss and metrics, the loss scaler's report and
// the LR schedulers' steps.
#include "mantissa/train/trainer.h"

#include <fmt/format.h>

#include <cmath>

#include "mantissa/autograd/anomaly_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/graphed_step.h"
#include "mantissa/train/step_items.h"
#include "train/loss_reach_check.h"
#include "train/trainer_internal.h"

namespace mantissa::train {

using namespace detail;  // the shared helpers of trainer_internal.h

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
  batch_ends_step_ = step_batch;
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
    // Mean losses over the accumulated batches give the big batch's gradient; an item-weighted
    // loss is the batch's share of the step's already (TrainModule::loss_items).
    const Tensor scaled =
        accum > 1 && !item_weighted_ ? div(loss, static_cast<double>(accum)) : loss;
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
    if (step_batch) strategy_->after_step_backward(opt);
    MANTISSA_HOOK(on_after_backward);
    step_loss = loss.detach();
    return step_loss;
  };
  if (step_batch) {
    auto after_closure = [&] {
      strategy_->before_optimizer_step(opt, *plugin_);
      MANTISSA_HOOK(on_before_optimizer_step, opt);
      if (options_.gradient_clip_val <= 0 ||
          !strategy_->clip_gradients(opt, options_.gradient_clip_val, clip_algorithm_))
        plugin_->clip_gradients(opt, options_.gradient_clip_val, clip_algorithm_);
      strategy_->before_optimizer_update(opt);
    };
    // A step whose batches hold no item has nothing to learn from: its optimizer does not step,
    // as after a training_step that returned no loss (Lightning's None), since AdamW's moments
    // and weight decay would still move the weights on its zero gradient. Its batches still run
    // (every rank's backward and reductions, in step with the others), and, as Lightning's, it
    // counts as a global step and the schedulers step.
    const bool no_items = item_weighted_ && step_has_no_items(*this);
    auto step_closure = [&]() -> Tensor {
      const Tensor loss = closure();
      return no_items ? Tensor() : loss;
    };
    const double scale_before = watch_scaler ? scaler->get_scale() : 0.0;
    const int64_t skipped_before = watch_scaler ? scaler->skipped_steps() : 0;
    {
      // The closure (training_step, backward) runs inside: "optimizer_step" covers the whole
      // step, as Lightning's; the parts have their own actions.
      ProfileScope profile(profiler(), "optimizer_step");
      try {
        plugin_->optimizer_step(opt, step_closure, after_closure);
        strategy_->after_optimizer_update(opt);
      } catch (const optim::NonFiniteGradient& e) {
        throw_gradient_diverged(e, b);
      }
    }
    if (watch_scaler) report_scaler_step(*scaler, scale_before, skipped_before, overflow_report);
    ++global_step_;
    if (autograd::is_anomaly_enabled()) check_update_under_anomaly();
    warn_once_if_float16_adam_state();
    // An item-weighted step's loss is the sum of its shares (on each rank world / items times
    // its sums with average_items_across_ranks, so the mean over the ranks is the sum over every
    // item divided by their count).
    const double rank_loss = item_weighted_ ? sum_of(window_losses_) : mean_of(window_losses_);
    const double job_loss = strategy_->mean_over_ranks(rank_loss);
    // A step without any item trained nothing: no loss (its shares' 0 is no mean).
    step_losses_.push_back(no_items ? NAN : job_loss);
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

}  // namespace mantissa::train
