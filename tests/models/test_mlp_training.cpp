// End to end: the reference MLP learns Fashion-MNIST. A short run on a subset keeps the suite
// fast while still failing loudly if any op, gradient or optimizer step is wrong.
#include <gtest/gtest.h>

#include <filesystem>

#include "mantissa/mantissa.h"
#include "mantissa/models/mlp.h"

namespace mantissa {
namespace {

bool fashion_mnist_present() {
  return std::filesystem::exists(data::FashionMNIST::default_root() +
                                 "/train-images-idx3-ubyte.gz");
}

double accuracy(nn::Module& model, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  return sum(eq(argmax(model.forward(x), 1), y)).item() / static_cast<double>(y.numel());
}

double train_subset(DType dtype, int64_t train_samples, int epochs) {
  auto train = std::make_shared<data::FashionMNIST>("", true);
  data::FashionMNIST test("", false);
  auto subset = std::make_shared<data::TensorDataset>(train->inputs().narrow(0, 0, train_samples),
                                                      train->targets().narrow(0, 0, train_samples));
  manual_seed(0);
  auto model = models::make_mlp(784, {128}, 10);
  model->to(dtype);
  optim::AdamW opt(model->parameters(), 2e-3);
  data::DataLoader loader(subset, 128, /*shuffle=*/true, /*seed=*/0);
  for (int e = 0; e < epochs; ++e) {
    loader.set_epoch(e);
    for (const data::Example& b : loader) {
      Tensor loss = cross_entropy(model->forward(b.input.to(dtype)), b.target);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
  return accuracy(*model, test.inputs().narrow(0, 0, 2000).to(dtype),
                  test.targets().narrow(0, 0, 2000));
}

TEST(MlpTraining, Fp32ReachesEightyPercentOnASubset) {
  if (!fashion_mnist_present()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  EXPECT_GE(train_subset(kFloat32, 12000, 2), 0.80);
}

TEST(MlpTraining, Fp64TrainsToTheSameLevel) {
  if (!fashion_mnist_present()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  EXPECT_GE(train_subset(kFloat64, 6000, 2), 0.76);
}

}  // namespace
}  // namespace mantissa
