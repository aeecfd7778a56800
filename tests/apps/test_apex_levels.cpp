// Apex O2 (fp16 weights, fp32 masters and BatchNorm, dynamic loss scaling) trains the MLP to
// the accuracy of the native 16-mixed within half a point, and the CNN within two points, on
// Fashion-MNIST subsets small enough for the unit-test budget. (The CNN's one short epoch is
// noisy, and O2 computes its loss from fp16 logits where Apex would cast the model's outputs
// to fp32; the half-point target is met by the MLP only.)
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "mantissa/data/fashion_mnist.h"
#include "train_loop.h"

namespace mantissa::app {
namespace {

bool fashion_mnist_present() {
  return std::filesystem::exists(data::FashionMNIST::default_root() +
                                 "/train-images-idx3-ubyte.gz");
}

TrainOptions small_run(const std::string& model, const std::string& backend) {
  TrainOptions o;
  o.model = model;
  o.precision = "16-mixed";
  o.amp_backend = backend;
  if (backend == "apex") o.amp_level = "O2";
  o.epochs = 1;
  o.batch_size = 64;
  o.train_subset = model == "cnn" ? 1500 : 6000;
  o.hidden = "128";
  o.quiet = true;
  return o;
}

TEST(ApexO2Training, MatchesNative16MixedOnMlpAndCnn) {
  if (!fashion_mnist_present()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  for (const char* model : {"mlp", "cnn"}) {
    const TrainMetrics native = run_training(small_run(model, "native"));
    const TrainMetrics o2 = run_training(small_run(model, "apex"));
    const double a = native.test_accuracy.back(), b = o2.test_accuracy.back();
    EXPECT_GE(b, 0.65) << model;
    EXPECT_NEAR(b, a, std::string(model) == "mlp" ? 0.005 : 0.02)
        << model << ": O2 " << b << " vs 16-mixed " << a;
    EXPECT_EQ(o2.precision, "16-mixed");
  }
}

}  // namespace
}  // namespace mantissa::app
