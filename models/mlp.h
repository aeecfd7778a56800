#pragma once
// The reference MLP: 784 -> hidden... -> 10 with ReLU between layers (`--hidden 1024,1024`
// gives two hidden layers).
#include <memory>
#include <vector>

#include "mantissa/nn/sequential.h"

namespace mantissa::models {

std::shared_ptr<nn::Sequential> make_mlp(int64_t in_features, const std::vector<int64_t>& hidden,
                                         int64_t num_classes);

}  // namespace mantissa::models
