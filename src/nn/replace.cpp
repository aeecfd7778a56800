#include "mantissa/nn/replace.h"

#include <set>

#include "mantissa/core/error.h"

namespace mantissa::nn {
namespace {

int replace_below(Module& parent, const std::string& prefix, const ModuleMatch& match,
                  const ModuleFactory& make) {
  int count = 0;
  // Copy the slot list: replace_child rewrites the slot we are standing on.
  const Module::NamedModules slots = parent.named_children();
  for (const auto& [name, child] : slots) {
    const std::string qualified = prefix.empty() ? name : prefix + "." + name;
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
      parent.replace_child(name, std::move(replacement));
      ++count;
    } else {
      count += replace_below(*child, qualified, match, make);
    }
  }
  return count;
}

}  // namespace

int replace_modules(Module& root, const ModuleMatch& match, const ModuleFactory& make) {
  MANTISSA_CHECK(match && make, "replace_modules", "match and make must both be set");
  return replace_below(root, "", match, make);
}

}  // namespace mantissa::nn
