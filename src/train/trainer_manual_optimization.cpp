// Manual optimisation (TrainModule::automatic_optimization = false): the batch runs the
// module's training_step alone, which calls manual_backward, manual_step and
// manual_clip_gradients on the optimizers configure_optimizers() returned.
#include "mantissa/train/trainer.h"

#include <cmath>

#include "mantissa/autograd/anomaly_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/optim/grad_scaler.h"
#include "train/trainer_internal.h"

namespace mantissa::train {

using namespace detail;  // the shared helpers of trainer_internal.h

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

}  // namespace mantissa::train
