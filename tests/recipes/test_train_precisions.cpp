// The acceptance runs of the mixed-precision work, shrunk to a 12,000-image subset so they fit
// in the unit-test budget: every precision trains to about the same accuracy as fp32, bf16-true
// halves the training memory, and fp16 loss scaling recovers from forced overflow.
#include <gtest/gtest.h>

#include <filesystem>

#include "kernels/cpu/onednn/onednn_common.h"
#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/image_run.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

bool fashion_mnist_present() {
  return std::filesystem::exists(data::FashionMNIST::default_root() +
                                 "/train-images-idx3-ubyte.gz");
}

TrainOptions subset_run(const std::string& precision) {
  TrainOptions o;
  o.precision = precision;
  o.epochs = 2;
  o.batch_size = 128;
  o.train_subset = 12000;
  o.hidden = "128";
  o.quiet = true;
  return o;
}

class PrecisionRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fashion_mnist_present()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  }
  static const TrainMetrics& fp32() {
    static const TrainMetrics m = run_training(subset_run("32-true"));
    return m;
  }
};

TEST_F(PrecisionRuns, Fp32Learns) { EXPECT_GE(fp32().test_accuracy.back(), 0.80); }

TEST_F(PrecisionRuns, MixedPrecisionMatchesFp32) {
  for (const char* p : {"bf16-mixed", "16-mixed"}) {
    const TrainMetrics m = run_training(subset_run(p));
    EXPECT_NEAR(m.test_accuracy.back(), fp32().test_accuracy.back(), 0.01) << p;
    EXPECT_EQ(m.precision, p);
  }
}

TEST_F(PrecisionRuns, Fp16MixedReportsItsScaler) {
  const TrainMetrics m = run_training(subset_run("16-mixed"));
  ASSERT_TRUE(m.skipped_steps.has_value());
  ASSERT_TRUE(m.final_loss_scale.has_value());
  EXPECT_GT(*m.final_loss_scale, 0.0);
}

TEST_F(PrecisionRuns, Bf16TrueTrainsInHalfTheMemory) {
  const TrainMetrics m = run_training(subset_run("bf16-true"));
  EXPECT_NEAR(m.test_accuracy.back(), fp32().test_accuracy.back(), 0.02);
  // Where oneDNN has no bf16 kernels (no AVX-512), each product widens its operands to fp32
  // temporaries, which this small model's peak feels: less than fp32 still, not half.
  const double bound = kernels::onednn_supports_bf16() ? 0.6 : 0.95;
  EXPECT_LE(static_cast<double>(m.peak_training_memory_bytes),
            bound * static_cast<double>(fp32().peak_training_memory_bytes));
}

// The training peak counts the training steps only, not validation's batches of 1000 (whose
// 1000 x 1024 hidden activations alone are 4 MB). Weights, gradients and AdamW's two moments
// are all live at the optimizer step: at least 4 x the fp32 parameters; batches of 16 add
// little to that.
TEST_F(PrecisionRuns, TrainingPeakExcludesValidation) {
  TrainOptions o = subset_run("32-true");
  o.epochs = 1;
  o.batch_size = 16;
  o.train_subset = 320;
  o.hidden = "1024";
  const TrainMetrics m = run_training(o);
  const int64_t param_bytes = m.parameters * 4;
  EXPECT_GE(m.peak_training_memory_bytes, 4 * param_bytes);
  EXPECT_LT(m.peak_training_memory_bytes, 4 * param_bytes + (1 << 20));
  // --train-subset keeps the subset only: the test set (31 MB as float32) and 320 images, not
  // the 60 000 training images (188 MB), which a float32 view of the subset held.
  EXPECT_LT(m.peak_memory_bytes, int64_t{64} << 20);
}

TEST_F(PrecisionRuns, ForcedOverflowIsSkippedAndTrainingRecovers) {
  TrainOptions o = subset_run("16-mixed");
  // Steps 0-5: a loss a million times larger overflows fp16 gradients at any normal scale.
  o.loss_multiplier = [](int64_t step) { return step < 6 ? 1e6 : 1.0; };
  const TrainMetrics m = run_training(o);
  ASSERT_TRUE(m.skipped_steps.has_value());
  EXPECT_GE(*m.skipped_steps, 6);
  EXPECT_LT(*m.final_loss_scale, 65536.0);  // backed off (growth needs 2000 clean steps)
  EXPECT_NEAR(m.test_accuracy.back(), fp32().test_accuracy.back(), 0.015);
}

TEST(TrainOptionsErrors, BadValuesAreClearErrors) {
  TrainOptions o;
  o.precision = "fp7";
  EXPECT_THROW(run_training(o), Error);
  o.precision = "32-true";
  o.hidden = "12,x";
  EXPECT_THROW(run_training(o), Error);
  o.hidden = "16";
  o.epochs = 0;
  EXPECT_THROW(run_training(o), Error);
}

// --master-weights and --stochastic-rounding belong to 16-true and bf16-true: transformer-engine
// (bf16 weights) refuses them as the mixed precisions do, instead of applying them silently.
TEST(TrainOptionsErrors, MasterWeightsAndStochasticRoundingRefusedByTransformerEngine) {
  for (const char* precision : {"transformer-engine", "transformer-engine-float16", "bf16-mixed"}) {
    TrainOptions o;
    o.precision = precision;
    o.master_weights = true;
    mantissa::testing::expect_error([&] { run_training(o); },
                                    {"apply to 16-true and bf16-true only", precision});
    o.master_weights = false;
    o.stochastic_rounding = true;
    mantissa::testing::expect_error([&] { run_training(o); },
                                    {"apply to 16-true and bf16-true only", precision});
  }
}

}  // namespace
}  // namespace mantissa::recipes
