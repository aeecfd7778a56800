#pragma once
// Activation checkpointing's replay (nn/checkpoint.h): a backward function that runs part of
// the forward again to rebuild the graph it did not keep. Inside a RecomputeScope ops behave as
// in a forward although the thread is inside run_backward: graph recording is on, and autocast
// applies as the regions opened inside the scope say (backward otherwise never applies it,
// docs/autocast.md). Layers whose forward has side effects read in_recompute(): BatchNorm
// updates its running statistics in the first forward only.
#include "mantissa/autograd/grad_mode.h"

namespace mantissa::autograd {

// RAII; restores the backward state and grad mode on exit, exceptions included. Nests.
class RecomputeScope {
 public:
  RecomputeScope();
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  int saved_backward_depth_;
  EnableGradGuard grad_on_;
};

// True inside a RecomputeScope on this thread (and not in a backward started inside it).
bool in_recompute();

}  // namespace mantissa::autograd
