#pragma once
// A per-thread hook that sees every child a module registers while a model is being built.
// Precision plugins that replace layers use it to act while a model is still under
// construction: the bitsandbytes plugin quantizes a layer as soon as its parent registers the
// next child, so a big model never holds all of its full-precision weights at once (see
// docs/quantization.md).
#include <functional>
#include <string>

namespace mantissa::nn {

class Module;

// Called on this thread right after `parent` registers a child under `name`.
using ChildRegisteredHook = std::function<void(Module& parent, const std::string& name)>;

// Installs `hook` for this thread (an empty function removes it) and returns the previous one.
// The hook is suspended while it runs, so modules it builds do not call it again.
ChildRegisteredHook set_child_registered_hook(ChildRegisteredHook hook);

// Installs a hook for a scope and restores the previous one on exit.
class ChildRegisteredHookGuard {
 public:
  explicit ChildRegisteredHookGuard(ChildRegisteredHook hook)
      : previous_(set_child_registered_hook(std::move(hook))) {}
  ~ChildRegisteredHookGuard() { set_child_registered_hook(std::move(previous_)); }
  ChildRegisteredHookGuard(const ChildRegisteredHookGuard&) = delete;
  ChildRegisteredHookGuard& operator=(const ChildRegisteredHookGuard&) = delete;

 private:
  ChildRegisteredHook previous_;
};

namespace detail {
// Module::add_child calls this after registering a child.
void notify_child_registered(Module& parent, const std::string& name);
}  // namespace detail

}  // namespace mantissa::nn
