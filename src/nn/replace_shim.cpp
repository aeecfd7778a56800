#include "nn/replace_shim.h"

#include "mantissa/core/error.h"

namespace mantissa::nn::detail {
namespace {

// The slots of a module. Module exposes them read-only; replacing a slot's module in place
// keeps its name and position, which is what replace_child promises.
Module::NamedModules& slots(Module& m) {
  return const_cast<Module::NamedModules&>(m.named_children());
}

void collect(Module& m, const std::string& prefix,
             std::vector<std::pair<std::string, Module*>>& out) {
  out.emplace_back(prefix, &m);
  for (const auto& [name, child] : m.named_children())
    collect(*child, prefix.empty() ? name : prefix + "." + name, out);
}

int replace_in(Module& m, const std::string& prefix, const ModuleMatch& match,
               const ModuleFactory& make) {
  int n = 0;
  for (auto& [name, child] : slots(m)) {
    const std::string q = prefix.empty() ? name : prefix + "." + name;
    if (match(q, *child)) {
      std::shared_ptr<Module> made = make(q, child);
      MANTISSA_CHECK(made != nullptr, "replace_modules", "the factory returned null for '{}'", q);
      child = std::move(made);
      ++n;
    } else {
      n += replace_in(*child, q, match, make);
    }
  }
  return n;
}

}  // namespace

std::vector<std::pair<std::string, Module*>> named_modules(Module& root) {
  std::vector<std::pair<std::string, Module*>> out;
  collect(root, "", out);
  return out;
}

Module& get_submodule(Module& root, const std::string& qualified_name) {
  Module* m = &root;
  size_t start = 0;
  while (start < qualified_name.size()) {
    size_t dot = qualified_name.find('.', start);
    if (dot == std::string::npos) dot = qualified_name.size();
    const std::string part = qualified_name.substr(start, dot - start);
    Module* next = nullptr;
    for (const auto& [name, child] : m->named_children())
      if (name == part) next = child.get();
    MANTISSA_CHECK(next != nullptr, "get_submodule", "{} has no child '{}' (in '{}')", m->name(),
                   part, qualified_name);
    m = next;
    start = dot + 1;
  }
  return *m;
}

std::shared_ptr<Module> replace_child(Module& parent, const std::string& name,
                                      std::shared_ptr<Module> module) {
  MANTISSA_CHECK(module != nullptr, "replace_child", "the new module for '{}' is null", name);
  for (auto& [n, child] : slots(parent)) {
    if (n == name) {
      std::shared_ptr<Module> old = std::move(child);
      child = std::move(module);
      return old;
    }
  }
  fail("replace_child", "{} has no child slot '{}'", parent.name(), name);
}

int replace_modules(Module& root, const ModuleMatch& match, const ModuleFactory& make) {
  return replace_in(root, "", match, make);
}

}  // namespace mantissa::nn::detail
