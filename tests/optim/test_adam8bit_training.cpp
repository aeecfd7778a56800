// End to end: the reference MLP learns a Fashion-MNIST subset as well with AdamW8bit as with
// AdamW (same seed, data order and hyper-parameters).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "mantissa/mantissa.h"
#include "mantissa/models/mlp.h"
#include "mantissa/optim/adam8bit.h"

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

double train_subset(bool eight_bit) {
  auto train = std::make_shared<data::FashionMNIST>("", true);
  data::FashionMNIST test("", false);
  auto subset = std::make_shared<data::TensorDataset>(train->inputs().narrow(0, 0, 6000),
                                                      train->targets().narrow(0, 0, 6000));
  manual_seed(0);
  auto model = models::make_mlp(784, {128}, 10);
  std::unique_ptr<optim::Optimizer> opt;
  if (eight_bit) {
    optim::Adam8bitOptions o = optim::adamw8bit_defaults();
    o.lr = 2e-3;
    auto a = std::make_unique<optim::AdamW8bit>(model->parameters(), o);
    EXPECT_TRUE(a->uses_8bit_state(model->parameters()[0]));  // 784x128: 8-bit
    opt = std::move(a);
  } else {
    opt = std::make_unique<optim::AdamW>(model->parameters(), 2e-3);
  }
  data::DataLoader loader(subset, 128, /*shuffle=*/true, /*seed=*/0);
  for (int e = 0; e < 2; ++e) {
    loader.set_epoch(e);
    for (const data::Example& b : loader) {
      Tensor loss = cross_entropy(model->forward(b.input), b.target);
      opt->zero_grad();
      loss.backward();
      opt->step();
    }
  }
  return accuracy(*model, test.inputs().narrow(0, 0, 2000), test.targets().narrow(0, 0, 2000));
}

TEST(Adam8bitTraining, MlpMatchesAdamWOnASubset) {
  if (!fashion_mnist_present()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const double fp32 = train_subset(false);
  const double eight = train_subset(true);
  EXPECT_GE(eight, 0.76);
  EXPECT_NEAR(eight, fp32, 0.02) << "AdamW " << fp32 << ", AdamW8bit " << eight;
}

}  // namespace
}  // namespace mantissa
