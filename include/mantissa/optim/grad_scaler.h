#pragma once
// GradScaler: dynamic loss scaling for fp16 mixed precision, with torch.amp.GradScaler's
// behaviour (docs/grad_scaler.md): the same options and validation, the per-optimizer
// READY -> UNSCALED -> STEPPED state machine with PyTorch's error texts, the exact update rule
// (backoff on any inf/NaN, growth after growth_interval clean steps, never to +inf, no floor)
// and the same state_dict keys, so a checkpoint reads like PyTorch's.
//
//   amp::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.unscale_(opt);                       // optional: only to look at/clip true grads
//   nn::utils::clip_grad_norm_(opt.parameters(), 1.0);
//   scaler.step(opt);                           // skipped when a grad was inf/NaN
//   scaler.update();
//
// mantissa extensions (off by default, PyTorch has none of them): min_scale / max_scale bounds
// applied by update(), and skipped_steps(), the number of optimizer steps skipped so far.
//
// Not thread-safe: one scaler belongs to one training loop. Optimizers are recognised by
// address, like PyTorch's id(optimizer); update() forgets them all, so an optimizer destroyed
// between iterations cannot be confused with a new one at the same address.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "mantissa/core/tensor.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::amp {

// An enabled scaler checks what load_state_dict checks: init_scale finite and > 0 (as a
// float32), growth_factor finite and > 1, backoff_factor in (0, 1); growth_interval is free.
struct GradScalerOptions {
  double init_scale = 65536.0;     // 2^16; must be finite and > 0 when enabled
  double growth_factor = 2.0;      // must be finite and > 1 when enabled
  double backoff_factor = 0.5;     // must be in (0, 1) when enabled
  int64_t growth_interval = 2000;  // <= 0: the scale never grows
  bool enabled = true;
  // mantissa extensions: update() clamps the new scale into [min_scale, max_scale]. Each must
  // be finite and > 0 when set, and min_scale <= max_scale.
  std::optional<double> min_scale;
  std::optional<double> max_scale;
};

// Where an optimizer is in the current iteration (PyTorch's OptState).
enum class OptState { kReady, kUnscaled, kStepped };

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {});
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;
  GradScaler(GradScaler&&) = default;
  GradScaler& operator=(GradScaler&&) = default;

  // outputs * scale (differentiable). The scale is a 0-dim float32 tensor, so it follows the
  // usual promotion: a dimensioned fp16 tensor stays fp16, a 0-dim fp16 loss becomes fp32.
  // The first call creates the scale and growth tracker. Disabled: returns outputs itself.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);

  // Divides the optimizer's gradients by the scale in place and records whether any was inf
  // or NaN. Throws for fp16 gradients (fp32 master weights are expected; bf16 is accepted)
  // before touching any gradient, and when called twice or after step() in one iteration.
  void unscale_(optim::Optimizer& optimizer);

  // Unscales (unless unscale_ already ran) and calls optimizer.step() only when this
  // optimizer's gradients were all finite. Returns whether the step ran. Disabled: always
  // steps and returns true.
  bool step(optim::Optimizer& optimizer);

  // Backs off or grows the scale from every optimizer's inf checks of this iteration, then
  // resets every optimizer to READY. Call once per iteration, after all step() calls.
  void update();
  // Sets the scale to new_scale (rounded to float32) instead; the growth tracker is kept.
  // min_scale/max_scale do not apply: an explicit value is taken as given, but it must be
  // finite and > 0 as init_scale must (PyTorch takes any).
  void update(double new_scale);
  // Same with a one-element tensor that does not require grad.
  void update(const Tensor& new_scale);

  // The scale as a number: init_scale before the first scale(), 1.0 when disabled.
  double get_scale() const;
  double get_growth_factor() const { return growth_factor_; }
  // Checked as the constructor checks (PyTorch does not): a value load_state_dict would refuse
  // is refused here, so the state this scaler saves always loads back.
  void set_growth_factor(double v);
  double get_backoff_factor() const { return backoff_factor_; }
  void set_backoff_factor(double v);
  int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_interval(int64_t v) { growth_interval_ = v; }
  // Consecutive clean steps counted toward the next growth (0 when disabled).
  int64_t get_growth_tracker() const;
  bool is_enabled() const { return enabled_; }

  // {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}, or {}
  // when disabled. Take it after update() to checkpoint the end of an iteration.
  nlohmann::json state_dict() const;
  // No-op when disabled. Throws for an empty dict (saved by a disabled scaler) and names a
  // missing or mistyped key.
  void load_state_dict(const nlohmann::json& state);

  // ---- mantissa extensions ----
  std::optional<double> min_scale() const { return min_scale_; }
  std::optional<double> max_scale() const { return max_scale_; }
  // Optimizer steps skipped because of inf/NaN gradients since construction (not saved in
  // state_dict, which keeps PyTorch's keys).
  int64_t skipped_steps() const { return skipped_steps_; }
  // The optimizer's stage in the current iteration (kReady when unknown).
  OptState stage(const optim::Optimizer& optimizer) const;
  // The inf check of this optimizer's unscale_ in the current iteration: a 0-dim float32
  // tensor, nonzero when a gradient was inf or NaN; undefined before unscale_. It is the tensor
  // step() and update() read, so data-parallel training all-reduces it in place (max over the
  // ranks) and every rank skips the step and backs off the scale together. For gradients on a
  // GPU it lives on that GPU (unscale_ reads nothing back) until step() reads it, once, and
  // replaces it with its host copy; the scale itself stays on the host.
  Tensor found_inf(const optim::Optimizer& optimizer) const;
  // Records the inf check of `optimizer`'s gradients in this iteration when they were unscaled
  // elsewhere: zero2 (docs/distributed.md) unscales each rank's slice of the gradients in its
  // shard optimizer and reduces the flag over the ranks. `found_inf` is a 0-dim float32
  // tensor, nonzero to skip; step() and update() read it as unscale_'s own. After or instead of
  // unscale_, before step(); no-op when disabled.
  void record_found_inf(const optim::Optimizer& optimizer, const Tensor& found_inf);

 private:
  struct PerOptimizer {
    OptState stage = OptState::kReady;
    Tensor found_inf;  // 0-dim float32; undefined until a gradient was checked
  };

  void check_initialised(const char* funcname) const;

  bool enabled_;
  double init_scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  std::optional<double> min_scale_;
  std::optional<double> max_scale_;
  // Created by the first scale(): 0-dim float32 scale and int32 growth tracker.
  Tensor scale_;
  Tensor growth_tracker_;
  std::map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
  int64_t skipped_steps_ = 0;
};

}  // namespace mantissa::amp
