// The post-accumulate-grad hook registry. Hooks are keyed by the leaf's TensorImpl; a table
// beside the tensor (instead of a field in TensorImpl) keeps the common case, no hook at all,
// at one relaxed atomic load per AccumulateGrad.
#include "mantissa/autograd/grad_hooks.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace mantissa::autograd {
namespace {

struct Entry {
  uint64_t id;
  const TensorImpl* leaf;
  PostAccumulateGradHook hook;
};

struct Registry {
  std::mutex mutex;
  std::vector<Entry> entries;
  uint64_t next_id = 1;
  std::atomic<size_t> count{0};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

GradHookHandle& GradHookHandle::operator=(GradHookHandle&& o) noexcept {
  if (this != &o) {
    remove();
    id_ = o.id_;
    o.id_ = 0;
  }
  return *this;
}

void GradHookHandle::remove() {
  if (id_ == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::erase_if(r.entries, [&](const Entry& e) { return e.id == id_; });
  r.count.store(r.entries.size(), std::memory_order_relaxed);
  id_ = 0;
}

GradHookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  MANTISSA_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(),
                 "register_post_accumulate_grad_hook",
                 "post-accumulate-grad hooks can only be registered on leaf tensors that require "
                 "grad");
  MANTISSA_CHECK(hook != nullptr, "register_post_accumulate_grad_hook", "the hook is empty");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const uint64_t id = r.next_id++;
  r.entries.push_back({id, &leaf.impl(), std::move(hook)});
  r.count.store(r.entries.size(), std::memory_order_relaxed);
  return GradHookHandle(id);
}

void run_post_accumulate_grad_hooks(const Tensor& leaf) {
  Registry& r = registry();
  if (r.count.load(std::memory_order_relaxed) == 0) return;
  std::vector<PostAccumulateGradHook> hooks;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const Entry& e : r.entries)
      if (e.leaf == &leaf.impl()) hooks.push_back(e.hook);
  }
  for (const auto& h : hooks) h(leaf);
}

}  // namespace mantissa::autograd
