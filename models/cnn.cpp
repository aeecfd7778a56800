#include "mantissa/models/cnn.h"

#include "mantissa/nn/activation.h"
#include "mantissa/nn/batchnorm.h"
#include "mantissa/nn/conv.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/pooling.h"

namespace mantissa::models {

Tensor Cnn::forward(const Tensor& input) {
  if (input.dim() == 2) {
    MANTISSA_CHECK(input.size(1) == 28 * 28, "cnn",
                   "expected flat 28x28 images [N, 784] or [N, 1, 28, 28], got shape {}",
                   shape_str(input.shape()));
    return Sequential::forward(input.reshape({input.size(0), 1, 28, 28}));
  }
  return Sequential::forward(input);
}

std::shared_ptr<Cnn> make_cnn(DType dtype) {
  auto net = std::make_shared<Cnn>();
  const nn::Conv2dOptions same{.padding = {1, 1}};
  int64_t channels = 1;
  for (int64_t out : {32, 64}) {
    net->push_back(std::make_shared<nn::Conv2d>(channels, out, Size2{3, 3}, same, dtype));
    net->push_back(std::make_shared<nn::BatchNorm2d>(out, nn::BatchNormOptions{}, dtype));
    net->push_back(std::make_shared<nn::ReLU>());
    net->push_back(std::make_shared<nn::MaxPool2d>(Size2{2, 2}));
    channels = out;
  }
  net->push_back(std::make_shared<nn::Flatten>());
  net->push_back(std::make_shared<nn::Linear>(64 * 7 * 7, 128, /*with_bias=*/true, dtype));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::Linear>(128, 10, /*with_bias=*/true, dtype));
  return net;
}

}  // namespace mantissa::models
