#pragma once
// Replacing layers of a built model, the way Lightning's FP8 and bitsandbytes precision plugins
// swap every Linear at setup: replace_modules walks the tree and puts what `make` returns into
// each matching slot (Module::replace_child), so parameter names and state-dict keys stay the
// same as long as the new module names its tensors like the old one (a wrapper that registers
// the old module as a child would add a prefix; one that registers the old weight and bias
// under "weight" and "bias" keeps them).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/nn/module.h"

namespace mantissa::nn {

// Decides whether the module at `qualified_name` ("h0.mlp.fc1") is replaced.
using ModuleMatch = std::function<bool(const std::string& qualified_name, Module& module)>;
// Builds the replacement from the module now in the slot (it may keep and call it).
using ModuleFactory = std::function<std::shared_ptr<Module>(const std::string& qualified_name,
                                                            std::shared_ptr<Module> module)>;

// Replaces every descendant of root (root itself is never replaced) for which match returns
// true by make(name, old), depth first in named_modules() order; a replaced module's own
// children and the replacement are not visited. A module held in several slots is matched
// once, under its first name, and every slot that held it gets the same replacement (it stays
// shared). Returns how many modules were replaced. make must return a non-null module.
int replace_modules(Module& root, const ModuleMatch& match, const ModuleFactory& make);

// match for replace_modules: modules of type M that are neither named in `except` nor inside a
// module named there ("h0" keeps "h0.attn.in_proj" and every other layer of block h0).
template <typename M>
ModuleMatch match_type(std::vector<std::string> except = {}) {
  return [except = std::move(except)](const std::string& qualified_name, Module& m) {
    if (dynamic_cast<M*>(&m) == nullptr) return false;
    for (const std::string& e : except) {
      if (qualified_name == e || (qualified_name.size() > e.size() &&
                                  qualified_name.starts_with(e) && qualified_name[e.size()] == '.'))
        return false;
    }
    return true;
  };
}

}  // namespace mantissa::nn
