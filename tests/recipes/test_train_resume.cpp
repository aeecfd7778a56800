// `mantissa train` over the Trainer: 2 epochs in one run, or 1 epoch then --resume for the
// second, give the same final train loss and test accuracy to the last bit.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>

#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/train/signals.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;

TrainOptions small_run(const std::string& precision, int epochs) {
  TrainOptions o;
  o.precision = precision;
  o.epochs = epochs;
  o.batch_size = 128;
  o.train_subset = 1024;
  o.hidden = "64";
  o.seed = 7;
  o.quiet = true;
  return o;
}

class TrainResume : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!fs::exists(data::FashionMNIST::default_root() + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist not installed";
    }
  }
};

TEST_P(TrainResume, OneEpochThenResumeEqualsTwoEpochs) {
  const fs::path dir = fs::temp_directory_path() /
                       (std::string("mantissa_resume_") + GetParam() + std::to_string(::getpid()));
  fs::remove_all(dir);
  const TrainMetrics both = run_training(small_run(GetParam(), 2));

  TrainOptions first = small_run(GetParam(), 1);
  first.checkpoint_dir = dir.string();
  const TrainMetrics one = run_training(first);
  ASSERT_TRUE(fs::exists(dir / "last.safetensors"));
  ASSERT_TRUE(fs::exists(dir / "epoch=0-step=8.safetensors"));
  EXPECT_EQ(one.train_loss.back(), both.train_loss.front());

  TrainOptions second = small_run(GetParam(), 2);
  second.resume = (dir / "last.safetensors").string();
  const TrainMetrics resumed = run_training(second);
  // The metrics cover the whole run: the first epoch's from the checkpoint.
  ASSERT_EQ(resumed.train_loss.size(), 2u);
  EXPECT_EQ(resumed.train_loss, both.train_loss);
  EXPECT_EQ(resumed.train_accuracy, both.train_accuracy);
  EXPECT_EQ(resumed.test_accuracy, both.test_accuracy);
  EXPECT_EQ(resumed.test_loss, both.test_loss);
  EXPECT_EQ(resumed.epoch_seconds.size(), 2u);
  ASSERT_EQ(resumed.step_losses.size(), 16u);
  EXPECT_EQ(resumed.step_losses, both.step_losses);
  if (resumed.final_loss_scale) EXPECT_EQ(*resumed.final_loss_scale, *both.final_loss_scale);
  fs::remove_all(dir);
}

// Interrupted mid-epoch (as by Ctrl-C), then resumed: the metrics JSON of the resumed run
// covers the whole run, the interrupted epoch's running sums included, bit for bit.
TEST_P(TrainResume, InterruptedMidEpochThenResumedReportsTheWholeRun) {
  const fs::path dir = fs::temp_directory_path() / (std::string("mantissa_interrupt_") +
                                                    GetParam() + std::to_string(::getpid()));
  fs::remove_all(dir);
  const TrainMetrics both = run_training(small_run(GetParam(), 2));

  TrainOptions first = small_run(GetParam(), 2);
  first.checkpoint_dir = dir.string();
  first.metrics_json = (dir / "first.json").string();
  // The test hook runs inside training_step: a signal during global step 3 (of 8 per epoch).
  first.loss_multiplier = [](int64_t step) {
    if (step == 3) train::request_interrupt(SIGINT);
    return 1.0;
  };
  try {
    run_training(first);
    ADD_FAILURE() << "no TrainingInterrupted";
  } catch (const TrainingInterrupted& e) {
    EXPECT_EQ(e.exit_code(), 130);
    EXPECT_NE(std::string(e.what()).find("interrupted by SIGINT after step 4; resume with "
                                         "--resume " +
                                         (dir / "last.safetensors").string()),
              std::string::npos)
        << e.what();
  }
  ASSERT_TRUE(fs::exists(dir / "first.json"));
  ASSERT_TRUE(fs::exists(dir / "last.safetensors"));

  TrainOptions second = small_run(GetParam(), 2);
  second.resume = (dir / "last.safetensors").string();
  const TrainMetrics resumed = run_training(second);
  EXPECT_EQ(resumed.train_loss, both.train_loss);
  EXPECT_EQ(resumed.train_accuracy, both.train_accuracy);
  EXPECT_EQ(resumed.test_accuracy, both.test_accuracy);
  EXPECT_EQ(resumed.step_losses, both.step_losses);
  fs::remove_all(dir);
}

// 16-mixed (scaler state) resumes bit for bit in tests/train/test_checkpoint_files.cpp; one
// precision here keeps the three full-data-set runs under the per-test time budget.
INSTANTIATE_TEST_SUITE_P(Precisions, TrainResume, ::testing::Values("32-true"));

TEST(TrainResumeErrors, UnknownLoggerIsAnError) {
  TrainOptions o = small_run("32-true", 1);
  o.logger = "wandb";
  EXPECT_THROW(run_training(o), Error);
}

}  // namespace
}  // namespace mantissa::recipes
