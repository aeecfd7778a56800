#pragma once
// Learning-rate schedulers (torch.optim.lr_scheduler): each sets every param group's lr from
// the group's base lr (its lr when the scheduler was built) and the number of step() calls,
// with torch's closed forms, so a schedule does not drift with rounding and a checkpoint only
// needs last_epoch. Constructing a scheduler applies the value at last_epoch = 0, as torch's
// initial step does.
//
//   optim::AdamW opt(model->parameters(), optim::adamw_defaults());
//   optim::CosineAnnealingLR sched(opt, /*t_max=*/100);
//   for (...) { ...; opt.step(); sched.step(); }
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // "StepLR", "CosineAnnealingLR", ...: stored in the state dict and checked on load.
  virtual std::string name() const = 0;

  // Advances last_epoch by one and sets the optimizer's learning rates. The first call after
  // construction warns once when the optimizer has never stepped (torch's "Detected call of
  // `lr_scheduler.step()` before `optimizer.step()`"): the optimizer would then never use the
  // schedule's first lr, the one set at construction.
  virtual void step();
  // Schedulers driven by a monitored value (ReduceLROnPlateau) say so and are stepped with it;
  // the others refuse a metric.
  virtual bool needs_metric() const { return false; }
  virtual void step(double metric);
  // The lr of every group as last set by this scheduler.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return *optimizer_; }

  // {"name", "last_epoch", "base_lrs", "_last_lr"} plus each scheduler's settings and running
  // state.
  nlohmann::json state_dict() const;
  // The settings saved in the state dict (step_size, T_max, ReduceLROnPlateau's options, ...),
  // without the position or running state: what a Trainer's resume compares with the
  // checkpoint's.
  nlohmann::json settings() const { return hyper_json(); }
  // Restores a state_dict of the same scheduler kind over the same number of groups. As in
  // torch, the optimizer's learning rates are left alone (they are part of the optimizer's
  // state dict). Throws, changing nothing, on a mismatch.
  void load_state_dict(const nlohmann::json& state);
  // Replaces the base lr of every group and sets the optimizer's lrs to the schedule's value
  // at last_epoch (a resumed run that changes the learning rate keeps the schedule's shape;
  // ReduceLROnPlateau scales the lr it has reduced to by new / old base).
  void set_base_lrs(std::vector<double> base_lrs);
  // Marks the step-order check of step() as done, so that the first step() does not warn about
  // an optimizer that has not stepped yet: for a caller that steps the optimizer before the
  // scheduler by construction (the Trainer), where that means skipped optimizer steps, not a
  // wrong order.
  void skip_step_order_check() { step_order_checked_ = true; }

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // Call at the end of a derived constructor: applies the lr of last_epoch 0.
  void initial_step();
  // Advances last_epoch by one and sets every group's lr to lr_at(group, last_epoch).
  void advance();
  // Restores what hyper_json() saved beyond the common fields: the settings (as torch's
  // load_state_dict adopts the saved step_size, T_max, ...) and any running state. Checks
  // everything before changing anything; runs before the common fields are restored.
  virtual void load_hyper(const nlohmann::json& /*state*/) {}
  // The value of `key` in a saved state, or `current` for a state saved before it was recorded;
  // a mistyped value is an error naming the key. The JSON type must be the setting's: nlohmann
  // would convert a number of another kind or a boolean silently (a patience of 1.5 loading as
  // 1, a factor of true as 1.0).
  template <class T>
  T saved_setting(const nlohmann::json& state, const char* key, T current) const {
    if (!state.contains(key)) return current;
    const nlohmann::json& v = state.at(key);
    bool typed = true;
    if constexpr (std::is_same_v<T, bool>) {
      typed = v.is_boolean();
    } else if constexpr (std::is_integral_v<T>) {
      typed = v.is_number_integer();
    } else if constexpr (std::is_floating_point_v<T>) {
      typed = v.is_number();
    } else if constexpr (std::is_same_v<T, std::string>) {
      typed = v.is_string();
    }
    if (typed) {
      try {
        return v.get<T>();
      } catch (const nlohmann::json::exception&) {
      }
    }
    fail_mistyped(key, v);
  }
  // "<name>.load_state_dict: mistyped <key>: <an excerpt of the value>".
  [[noreturn]] void fail_mistyped(const char* key, const nlohmann::json& value) const;
  // The lr of a group at `epoch` (closed form).
  virtual double lr_at(size_t group, int64_t epoch) const = 0;
  // Runs after the lrs of `epoch` were set (OneCycleLR cycles the momentum here).
  virtual void after_apply(int64_t /*epoch*/) {}
  // Runs in set_base_lrs, before the lrs are applied: a scheduler whose lr is not a closed form
  // of the base (ReduceLROnPlateau) moves its own lrs to the new height here.
  virtual void base_lrs_changed(const std::vector<double>& /*old_base_lrs*/) {}
  // The optimizer's hyper-parameters of a group ("betas", "momentum", ...), and back.
  nlohmann::json group_options(size_t group) const { return optimizer_->group_options_json(group); }
  void set_group_options(size_t group, const nlohmann::json& options) {
    optimizer_->set_group_options_json(group, options);
  }
  // The settings saved in the state dict (settings()) and, apart from them, any running state
  // beyond the position (ReduceLROnPlateau's best and bad epochs); load_hyper restores both.
  virtual nlohmann::json hyper_json() const { return nlohmann::json::object(); }
  virtual nlohmann::json running_state_json() const { return nlohmann::json::object(); }

 private:
  // Sets every group's lr to lr_at(group, last_epoch).
  void apply();
  // The once-per-scheduler warning of step() (see there).
  void check_step_order();

  Optimizer* optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  // Whether step() has checked that the optimizer stepped first (done on the first step after
  // construction, or skipped: skip_step_order_check, a loaded state past its first step).
  bool step_order_checked_ = false;
};

