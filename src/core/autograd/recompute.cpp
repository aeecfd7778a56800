// The replay scope of activation checkpointing (mantissa/autograd/recompute.h).
#include "mantissa/autograd/recompute.h"

#include <utility>

#include "core/autograd/backward_state.h"

namespace mantissa::autograd {
namespace {
// Open RecomputeScopes on this thread. A backward started inside a replay (a nested
// checkpoint's) raises the backward depth again, and in_recompute() is false there, as in any
// backward, until that backward's own replay opens a scope.
constinit thread_local int t_recompute_depth = 0;
}  // namespace

RecomputeScope::RecomputeScope() : saved_backward_depth_(std::exchange(t_backward_depth, 0)) {
  ++t_recompute_depth;
}

RecomputeScope::~RecomputeScope() {
  --t_recompute_depth;
  t_backward_depth = saved_backward_depth_;
}

bool in_recompute() { return t_recompute_depth > 0 && t_backward_depth == 0; }

}  // namespace mantissa::autograd
