#include "mantissa/nn/replace.h"

#include <set>

#include "mantissa/core/error.h"

namespace mantissa::nn {
// A module held in several slots (a shared block or layer) is visited once, under its first
// name, as named_modules() lists it; when it is replaced, every slot that held it gets the same
// replacement, so it stays one shared module (one set of weights) instead of being wrapped or
// quantized once per slot. The memo carries that across calls.
std::optional<std::shared_ptr<Module>> ReplaceMemo::find(const std::shared_ptr<Module>& module) {
  const auto it = entries_.find(module.get());
  if (it == entries_.end()) return std::nullopt;
  if (it->second.module.lock() != module) {
    // The module met there was freed and another made at its address.
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.replacement;
}

void ReplaceMemo::remember(const std::shared_ptr<Module>& module,
                           std::shared_ptr<Module> replacement) {
  entries_[module.get()] = Entry{module, std::move(replacement)};
}

namespace {

int replace_below(Module& parent, const std::string& prefix, const ModuleMatch& match,
                  const ModuleFactory& make, ReplaceMemo& memo) {
  int count = 0;
  // Copy the slot list: replace_child rewrites the slot we are standing on.
  const Module::NamedModules slots = parent.child_slots();
  for (const auto& [name, child] : slots) {
    const std::string qualified = prefix.empty() ? name : prefix + "." + name;
    if (const auto met = memo.find(child)) {
      if (*met) parent.replace_child(name, *met);
      continue;
    }
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
      memo.remember(child, replacement);
      parent.replace_child(name, std::move(replacement));
      ++count;
    } else {
      memo.remember(child, nullptr);
      count += replace_below(*child, qualified, match, make, memo);
    }
  }
  return count;
}

}  // namespace

int replace_modules(Module& root, const ModuleMatch& match, const ModuleFactory& make,
                    ReplaceMemo& memo) {
  MANTISSA_CHECK(match && make, "replace_modules", "match and make must both be set");
  return replace_below(root, "", match, make, memo);
}

int replace_modules(Module& root, const ModuleMatch& match, const ModuleFactory& make) {
  ReplaceMemo memo;
  return replace_modules(root, match, make, memo);
}

std::unordered_set<const Module*> modules_with_a_name(
    const Module& root, const std::function<bool(const std::string&)>& named) {
  std::unordered_set<const Module*> out;
  for (const auto& [q, m] : root.named_modules(/*remove_duplicate=*/false))
    if (named(q)) out.insert(m);
  return out;
}

}  // namespace mantissa::nn
