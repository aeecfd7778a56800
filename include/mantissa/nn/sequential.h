#pragma once
// nn::Sequential: children named "0", "1", ... whose forwards are chained.
#include <initializer_list>
#include <memory>

#include "mantissa/nn/module.h"

namespace mantissa::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  // Appends m under the name of its index and returns it.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    return register_module(std::to_string(size()), std::move(m));
  }
  // The i-th module; throws when out of range.
  std::shared_ptr<Module> operator[](size_t i) const;
  // The i-th module as M; throws when it is not an M.
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    MANTISSA_CHECK(m != nullptr, "Sequential::at", "module {} is a {}, not the requested type", i,
                   (*this)[i]->name());
    return m;
  }
  size_t size() const { return child_slots().size(); }

  Tensor forward(const Tensor& input) override;
};

}  // namespace mantissa::nn
