#include "mantissa/nn/module_hooks.h"

#include <utility>

namespace mantissa::nn {
namespace {

thread_local ChildRegisteredHook t_hook;
thread_local bool t_running = false;

}  // namespace

ChildRegisteredHook set_child_registered_hook(ChildRegisteredHook hook) {
  ChildRegisteredHook previous = std::move(t_hook);
  t_hook = std::move(hook);
  return previous;
}

namespace detail {

void notify_child_registered(Module& parent, const std::string& name) {
  if (!t_hook || t_running) return;
  t_running = true;
  struct Reset {
    ~Reset() { t_running = false; }
  } reset;
  const ChildRegisteredHook hook = t_hook;  // the hook may replace itself
  hook(parent, name);
}

}  // namespace detail
}  // namespace mantissa::nn
