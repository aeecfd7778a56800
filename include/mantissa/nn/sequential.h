#pragma once
// nn::Sequential: a module list ("0", "1", ...) whose forward chains its modules. Everything
// else is nn::ModuleList's: push_back and extend (refusing null modules), indexing from either
// end (seq[-1]), at<M>, size, empty and range-for (`for (const auto& m : seq)`).
#include <initializer_list>
#include <memory>

#include "mantissa/nn/module_list.h"

namespace mantissa::nn {

class Sequential : public ModuleList {
 public:
  Sequential() : ModuleList("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  Tensor forward(const Tensor& input) override;
};

}  // namespace mantissa::nn
