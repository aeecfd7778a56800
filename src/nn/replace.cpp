#include "mantissa/nn/replace.h"

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "mantissa/core/error.h"

namespace mantissa::nn {
namespace {

// A module held in several slots (a shared block or layer) is visited once, under its first
// name, as named_modules() lists it; when it is replaced, every slot that held it gets the same
// replacement, so it stays one shared module (one set of weights) instead of being wrapped or
// quantized once per slot.
struct Walk {
  std::unordered_set<const Module*> visited;
  // old module -> its replacement; the old module is kept alive so that its address cannot be
  // reused by a module made during the walk.
  std::unordered_map<const Module*, std::pair<std::shared_ptr<Module>, std::shared_ptr<Module>>>
      replaced;
};

int replace_below(Module& parent, const std::string& prefix, const ModuleMatch& match,
                  const ModuleFactory& make, Walk& walk) {
  int count = 0;
  // Copy the slot list: replace_child rewrites the slot we are standing on.
  const Module::NamedModules slots = parent.child_slots();
  for (const auto& [name, child] : slots) {
    const std::string qualified = prefix.empty() ? name : prefix + "." + name;
    if (auto it = walk.replaced.find(child.get()); it != walk.replaced.end()) {
      parent.replace_child(name, it->second.second);
      continue;
    }
    if (!walk.visited.insert(child.get()).second) continue;
    if (match(qualified, *child)) {
      // Parameters the user froze stay frozen in the replacement (same names: "bias", ...).
      std::set<std::string> frozen;
      for (const auto& [pname, p] : child->named_parameters())
        if (!p.requires_grad()) frozen.insert(pname);
      std::shared_ptr<Module> replacement = make(qualified, child);
      MANTISSA_CHECK(replacement != nullptr, "replace_modules",
                     "the factory returned no module for \"{}\"", qualified);
      for (auto& [pname, p] : replacement->named_parameters())
        if (frozen.count(pname) != 0) p.requires_grad_(false);
      walk.replaced.emplace(child.get(), std::make_pair(child, replacement));
      parent.replace_child(name, std::move(replacement));
      ++count;
    } else {
      count += replace_below(*child, qualified, match, make, walk);
    }
  }
  return count;
}

}  // namespace

int replace_modules(Module& root, const ModuleMatch& match, const ModuleFactory& make) {
  MANTISSA_CHECK(match && make, "replace_modules", "match and make must both be set");
  Walk walk;
  walk.visited.insert(&root);
  return replace_below(root, "", match, make, walk);
}

}  // namespace mantissa::nn
