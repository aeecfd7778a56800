#include "mantissa/nn/sequential.h"

namespace mantissa::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules)
    : ModuleList("Sequential") {
  for (const auto& m : modules) push_back(m);
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& m : *this) x = m->forward(x);
  return x;
}

}  // namespace mantissa::nn
