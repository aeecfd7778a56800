#include "mantissa/models/mlp.h"

#include "mantissa/core/error.h"

#include "mantissa/nn/activation.h"
#include "mantissa/nn/linear.h"

namespace mantissa::models {

std::shared_ptr<nn::Sequential> make_mlp(int64_t in_features, const std::vector<int64_t>& hidden,
                                         int64_t num_classes, DType dtype) {
  auto net = std::make_shared<nn::Sequential>();
  int64_t width = in_features;
  for (int64_t h : hidden) {
    MANTISSA_CHECK(h > 0, "mlp", "hidden sizes must be positive, got {}", h);
    net->push_back(std::make_shared<nn::Linear>(width, h, /*with_bias=*/true, dtype));
    net->push_back(std::make_shared<nn::ReLU>());
    width = h;
  }
  net->push_back(std::make_shared<nn::Linear>(width, num_classes, /*with_bias=*/true, dtype));
  return net;
}

}  // namespace mantissa::models
