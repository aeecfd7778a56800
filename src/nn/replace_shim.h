#pragma once
// Module replacement for LoRA and the bitsandbytes plugin, as free functions with the semantics
// of nn::Module::named_modules / get_submodule / replace_child and nn::replace_modules (the
// registry work adds those to the Module API; once it is merged these forward to it).
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mantissa/nn/module.h"

namespace mantissa::nn::detail {

// root ("") and every descendant with its dotted name, depth first in registration order.
std::vector<std::pair<std::string, Module*>> named_modules(Module& root);
// The descendant at a dotted path ("" is root); throws naming the missing part.
Module& get_submodule(Module& root, const std::string& qualified_name);
// Puts `module` into parent's existing child slot `name`; returns the module that was there.
std::shared_ptr<Module> replace_child(Module& parent, const std::string& name,
                                      std::shared_ptr<Module> module);

using ModuleMatch = std::function<bool(const std::string& qualified_name, Module& module)>;
using ModuleFactory = std::function<std::shared_ptr<Module>(const std::string& qualified_name,
                                                            std::shared_ptr<Module> module)>;
// Replaces every matching descendant of root (not root) by make(name, old), depth first; a
// replaced module's children are not visited. Returns how many were replaced.
int replace_modules(Module& root, const ModuleMatch& match, const ModuleFactory& make);

}  // namespace mantissa::nn::detail
