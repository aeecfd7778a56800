// The learning-rate range test (include/mantissa/train/lr_finder.h): the lr of each step, what
// is recorded and smoothed, the early stop on a diverging loss, Lightning's suggestion rule, and
// the options refused.
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/lr_finder.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using mantissa::testing::expect_error;
using testing::LambdaCallback;
using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

TEST(LearningRateFinder, StepsFollowTheExponentialOrLinearRange) {
  LearningRateFinder exp({.min_lr = 1e-6, .max_lr = 1.0, .num_training_steps = 7});
  EXPECT_DOUBLE_EQ(exp.lr_at(0), 1e-6);
  EXPECT_DOUBLE_EQ(exp.lr_at(6), 1.0);
  EXPECT_DOUBLE_EQ(exp.lr_at(3), 1e-6 * std::pow(1e6, 0.5));  // 1e-3: halfway in log(lr)
  EXPECT_NEAR(exp.lr_at(2), 1e-4, 1e-18);
  LearningRateFinder lin({.min_lr = 0.1, .max_lr = 0.5, .num_training_steps = 5, .mode = "linear"});
  EXPECT_DOUBLE_EQ(lin.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(lin.lr_at(2), 0.3);
  EXPECT_DOUBLE_EQ(lin.lr_at(4), 0.5);
}

// Each step trains at its lr (read from the optimizer inside the step), the recorded losses are
// the Trainer's step losses, and the smoothed ones are their bias-corrected running average.
TEST(LearningRateFinder, RecordsEachStepsLrLossAndSmoothedLoss) {
  TrainerOptions o = quiet_options();
  std::vector<double> lr_in_step;
  auto watch = std::make_shared<LambdaCallback>();
  watch->before_optimizer_step = [&](Trainer& t) { lr_in_step.push_back(t.optimizer()->lr()); };
  o.callbacks.push_back(watch);
  o.seed = 3;
  o.max_epochs = 100;             // overridden by the sweep's length
  o.enable_checkpointing = true;  // dropped by lr_find: nothing of the sweep is kept
  TinyModule module(TinyOptions{.lr = 0.5});
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
  const LRFinderOptions finder{.min_lr = 1e-4,
                               .max_lr = 0.1,
                               .num_training_steps = 10,
                               .early_stop_threshold = std::nullopt};
  const LRFinderResult r = lr_find(o, module, loader, finder);
  ASSERT_EQ(r.lrs.size(), 10u);
  EXPECT_EQ(r.stop_reason, "");
  const LearningRateFinder reference(finder);
  ASSERT_EQ(lr_in_step.size(), 10u);
  double average = 0;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_DOUBLE_EQ(r.lrs[i], reference.lr_at(static_cast<int64_t>(i)));
    EXPECT_DOUBLE_EQ(lr_in_step[i], r.lrs[i]) << "step " << i;
    ASSERT_TRUE(std::isfinite(r.losses[i]));
    average = 0.98 * average + (1 - 0.98) * r.losses[i];
    EXPECT_DOUBLE_EQ(r.smoothed_losses[i], average / (1 - std::pow(0.98, i + 1.0)));
  }
  EXPECT_DOUBLE_EQ(r.smoothed_losses[0], r.losses[0]);
  // The same fit by hand gives the same losses: the callback only sets the lr.
  TinyModule again(TinyOptions{.lr = 0.5});
  TrainerOptions p = quiet_options();
  p.seed = 3;
  p.max_epochs = 100;
  p.max_steps = 10;
  std::vector<double> hand_lrs;
  auto set_lr = std::make_shared<LambdaCallback>();
  int64_t step = 0;
  set_lr->before_optimizer_step = [&](Trainer& t) {
    t.optimizer()->set_lr(reference.lr_at(step++));
  };
  p.callbacks.push_back(set_lr);
  Trainer trainer(p);
  data::DataLoader loader2(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
  trainer.fit(again, loader2);
  EXPECT_EQ(trainer.step_losses(), r.losses);
}

// A range that reaches far too large an lr: the sweep stops once the smoothed loss passes 4x its
// best (or the Trainer stops a non-finite run), and lr_find returns what it had, no error.
TEST(LearningRateFinder, StopsWhenTheLossDivergesAndSuggestsFromWhatItHas) {
  TinyModule module(TinyOptions{.lr = 0.1});
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
  const LRFinderResult r = lr_find(quiet_options(), module, loader,
                                   {.min_lr = 1e-3, .max_lr = 1e8, .num_training_steps = 60});
  ASSERT_FALSE(r.stop_reason.empty());
  EXPECT_LT(r.lrs.size(), 60u);
  EXPECT_TRUE(r.stop_reason.find("exceeded 4 times its best") != std::string::npos ||
              r.stop_reason.find("was nan") != std::string::npos ||
              r.stop_reason.find("diverged") != std::string::npos)
      << r.stop_reason;
  EXPECT_EQ(r.lrs.size(), r.losses.size());
  EXPECT_EQ(r.lrs.size(), r.smoothed_losses.size());
  const std::optional<size_t> at = r.suggestion_index(0, 1);
  ASSERT_TRUE(at.has_value());
  EXPECT_LT(*at + 1, r.lrs.size());
  EXPECT_DOUBLE_EQ(*r.suggestion(0, 1), r.lrs[*at]);
}

// Lightning's rule: the most negative numpy.gradient of the smoothed losses after skipping the
// first and last points; non-finite points have no slope.
TEST(LearningRateFinder, SuggestionIsTheSteepestDescentOfTheSmoothedLoss) {
  LRFinderResult r;
  r.lrs = {1, 2, 3, 4, 5, 6, 7, 8};
  r.smoothed_losses = {9, 5, 4.9, 4.0, 2.0, 1.9, 1.8, 7.0};
  // Gradients with nothing skipped: -4, -2.05, -0.5, -1.45, -1.05, -0.1, 2.55, 5.2.
  EXPECT_EQ(r.suggestion_index(0, 0), 0u);
  // Skipping the first point: 5, 4.9, 4, 2, 1.9, 1.8 -> -0.1, -0.5, -1.45, -1.05, -0.1, -0.1.
  EXPECT_EQ(r.suggestion_index(1, 1), 3u);
  EXPECT_DOUBLE_EQ(*r.suggestion(1, 1), 4.0);
  // A NaN point is left out and the slope taken across it.
  r.smoothed_losses = {9, 5, 4.9, NAN, 2.0, 1.95, 1.9, 7.0};
  // Finite after skipping: 5, 4.9, 2, 1.95, 1.9 at steps 1, 2, 4, 5, 6 -> -0.1, -1.5, -1.475,
  // -0.05, -0.05.
  EXPECT_EQ(r.suggestion_index(1, 1), 2u);
  EXPECT_EQ(r.suggestion_index(6, 1), std::nullopt);  // one point left
  EXPECT_EQ(LRFinderResult{}.suggestion(), std::nullopt);
  expect_error([&] { (void)r.suggestion_index(-1, 1); }, {"must be >= 0"});
}

TEST(LearningRateFinder, BadOptionsAreRefused) {
  expect_error([] { LearningRateFinder({.min_lr = 1.0, .max_lr = 0.1}); },
               {"[LearningRateFinder] the range must be 0 < min_lr < max_lr, got min_lr 1 and "
                "max_lr 0.1"});
  expect_error([] { LearningRateFinder({.min_lr = 0}); }, {"0 < min_lr < max_lr"});
  expect_error([] { LearningRateFinder({.max_lr = INFINITY}); }, {"0 < min_lr < max_lr"});
  expect_error([] { LearningRateFinder({.num_training_steps = 1}); },
               {"num_training_steps must be at least 2"});
  expect_error([] { LearningRateFinder({.mode = "cosine"}); },
               {"mode must be 'exponential' or 'linear', got 'cosine'"});
  expect_error([] { LearningRateFinder({.early_stop_threshold = 0.5}); },
               {"early_stop_threshold must be above 1"});
  expect_error([] { LearningRateFinder({.beta = 1.0}); }, {"beta must be in [0, 1)"});
}

}  // namespace
}  // namespace mantissa::train
