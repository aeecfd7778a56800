// Apex O2 (fp16 weights, fp32 masters and BatchNorm, dynamic loss scaling) trains the MLP to
// the accuracy of the native 16-mixed within half a point (6000 images, one epoch). The CNN's
// run that fits the unit-test budget (1000 images, one epoch) is far from converged: two runs
// of 1500 and 3000 images gave O2 4.5 points above and 1.4 points below 16-mixed, so for it the
// test checks that O2 learns and stays within 5 points; the CNN's half-point result is a
// full-data run too long for the suite (2 epochs: O2 0.8965, 16-mixed 0.8958; docs/precision.md).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/image_run.h"

namespace mantissa::recipes {
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
  o.train_subset = model == "cnn" ? 1000 : 6000;
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
    EXPECT_GE(b, 0.6) << model;
    EXPECT_NEAR(b, a, std::string(model) == "mlp" ? 0.005 : 0.05)
        << model << ": O2 " << b << " vs 16-mixed " << a;
    EXPECT_EQ(o2.precision, "16-mixed");
    // The run records the backend and level, and O2's own dynamic scaler like 16-mixed's.
    EXPECT_EQ(o2.amp_backend, "apex");
    EXPECT_EQ(o2.amp_level, "O2");
    EXPECT_TRUE(native.amp_backend.empty());
    ASSERT_TRUE(o2.final_loss_scale.has_value()) << model;
    ASSERT_TRUE(o2.skipped_steps.has_value()) << model;
    EXPECT_GT(*o2.final_loss_scale, 1.0) << model;
    EXPECT_EQ(*o2.final_loss_scale, 65536.0 / std::exp2(static_cast<double>(*o2.skipped_steps)))
        << model << ": a halving per skipped step, no growth within 2000 clean steps";
  }
}

}  // namespace
}  // namespace mantissa::recipes
