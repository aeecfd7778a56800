#pragma once
// Shared by the LR scheduler tests: the one trainable parameter their optimizers hold.
#include <vector>

#include "mantissa/core/tensor.h"

namespace mantissa::optim {

inline std::vector<Tensor> one_param() {
  Tensor p = zeros({2});
  p.requires_grad_();
  return {p};
}

}  // namespace mantissa::optim
