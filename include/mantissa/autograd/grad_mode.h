#pragma once
// Thread-local switch for graph recording (torch.no_grad / torch.enable_grad).
#include "mantissa/core/scoped_setting.h"

namespace mantissa {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

namespace detail {
struct GradModeSetting {
  using Value = bool;
  static bool get() { return GradMode::is_enabled(); }
  static void set(bool enabled) { GradMode::set_enabled(enabled); }
  static constexpr bool kProcessWide = false;
  static constexpr const char* kGuards = "grad-mode guards (NoGradGuard / EnableGradGuard)";
  static constexpr const char* kValue = "the grad mode";
};
extern template class ScopedSetting<GradModeSetting>;

// What NoGradGuard and EnableGradGuard share: sets the mode, and on exit restores the mode from
// before it, also when guards are closed out of order (ScopedSetting says how).
using GradModeGuard = ScopedSetting<GradModeSetting>;
}  // namespace detail

// RAII: disables recording in this scope, restores the previous mode on exit.
class NoGradGuard : detail::GradModeGuard {
 public:
  NoGradGuard() : detail::GradModeGuard(false) {}
};

// RAII: enables recording in this scope (e.g. inside a no_grad region).
class EnableGradGuard : detail::GradModeGuard {
 public:
  EnableGradGuard() : detail::GradModeGuard(true) {}
};

}  // namespace mantissa
