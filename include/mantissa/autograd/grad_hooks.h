#pragma once
// Post-accumulate-grad hooks (torch.Tensor.register_post_accumulate_grad_hook): a function that
// runs right after backward has accumulated a leaf's gradient into its .grad, while the rest of
// backward still runs. Data-parallel training starts a bucket's all-reduce from here, so
// communication overlaps the remaining backward (docs/distributed.md).
//
// The engine sums every gradient reaching a leaf before its AccumulateGrad runs, so a hook runs
// once per backward pass for each leaf that received a gradient (also a weight used twice).
#include <cstdint>
#include <functional>

#include "mantissa/core/tensor.h"

namespace mantissa::autograd {

using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

// Removes its hook when destroyed (or by remove()). Movable, not copyable.
class GradHookHandle {
 public:
  GradHookHandle() = default;
  explicit GradHookHandle(uint64_t id) : id_(id) {}
  GradHookHandle(GradHookHandle&& o) noexcept : id_(o.id_) { o.id_ = 0; }
  GradHookHandle& operator=(GradHookHandle&& o) noexcept;
  GradHookHandle(const GradHookHandle&) = delete;
  GradHookHandle& operator=(const GradHookHandle&) = delete;
  ~GradHookHandle() { remove(); }
  void remove();

 private:
  uint64_t id_ = 0;
};

// `leaf` must be a leaf tensor that requires grad. The hook gets the leaf (its grad() holds the
// accumulated gradient) and may read or replace the gradient.
[[nodiscard]] GradHookHandle register_post_accumulate_grad_hook(const Tensor& leaf,
                                                                PostAccumulateGradHook hook);

// Runs the hooks registered for `leaf` (AccumulateGrad calls it).
void run_post_accumulate_grad_hooks(const Tensor& leaf);

}  // namespace mantissa::autograd