// lr = base * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  std::string name() const override { return "StepLR"; }

 protected:
  double lr_at(size_t group, int64_t epoch) const override;
  nlohmann::json hyper_json() const override;
  void load_hyper(const nlohmann::json& state) override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base - eta_min) (1 + cos(pi epoch / t_max)) / 2 (torch's
// _get_closed_form_lr; it keeps following the cosine past t_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);
  std::string name() const override { return "CosineAnnealingLR"; }

 protected:
  double lr_at(size_t group, int64_t epoch) const override;
  nlohmann::json hyper_json() const override;
  void load_hyper(const nlohmann::json& state) override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// Linear warm-up (or decay) of the factor from start_factor to end_factor over total_iters
// steps, then constant: lr = base (start + (end - start) min(epoch, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0,
           int64_t total_iters = 5);
  std::string name() const override { return "LinearLR"; }

 protected:
  double lr_at(size_t group, int64_t epoch) const override;
  nlohmann::json hyper_json() const override;
  void load_hyper(const nlohmann::json& state) override;
  static void check_factors(double start_factor, double end_factor, int64_t total_iters);

 private:
  double start_factor_;
  double end_factor_;
  int64_t total_iters_;
};

// lr = base * lambda(epoch); one function for every group. The function is not saved.
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);
  std::string name() const override { return "LambdaLR"; }

 protected:
  double lr_at(size_t group, int64_t epoch) const override;

 private:
  std::function<double(int64_t)> lr_lambda_;
};

// The 1cycle policy (torch's OneCycleLR, two phases, cosine or linear annealing): from
// max_lr / div_factor up to max_lr over the first pct_start of total_steps, then down to
// initial_lr / final_div_factor at step total_steps - 1. Stepping past total_steps throws, as
// in torch. With cycle_momentum (torch's default) the momentum runs the other way, from
// max_momentum down to base_momentum while the lr rises and back up while it falls: Adam's
// beta1, SGD's momentum (set to max_momentum at construction, as torch does, even where it was
// 0). An optimizer with neither is an error.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             const std::string& anneal_strategy = "cos", double div_factor = 25.0,
             double final_div_factor = 1e4, bool cycle_momentum = true, double base_momentum = 0.85,
             double max_momentum = 0.95);
  std::string name() const override { return "OneCycleLR"; }

 protected:
  double lr_at(size_t group, int64_t epoch) const override;
  void after_apply(int64_t epoch) override;
  nlohmann::json hyper_json() const override;
  void load_hyper(const nlohmann::json& state) override;

 private:
  // The phase of `step` (false: rising to max_lr, true: annealing) and the fraction done.
  std::pair<bool, double> phase_at(int64_t step) const;
  double anneal(double start, double end, double pct) const;
  void set_momentum(size_t group, double momentum);

  double max_lr_, initial_lr_, min_lr_;
  int64_t total_steps_;
  double pct_start_;
  bool cosine_;
  bool cycle_momentum_;
  double base_momentum_, max_momentum_;
};

// Lowers the lr by `factor` when a monitored value has not improved for more than `patience`
// steps (torch's ReduceLROnPlateau: threshold in "rel" or "abs" mode, cooldown, min_lr, and
// changes smaller than eps ignored). Stepped with the metric: step(val_loss). In a Trainer,
// give its LRSchedulerConfig a `monitor` (a logged metric's name). Its state dict holds the
// options and the running state; load_state_dict adopts both, as torch's does. Unlike the other
// schedulers, step(metric) does not warn when the optimizer has not stepped yet (nor does
// torch's): a metric-driven lr has no first value of a schedule to skip.
// (Implemented in src/optim/reduce_lr_on_plateau.cpp.)
class ReduceLROnPlateau : public LRScheduler {
 public:
  struct Options {
    std::string mode = "min";  // "min" or "max"
    double factor = 0.1;
    int64_t patience = 10;
    double threshold = 1e-4;
    std::string threshold_mode = "rel";  // "rel" or "abs"
    int64_t cooldown = 0;
    double min_lr = 0.0;
    double eps = 1e-8;
  };
  explicit ReduceLROnPlateau(Optimizer& optimizer, Options options);
  explicit ReduceLROnPlateau(Optimizer& optimizer) : ReduceLROnPlateau(optimizer, Options{}) {}
  std::string name() const override { return "ReduceLROnPlateau"; }

  bool needs_metric() const override { return true; }
  void step() override;  // throws: the metric is required
  void step(double metric) override;
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  const Options& options() const { return options_; }

 protected:
  double lr_at(size_t group, int64_t epoch) const override;
  nlohmann::json hyper_json() const override;
  nlohmann::json running_state_json() const override;
  void load_hyper(const nlohmann::json& state) override;
  void base_lrs_changed(const std::vector<double>& old_base_lrs) override;

 private:
  // Throws, naming the field, for options the scheduler cannot run with (the constructor's and
  // load_state_dict's check).
  static void check_options(const Options& o, const std::string& where);
  // The options of a saved state, each the constructed one where the state lacks it; checked.
  Options saved_options(const nlohmann::json& state) const;
  bool is_better(double a) const;

  Options options_;
  std::vector<double> current_lrs_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
};

}  // namespace mantissa::optim
