#pragma once
// Replacing layers of a built model, the way the transformer-engine and bitsandbytes precision
// plugins swap every Linear at setup: replace_modules walks the tree and puts what `make` returns
// into each matching slot (Module::replace_child), so parameter names and state-dict keys stay the
// same as long as the new module names its tensors like the old one (a wrapper that registers
// the old module as a child would add a prefix; one that registers the old weight and bias
// under "weight" and "bias" keeps them).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
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

// What replace_modules remembers of the modules it met: for walks made one after the other over
// parts of one model (the bitsandbytes init scope quantizes each finished child of the model on
// its own), so that a module shared between two parts is replaced once and every slot holding it
// gets that one replacement. Modules are remembered by weak reference: a remembered module that
// was freed is forgotten (its address may be reused), and the memo keeps no replaced module's
// weights alive.
class ReplaceMemo {
 public:
  // When `module` was met before: its replacement, or null when it was kept (a container walked
  // into, or a module not matched). nullopt when it was not met.
  std::optional<std::shared_ptr<Module>> find(const std::shared_ptr<Module>& module);
  void remember(const std::shared_ptr<Module>& module, std::shared_ptr<Module> replacement);

 private:
  struct Entry {
    std::weak_ptr<Module> module;
    std::shared_ptr<Module> replacement;
  };
  std::unordered_map<const Module*, Entry> entries_;
};

// replace_modules over root, remembering in (and consulting) `memo` across calls.
int replace_modules(Module& root, const ModuleMatch& match, const ModuleFactory& make,
                    ReplaceMemo& memo);

// The modules of root (root included, under "") that have a qualified name for which `named`
// is true, trying every name of a module held in several slots (named_modules(false)): a
// shared layer is named by any of its names.
std::unordered_set<const Module*> modules_with_a_name(
    const Module& root, const std::function<bool(const std::string&)>& named);

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
