#pragma once
// nn::ModuleList and nn::ModuleDict: modules held in a list or under string keys so that their
// parameters, buffers and state-dict names are registered (PyTorch's torch.nn.ModuleList and
// ModuleDict; "layers.0.weight", "heads.cls.bias"). Neither has a forward: the owning module's
// forward decides how to call them.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mantissa/nn/module.h"

namespace mantissa::nn {

// Iterates a container's child slots, yielding the modules (a ModuleDict's items() yields the
// key/module pairs).
class ModuleSlotIterator {
 public:
  explicit ModuleSlotIterator(Module::NamedModules::const_iterator it) : it_(it) {}
  const std::shared_ptr<Module>& operator*() const { return it_->second; }
  ModuleSlotIterator& operator++() {
    ++it_;
    return *this;
  }
  bool operator==(const ModuleSlotIterator& other) const { return it_ == other.it_; }

 private:
  Module::NamedModules::const_iterator it_;
};

// What both containers share: their modules are their child slots, in order.
class ModuleContainer : public Module {
 public:
  size_t size() const { return child_slots().size(); }
  bool empty() const { return child_slots().empty(); }
  ModuleSlotIterator begin() const { return ModuleSlotIterator(child_slots().begin()); }
  ModuleSlotIterator end() const { return ModuleSlotIterator(child_slots().end()); }

 protected:
  using Module::Module;
};

class ModuleList : public ModuleContainer {
 public:
  ModuleList() : ModuleContainer("ModuleList") {}
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);

  // Appends m under the name of its index ("0", "1", ...) and returns it.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    check_module(m.get());
    return register_module(std::to_string(size()), std::move(m));
  }
  void extend(const std::vector<std::shared_ptr<Module>>& modules);
  // The i-th module; a negative i counts from the end, as in Python. Throws when out of range.
  std::shared_ptr<Module> operator[](int64_t i) const;
  // The i-th module as an M; throws naming its type when it is not one.
  template <typename M>
  std::shared_ptr<M> at(int64_t i) const {
    std::shared_ptr<Module> m = (*this)[i];
    auto typed = std::dynamic_pointer_cast<M>(m);
    if (!typed) throw_wrong_type(i, *m);
    return typed;
  }

  // A ModuleList has no forward (PyTorch's neither): throws saying to iterate it.
  Tensor forward(const Tensor& input) override;

 protected:
  // For nn::Sequential, a list whose forward chains its modules; errors name the type.
  explicit ModuleList(std::string type_name) : ModuleContainer(std::move(type_name)) {}

 private:
  void check_module(const Module* m) const;
  [[noreturn]] void throw_wrong_type(int64_t i, const Module& m) const;
};

class ModuleDict : public ModuleContainer {
 public:
  ModuleDict() : ModuleContainer("ModuleDict") {}
  ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> items);

  // Puts m under key: a new key is appended (insertion order is kept, as Python's dict), an
  // existing one has its module replaced in place (its position kept). Returns m. Keys are
  // non-empty and hold no '.', as every module name.
  template <typename M>
  std::shared_ptr<M> insert(const std::string& key, std::shared_ptr<M> m) {
    insert_module(key, m);
    return m;
  }
  // Inserts every pair in order (Python's update).
  void update(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items);
  bool contains(const std::string& key) const;
  // The module under key; throws listing the keys (and the closest one) when it is absent.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  template <typename M>
  std::shared_ptr<M> at(const std::string& key) const {
    return child_as<M>(checked_key(key));
  }
  std::vector<std::string> keys() const;
  std::vector<std::shared_ptr<Module>> values() const;
  // The key/module pairs in insertion order.
  const NamedModules& items() const { return child_slots(); }

  // A ModuleDict has no forward (PyTorch's neither): throws saying to look modules up by key.
  Tensor forward(const Tensor& input) override;

 private:
  void insert_module(const std::string& key, std::shared_ptr<Module> m);
  const std::string& checked_key(const std::string& key) const;
};

}  // namespace mantissa::nn
