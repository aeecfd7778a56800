#include "mantissa/nn/module_list.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"

namespace mantissa::nn {

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules)
    : ModuleContainer("ModuleList") {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::extend(const std::vector<std::shared_ptr<Module>>& modules) {
  // Checked before any is added, so a refused list leaves this one as it was.
  for (const auto& m : modules) check_module(m.get());
  for (const auto& m : modules) push_back(m);
}

void ModuleList::check_module(const Module* m) const {
  MANTISSA_CHECK(m != nullptr, name(), "cannot hold a null module (entry {} of {})", size(),
                 name());
  MANTISSA_CHECK(m != this, name(), "a {} cannot hold itself", name());
}

std::shared_ptr<Module> ModuleList::operator[](int64_t i) const {
  const auto n = static_cast<int64_t>(size());
  MANTISSA_CHECK(i >= -n && i<n, name(), "index {} is out of range for {} modules{}", i, n, n> 0
                     ? fmt::format(" (valid: {} to {})", -n, n - 1)
                     : std::string());
  return child_slots()[static_cast<size_t>(i < 0 ? i + n : i)].second;
}

void ModuleList::throw_wrong_type(int64_t i, const Module& m) const {
  fail(name() + "::at", "module {} is a {}, not the type this code expects", i, m.name());
}

Tensor ModuleList::forward(const Tensor&) {
  fail("ModuleList",
       "a ModuleList has no forward (as PyTorch's): iterate it in your module's forward, e.g. "
       "`for (const auto& layer : *layers) x = layer->forward(x);`, or hold the layers in an "
       "nn::Sequential, whose forward chains them");
}

ModuleDict::ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> items)
    : ModuleContainer("ModuleDict") {
  for (const auto& [key, m] : items) insert_module(key, m);
}

void ModuleDict::insert_module(const std::string& key, std::shared_ptr<Module> m) {
  MANTISSA_CHECK(m != nullptr, "ModuleDict", "cannot hold a null module (key \"{}\")", key);
  MANTISSA_CHECK(m.get() != this, "ModuleDict", "a ModuleDict cannot hold itself");
  if (contains(key)) {
    replace_child(key, std::move(m));
    return;
  }
  register_module(key, std::move(m));  // checks the key: non-empty, no '.'
}

void ModuleDict::update(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items) {
  for (const auto& [key, m] : items) insert_module(key, m);
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, m] : child_slots())
    if (k == key) return true;
  return false;
}

const std::string& ModuleDict::checked_key(const std::string& key) const {
  if (contains(key)) return key;
  const std::vector<std::string> all = keys();
  const std::string meant = likely_meant(key, all);
  fail("ModuleDict", "no module under the key \"{}\"{}; the keys are: {}", key,
       meant.empty() ? std::string() : fmt::format(" (did you mean \"{}\"?)", meant),
       all.empty() ? std::string("none") : fmt::format("\"{}\"", fmt::join(all, "\", \"")));
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  return child(checked_key(key));
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, m] : child_slots()) out.push_back(k);
  return out;
}

std::vector<std::shared_ptr<Module>> ModuleDict::values() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [k, m] : child_slots()) out.push_back(m);
  return out;
}

Tensor ModuleDict::forward(const Tensor&) {
  fail("ModuleDict",
       "a ModuleDict has no forward (as PyTorch's): look its modules up by key in your module's "
       "forward, e.g. `(*heads)[\"cls\"]->forward(x)`");
}

}  // namespace mantissa::nn
