// `--lr-schedule onecycle|plateau` for the image models: the learning rates the Trainer applies,
// read by a LearningRateMonitor, follow the schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/train/lr_monitor.h"

namespace mantissa::recipes {
namespace {

bool have_data() {
  return std::filesystem::exists(data::FashionMNIST::default_root() +
                                 "/train-images-idx3-ubyte.gz");
}

// 512 images in batches of 128: 4 optimizer steps per epoch.
TrainOptions tiny(const std::string& schedule, int epochs) {
  TrainOptions o;
  o.epochs = epochs;
  o.batch_size = 128;
  o.train_subset = 512;
  o.hidden = "32";
  o.seed = 3;
  o.quiet = true;
  o.lr = 0.01;
  o.lr_schedule = schedule;
  return o;
}

TEST(TrainLrSchedules, OneCycleRisesToLrAndFallsOverTheRun) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST not installed";
  TrainOptions o = tiny("onecycle", 2);
  auto monitor = std::make_shared<train::LearningRateMonitor>("step");
  o.callbacks = {monitor};
  o.log_every_n_steps = 1;
  run_training(o);
  const std::vector<double>& lrs = monitor->lrs().at("lr-AdamW");
  ASSERT_EQ(lrs.size(), 8u);  // before each of the 8 steps
  EXPECT_NEAR(lrs[0], 0.01 / 25, 1e-15);
  // The peak is at step 0.3 * 8 - 1 = 1.4, between steps 1 and 2; step 2 is just past it.
  const auto peak = std::max_element(lrs.begin(), lrs.end());
  EXPECT_EQ(peak - lrs.begin(), 2);
  EXPECT_GT(*peak, 0.009);
  EXPECT_LE(*peak, 0.01);
  EXPECT_TRUE(std::is_sorted(lrs.begin() + 2, lrs.end(), std::greater<>()));
  EXPECT_LT(lrs.back(), 0.01 / 10);
}

TEST(TrainLrSchedules, PlateauLowersTheLrWhenTheTestLossStopsImproving) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST not installed";
  // At lr 3e-8 the test loss moves by far less than the 1e-4 relative threshold (also summed
  // over three epochs, which a larger lr would cross): epoch 0 sets the best, epochs 1-3 do not
  // improve, and after the third (> patience 2) the lr drops.
  TrainOptions o = tiny("plateau", 5);
  o.lr = 3e-8;  // (a drop of less than eps = 1e-8 would be ignored, as in torch)
  auto monitor = std::make_shared<train::LearningRateMonitor>("epoch");
  o.callbacks = {monitor};
  run_training(o);
  const std::vector<double> expected = {3e-8, 3e-8, 3e-8, 3e-8, 3e-9};
  const std::vector<double>& lrs = monitor->lrs().at("lr-AdamW");
  ASSERT_EQ(lrs.size(), expected.size());
  for (size_t i = 0; i < lrs.size(); ++i) EXPECT_DOUBLE_EQ(lrs[i], expected[i]) << "epoch " << i;
}

TEST(TrainLrSchedules, UnknownScheduleNamesTheValidOnes) {
  TrainOptions o = tiny("linear", 1);
  try {
    run_training(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("constant, cosine, onecycle, plateau"), std::string::npos);
  }
}

}  // namespace
}  // namespace mantissa::recipes
