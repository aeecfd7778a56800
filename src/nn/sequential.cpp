#include "mantissa/nn/sequential.h"

namespace mantissa::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules)
    : Module("Sequential") {
  for (const auto& m : modules) push_back(m);
}

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  MANTISSA_CHECK(i < size(), "Sequential", "index {} is out of range for {} modules", i, size());
  return child_slots()[i].second;
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& [name, m] : child_slots()) x = m->forward(x);
  return x;
}

}  // namespace mantissa::nn
