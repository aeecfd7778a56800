// The ViT reference model: patching is a pure rearrangement, shapes for both poolings, errors,
// and a short training run on a Fashion-MNIST subset.
#include <gtest/gtest.h>

#include <filesystem>

#include "mantissa/mantissa.h"
#include "mantissa/models/vit.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(ViT, ShapesAndParameters) {
  manual_seed(0);
  models::ViT cls({.patch = 7, .width = 32, .depth = 1, .heads = 2});
  EXPECT_EQ(cls.pos_embed.shape(), (Shape{1, 17, 32}));
  EXPECT_EQ(cls.forward(zeros({3, 784})).shape(), (Shape{3, 10}));
  models::ViT mean_pool({.patch = 4, .width = 32, .depth = 1, .heads = 2, .pool = "mean"});
  EXPECT_EQ(mean_pool.pos_embed.shape(), (Shape{1, 49, 32}));
  EXPECT_FALSE(mean_pool.cls_token.defined());
  EXPECT_EQ(mean_pool.forward(zeros({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  expect_error([] { models::ViT({.patch = 5}); }, {"ViT", "5", "28"});
  expect_error([] { models::ViT({.pool = "max"}); }, "pool");
  expect_error([&] { cls.forward(zeros({2, 100})); }, {"ViT", "[2, 100]"});
}

// ViTConfig::activation_checkpointing: the gradients of one bf16-mixed step are the unchecked
// model's, bit for bit.
TEST(ViT, ActivationCheckpointingGivesTheSameGradients) {
  auto grads = [](bool checkpointed) {
    manual_seed(4);
    models::ViT vit(
        models::ViTConfig{.width = 32, .depth = 2, .activation_checkpointing = checkpointed});
    const Tensor images = rnd({4, 1, 28, 28}, kFloat32, 3);
    const Tensor labels = tensor<int64_t>({1, 3, 5, 7}, {4});
    Tensor loss;
    {
      amp::autocast ac;
      loss = cross_entropy(vit.forward(images), labels);
    }
    loss.backward();
    std::vector<float> out;
    for (const Tensor& p : vit.parameters()) {
      const auto v = p.grad().to_vector<float>();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
  const auto plain = grads(false);
  EXPECT_FALSE(plain.empty());
  EXPECT_EQ(plain, grads(true));
}

TEST(ViT, PatchifyRearrangesPixels) {
  // Pixel values are their flat index, so every patch element names its source pixel.
  models::ViT m({.patch = 7, .width = 8, .depth = 1, .heads = 2, .pool = "mean"});
  Tensor img = arange(784, kFloat32).reshape({1, 784});
  Tensor p = m.patchify(img);
  ASSERT_EQ(p.shape(), (Shape{1, 16, 49}));
  const auto v = vals(p);
  for (int64_t k = 0; k < 16; ++k)
    for (int64_t r = 0; r < 7; ++r)
      for (int64_t c = 0; c < 7; ++c)
        ASSERT_EQ(v[k * 49 + r * 7 + c], ((k / 4) * 7 + r) * 28 + (k % 4) * 7 + c);
}

TEST(ViT, LearnsFashionMnistSubset) {
  if (!std::filesystem::exists(data::FashionMNIST::default_root() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed";
  data::FashionMNIST train("", true), test("", false);
  const int64_t n = 2048;
  auto subset = std::make_shared<data::TensorDataset>(train.inputs().narrow(0, 0, n),
                                                      train.targets().narrow(0, 0, n));
  manual_seed(0);
  models::ViT model({.patch = 7, .width = 64, .depth = 2, .heads = 4});
  optim::AdamW opt(model.parameters(), 2e-3);
  data::DataLoader loader(subset, 64, true, 0);
  for (int e = 0; e < 2; ++e) {
    loader.set_epoch(e);
    for (const data::Example& b : loader) {
      Tensor loss = cross_entropy(model.forward(b.input), b.target);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
  NoGradGuard ng;
  model.eval();
  Tensor x = test.inputs().narrow(0, 0, 1000), y = test.targets().narrow(0, 0, 1000);
  const double acc = sum(eq(argmax(model.forward(x), 1), y)).item() / 1000.0;
  // Measured 0.669 on the first 1000 test images with this seed; chance is 0.10.
  EXPECT_GT(acc, 0.6);
}

}  // namespace
}  // namespace mantissa
