#pragma once
// The reference MLP: 784 -> hidden... -> 10 with ReLU between layers (`--hidden 1024,1024`
// gives two hidden layers).
#include <memory>
#include <vector>

#include "mantissa/nn/sequential.h"

namespace mantissa::models {

// Parameters are created directly in `dtype` (no float32 copy on the way).
std::shared_ptr<nn::Sequential> make_mlp(int64_t in_features, const std::vector<int64_t>& hidden,
                                         int64_t num_classes, DType dtype = kFloat32);

}  // namespace mantissa::models
