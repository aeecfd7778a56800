// End to end: the reference CNN (conv/batch norm/pool/linear) learns Fashion-MNIST in one
// epoch on a subset, in fp32 and under bf16 autocast. Thresholds are a margin below the
// accuracies measured with these seeds (see the report in docs/layers.md).
#include <gtest/gtest.h>

#include <filesystem>

#include "cnn.h"
#include "mantissa/mantissa.h"

namespace mantissa {
namespace {

bool fashion_mnist_present() {
  return std::filesystem::exists(data::FashionMNIST::default_root() +
                                 "/train-images-idx3-ubyte.gz");
}

// Trains one epoch on the first `samples` training images; returns the accuracy on the first
// 2000 test images (eval mode: batch norm uses its running statistics).
double train_one_epoch(int64_t samples, bool bf16_autocast) {
  auto train = std::make_shared<data::FashionMNIST>("", true);
  data::FashionMNIST test("", false);
  auto subset = std::make_shared<data::TensorDataset>(train->inputs().narrow(0, 0, samples),
                                                      train->targets().narrow(0, 0, samples));
  manual_seed(0);
  auto model = models::make_cnn();
  optim::AdamW opt(model->parameters(), 2e-3);
  data::DataLoader loader(subset, 64, /*shuffle=*/true, /*seed=*/0);
  for (const data::Example& b : loader) {
    Tensor logits;
    {
      amp::autocast ac(DeviceType::kCPU, kBFloat16, bf16_autocast);
      logits = model->forward(b.input);
    }
    Tensor loss = cross_entropy(logits, b.target);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  model->eval();
  NoGradGuard no_grad;
  const Tensor y = test.targets().narrow(0, 0, 2000);
  const Tensor logits = model->forward(test.inputs().narrow(0, 0, 2000));
  return sum(eq(argmax(logits, 1), y)).item() / 2000.0;
}

TEST(CnnTraining, Fp32OneEpochOnASubset) {
  if (!fashion_mnist_present()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  EXPECT_GE(train_one_epoch(5000, false), 0.80);
}

TEST(CnnTraining, Bf16AutocastOneEpochOnASubset) {
  if (!fashion_mnist_present()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  EXPECT_GE(train_one_epoch(5000, true), 0.80);
}

}  // namespace
}  // namespace mantissa
