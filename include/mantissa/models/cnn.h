#pragma once
// The reference CNN for Fashion-MNIST:
//   2 x (conv 3x3, padding 1 -> BatchNorm2d -> ReLU -> max pool 2), channels 32 and 64,
//   flatten -> Linear(64*7*7, 128) -> ReLU -> Linear(128, 10).
#include <memory>

#include "mantissa/nn/sequential.h"

namespace mantissa::models {

// A Sequential that also accepts flat images: a [N, 784] batch (the way the data loader serves
// Fashion-MNIST) is viewed as [N, 1, 28, 28]; [N, 1, 28, 28] passes unchanged.
class Cnn : public nn::Sequential {
 public:
  Tensor forward(const Tensor& input) override;
};

// Parameters are created directly in `dtype`; the batch-norm running statistics stay float32.
std::shared_ptr<Cnn> make_cnn(DType dtype = kFloat32);

}  // namespace mantissa::models
