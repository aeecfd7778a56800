#pragma once
// What the Trainer's files (trainer_stage_setup.cpp, trainer_fit.cpp, trainer_step.cpp,
// trainer_manual_optimization.cpp, trainer_evaluation.cpp) share: the macro that dispatches a
// hook to the callbacks and the module, and small helpers.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/core/managed_precision.h"
#include "mantissa/optim/optimizer.h"
#include "mantissa/train/callback.h"
#include "mantissa/train/precision.h"
#include "mantissa/train/report/profiler.h"
#include "mantissa/train/train_module.h"

// Calls a hook on every callback (in order), then on the module: Lightning's order. Each
// call is an action of the profiler ("[Callback]<state_key>.<hook>", "[TrainModule]<hook>").
#define MANTISSA_HOOK(hook, ...)                                                           \
  do {                                                                                     \
    for (auto& cb_ : callbacks_) {                                                         \
      ProfileScope profile_(profiler(), detail::callback_action(profiler(), *cb_, #hook)); \
      cb_->hook(*this, *module_ __VA_OPT__(, ) __VA_ARGS__);                               \
    }                                                                                      \
    ProfileScope profile_(profiler(), profiler() ? "[TrainModule]" #hook : "");            \
    module_->hook(__VA_ARGS__);                                                            \
  } while (0)

namespace mantissa::train::detail {

// Whether `optimizer` is one of those configure_optimizers() returned.
inline bool is_one_of(const std::vector<std::shared_ptr<optim::Optimizer>>& own,
                      const optim::Optimizer& optimizer) {
  return std::any_of(own.begin(), own.end(), [&](const auto& o) { return o.get() == &optimizer; });
}

inline std::string callback_action(const Profiler* profiler, const Callback& cb, const char* hook) {
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

inline double sum_of(const std::vector<double>& v) {
  if (v.empty()) return NAN;  // no loss (every training_step skipped), as mean_of
  double s = 0;
  for (double x : v) s += x;
  return s;
}

inline double mean_of(const std::vector<double>& v) {
  return sum_of(v) / static_cast<double>(v.size());
}

// Marks a step of a plugin that manages dtypes (all but plain 32-true), so autocast regions
// and parameter casts made by hand in it warn (mantissa/core/managed_precision.h).
inline std::unique_ptr<ManagedPrecisionScope> managed_scope(const Precision& plugin,
                                                            const TrainModule& module,
                                                            const char* hook) {
  if (plugin.class_name() == "Precision") return nullptr;
  return std::make_unique<ManagedPrecisionScope>(
      fmt::format("{} ({})", plugin.class_name(), plugin.precision()),
      fmt::format("{}.{}", module.name(), hook));
}

}  // namespace mantissa::train::detail
