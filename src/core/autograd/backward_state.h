#pragma once
// Whether this thread is inside run_backward. Autocast reads it: backward replays the dtypes
// the forward chose and never applies autocast policies, even when backward() is called
// inside an autocast region (docs/autocast.md). A depth, not a bool, so a backward started
// from inside a backward (a hook) restores correctly.
namespace mantissa::autograd {

inline constinit thread_local int t_backward_depth = 0;

inline bool in_backward() { return t_backward_depth > 0; }

// RAII: marks the scope as backward execution; exception-safe.
class BackwardScope {
 public:
  BackwardScope() { ++t_backward_depth; }
  ~BackwardScope() { --t_backward_depth; }
  BackwardScope(const BackwardScope&) = delete;
  BackwardScope& operator=(const BackwardScope&) = delete;
};

}  // namespace mantissa::autograd
