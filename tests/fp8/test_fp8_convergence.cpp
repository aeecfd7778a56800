// FP8 training converges: the reference MLP shape (784 -> 128 -> 10) on a Fashion-MNIST subset
// under the "transformer-engine" plugin (bf16 weights, FP8 GEMMs, delayed scaling) reaches the
// accuracy of the same run under bf16-mixed within a band.
#include <gtest/gtest.h>

#include <filesystem>

#include "mantissa/fp8/linear.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/precisions/mixed_precision.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa {
namespace {

bool fashion_mnist_present() {
  return std::filesystem::exists(data::FashionMNIST::default_root() +
                                 "/train-images-idx3-ubyte.gz");
}

std::shared_ptr<nn::Sequential> mlp(bool fp8_layers) {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>();
  if (fp8_layers) {
    m->push_back(std::make_shared<fp8::Linear>(784, 128, true, kFloat32, 16));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<fp8::Linear>(128, 10, true, kFloat32, 16));
  } else {
    m->push_back(std::make_shared<nn::Linear>(784, 128));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::Linear>(128, 10));
  }
  return m;
}

// Accuracy on 2000 test images after `epochs` over the first `samples` training images.
double train(train::Precision& plugin, nn::Module& model, int64_t samples, int epochs) {
  auto full = std::make_shared<data::FashionMNIST>("", true);
  data::FashionMNIST test("", false);
  auto subset = std::make_shared<data::TensorDataset>(full->inputs().narrow(0, 0, samples),
                                                      full->targets().narrow(0, 0, samples));
  plugin.convert_module(model);
  optim::AdamW opt(model.parameters(), 2e-3);
  data::DataLoader loader(subset, 128, /*shuffle=*/true, /*seed=*/0);
  for (int e = 0; e < epochs; ++e) {
    loader.set_epoch(e);
    for (const data::Example& raw : loader) {
      const data::Example b = plugin.convert_input(raw);
      Tensor loss;
      {
        train::ScopePtr scope = plugin.forward_context();
        loss = cross_entropy(model.forward(b.input), b.target);
      }
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
  NoGradGuard no_grad;
  data::Example t{test.inputs().narrow(0, 0, 2000), test.targets().narrow(0, 0, 2000)};
  t = plugin.convert_input(t);
  train::ScopePtr scope = plugin.forward_context();
  const Tensor pred = argmax(model.forward(t.input), 1);
  return sum(eq(pred, t.target)).item() / 2000.0;
}

TEST(Fp8Convergence, MlpMatchesBf16MixedOnASubset) {
  if (!fashion_mnist_present()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  train::MixedPrecision bf16("bf16-mixed");
  auto ref_model = mlp(false);
  const double ref = train(bf16, *ref_model, 12000, 2);
  train::TransformerEngineOptions o;
  o.recipe.amax_history_len = 16;
  train::TransformerEnginePrecision te("transformer-engine", o);
  auto model = mlp(true);
  const double acc = train(te, *model, 12000, 2);
  std::printf("bf16-mixed %.4f, transformer-engine %.4f\n", ref, acc);
  EXPECT_GE(ref, 0.80);
  EXPECT_NEAR(acc, ref, 0.02);
}

}  // namespace
}  // namespace mantissa
