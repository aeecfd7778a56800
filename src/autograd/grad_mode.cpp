#include "mantissa/autograd/grad_mode.h"

#include <algorithm>
#include <vector>

#include "mantissa/core/warning.h"

namespace mantissa {
namespace {
thread_local bool t_grad_enabled = true;
// The grad-mode guards open on this thread, innermost last: a guard closed before one opened
// inside it is found here (see GradModeGuard).
thread_local std::vector<detail::GradModeGuard*> t_guards;
}  // namespace
bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace detail {

GradModeGuard::GradModeGuard(bool enabled) : prev_(t_grad_enabled) {
  t_grad_enabled = enabled;
  t_guards.push_back(this);
}

GradModeGuard::~GradModeGuard() {
  const auto it = std::find(t_guards.begin(), t_guards.end(), this);
  if (it == t_guards.end()) {
    // Closed on another thread than it was opened on: that thread's mode is out of reach.
    warn_once(
        "a NoGradGuard or EnableGradGuard was closed on another thread than the one that "
        "opened it; that thread's grad mode was not restored (open and close each guard on one "
        "thread)");
    return;
  }
  if (it + 1 != t_guards.end()) {
    // Guards opened inside this one are still open. Restoring this guard's saved mode now would
    // be undone when they close (the innermost restores what this one set, so a NoGradGuard
    // closed first left recording off after every guard had closed). Instead the mode from
    // before this guard is handed to the guard above, which restores it when it closes; the
    // mode stays what the innermost open guard set.
    warn_once(
        "grad-mode guards (NoGradGuard / EnableGradGuard) were closed out of order (a guard "
        "closed while a guard opened inside it was still open); the grad mode is restored as if "
        "they had closed in order, innermost first");
    (*(it + 1))->prev_ = prev_;
    t_guards.erase(it);
    return;
  }
  t_guards.pop_back();
  t_grad_enabled = prev_;
}

}  // namespace detail
}  // namespace mantissa
