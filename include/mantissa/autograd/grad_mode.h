#pragma once
// Thread-local switch for graph recording (torch.no_grad / torch.enable_grad).

namespace mantissa {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

namespace detail {
// What NoGradGuard and EnableGradGuard share: sets the mode, and on exit restores the mode from
// before it. The guards open on a thread are tracked, so guards closed out of order (held by
// unique_ptr or optional and reset in another order than made) still leave the mode as closing
// in order would: while some are open it is what the innermost open one set, and once all are
// closed it is what it was before the first.
class GradModeGuard {
 public:
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 protected:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();

 private:
  bool prev_;
};
}  // namespace detail

// RAII: disables recording in this scope, restores the previous mode on exit.
class NoGradGuard : detail::GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

// RAII: enables recording in this scope (e.g. inside a no_grad region).
class EnableGradGuard : detail::GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};

}  // namespace mantissa
