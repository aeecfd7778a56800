// `mantissa train --limit-val-batches X --limit-test-batches X` (Lightning's limit_val_batches,
// limit_test_batches; docs/cli.md, "Batch limits"): each validation reads --limit-val-batches'
// batches (0: none), the final evaluation after training --limit-test-batches' (0: none), for
// the image models (every batch by default) and the GPT (eval_batches by default), with
// --limit-train-batches' parsing and messages, and monitors of a validation metric refused when
// no validation runs. The flags did not exist: "unknown option --limit-val-batches".
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/trainer_setup.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/tiny_gpt.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::expect_error;
using mantissa::testing::TempDir;
using mantissa::testing::tiny_gpt;

TEST(EvalBatchLimits, ParsedAsLimitTrainBatchesWithTheFlagsNames) {
  TrainOptions o;
  o.limit_val_batches = "3";
  o.limit_test_batches = "0.25";
  train::TrainerOptions t = make_trainer_options(o);
  EXPECT_EQ(t.limit_val_batches.resolve(10, "v", "val"), 3);
  EXPECT_EQ(t.limit_test_batches.resolve(10, "t", "test"), 2);
  EXPECT_TRUE(t.limit_test_batches.is_fraction());
  o.limit_val_batches = "0";
  o.limit_test_batches = "0.0";
  t = make_trainer_options(o);
  EXPECT_EQ(t.limit_val_batches.resolve(10, "v", "val"), 0);
  EXPECT_EQ(t.limit_test_batches.resolve(10, "t", "test"), 0);
  // Not given: every batch (the GPT's run sets its own default).
  t = make_trainer_options(TrainOptions{});
  EXPECT_EQ(t.limit_val_batches.resolve(10, "v", "val"), 10);
  EXPECT_EQ(t.limit_test_batches.resolve(10, "t", "test"), 10);

  for (const char* flag : {"--limit-val-batches", "--limit-test-batches"}) {
    const bool val = std::string(flag) == "--limit-val-batches";
    for (const auto& [bad, message] :
         {std::pair{"-1", "expects a fraction like 0.25 or a batch count like 10, got '-1'"},
          std::pair{"ten", "expects a fraction like 0.25 or a batch count like 10, got 'ten'"},
          std::pair{"1.5", "as a fraction must be at most 1.0, got 1.5"}}) {
      TrainOptions b;
      (val ? b.limit_val_batches : b.limit_test_batches) = bad;
      expect_error([&] { make_trainer_options(b); }, {std::string(flag) + " " + message});
    }
  }
}

// Lightning's EarlyStopping fails on a metric no validation logs (its ModelCheckpoint warns
// and keeps no ranked checkpoint): refused before the run trains, naming both flags.
TEST(EvalBatchLimits, AValidationMonitorWithoutValidationIsRefused) {
  TrainOptions o;
  o.limit_val_batches = "0";
  o.early_stopping_monitor = "val_loss";
  expect_error([&] { make_trainer_options(o); },
               {"--early-stopping-monitor val_loss is a validation metric, but "
                "--limit-val-batches 0 turns validation off"});
  o.early_stopping_monitor.clear();
  o.checkpoint_dir = "unused";
  o.checkpoint_monitor = "val_acc";
  o.limit_val_batches = "0.0";
  expect_error([&] { make_trainer_options(o); },
               {"--checkpoint-monitor val_acc is a validation metric, but --limit-val-batches "
                "0.0 turns validation off"});
  o.checkpoint_monitor = "train_loss";  // a training metric is logged without validation
  EXPECT_NO_THROW(make_trainer_options(o));
  o.checkpoint_monitor = "val_acc";
  o.limit_val_batches = "1";
  EXPECT_NO_THROW(make_trainer_options(o));
  o.limit_val_batches = "0";
  o.overfit_batches = "2";  // validates the overfit batches
  EXPECT_NO_THROW(make_trainer_options(o));
}

bool have_data() {
  return fs::exists(data::FashionMNIST::default_root() + "/train-images-idx3-ubyte.gz");
}

// 512 images in batches of 128, one epoch of 4 steps; the test set's 10 batches of 1000 validate.
TrainOptions tiny_run(const std::string& val, const std::string& test) {
  TrainOptions o;
  o.epochs = 1;
  o.batch_size = 128;
  o.train_subset = 512;
  o.hidden = "32";
  o.seed = 3;
  o.quiet = true;
  o.limit_val_batches = val;
  o.limit_test_batches = test;
  return o;
}

// The epoch's test loss reads --limit-val-batches' batches of 1000 test images, the final one
// --limit-test-batches' (all by default), on the same final weights.
TEST(EvalBatchLimits, ImageModelsValidateAndTestTheirLimits) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const TrainMetrics all = run_training(tiny_run("", ""));
  const TrainMetrics one = run_training(tiny_run("1", "1"));
  const TrainMetrics two = run_training(tiny_run("2", "1"));
  const TrainMetrics tenth = run_training(tiny_run("0.1", ""));
  const TrainMetrics none = run_training(tiny_run("0", ""));
  const TrainMetrics untested = run_training(tiny_run("", "0"));
  for (const TrainMetrics* m : {&all, &one, &two, &tenth, &none, &untested}) {
    ASSERT_EQ(m->test_loss.size(), 1u);
    EXPECT_EQ(m->step_losses, all.step_losses);  // validation does not change the training
  }
  // By default one validation of all 10 batches, which is the final evaluation.
  ASSERT_TRUE(all.final_test_loss.has_value());
  EXPECT_EQ(*all.final_test_loss, all.test_loss[0]);
  // One batch: the epoch's validation is the final evaluation (as many batches) ...
  ASSERT_TRUE(one.final_test_loss.has_value());
  EXPECT_EQ(*one.final_test_loss, one.test_loss[0]);
  EXPECT_GT(std::fabs(one.test_loss[0] - all.test_loss[0]), 1e-6);
  // ... and a test pass of one batch after a validation of two gives that number too.
  ASSERT_TRUE(two.final_test_loss.has_value());
  EXPECT_NEAR(*two.final_test_loss, one.test_loss[0], 1e-6);
  EXPECT_NEAR(*two.final_test_accuracy, one.test_accuracy[0], 1e-12);
  EXPECT_GT(std::fabs(two.test_loss[0] - one.test_loss[0]), 1e-6);
  // A fraction of the 10 batches: 0.1 is one batch; the final evaluation still reads all 10.
  EXPECT_EQ(tenth.test_loss[0], one.test_loss[0]);
  ASSERT_TRUE(tenth.final_test_loss.has_value());
  EXPECT_NEAR(*tenth.final_test_loss, all.test_loss[0], 1e-6);
  EXPECT_NEAR(*tenth.final_test_accuracy, all.test_accuracy[0], 1e-12);
  // No validation: the epoch has no test numbers; the final evaluation reads all 10 batches.
  EXPECT_TRUE(std::isnan(none.test_loss[0]));
  ASSERT_TRUE(none.final_test_loss.has_value());
  EXPECT_NEAR(*none.final_test_loss, all.test_loss[0], 1e-6);
  // No final evaluation: the epoch's validation stays, no final numbers.
  EXPECT_EQ(untested.test_loss[0], all.test_loss[0]);
  EXPECT_FALSE(untested.final_test_loss.has_value());
  EXPECT_FALSE(untested.final_test_accuracy.has_value());
  EXPECT_EQ(format_summary(untested), "no test evaluation ran\n");
}

// 2,000 bytes: the last 200 are the validation text, 12 windows of 16 + 1 bytes, 6 batches of 2.
std::string write_text(const TempDir& dir) {
  std::string t;
  while (t.size() < 2000) t += "the quick brown fox jumps over the lazy dog. ";
  t.resize(2000);
  const std::string path = dir.file("text.txt");
  std::ofstream(path) << t;
  return path;
}

TrainMetrics gpt_run(const std::string& text, const std::string& val, const std::string& test) {
  TrainOptions o;
  o.model = "gpt";
  o.batch_size = 2;
  o.lr = 1e-2;
  o.seed = 1;
  o.quiet = true;
  o.limit_val_batches = val;
  o.limit_test_batches = test;
  GptOptions g = tiny_gpt(text);  // eval_batches 2: the default limits
  g.max_steps = 4;
  g.eval_interval = 2;
  return run_gpt_training(o, g);
}

// The GPT validates eval_batches batches unless --limit-val-batches says otherwise, and its
// final validation loss reads --limit-test-batches' (eval_batches by default): the curve's last
// point when a validation reads as many, a test pass of the final weights otherwise.
TEST(EvalBatchLimits, GptValidatesAndTestsItsLimits) {
  TempDir dir;
  const std::string text = write_text(dir);
  const TrainMetrics dflt = gpt_run(text, "", "");
  const TrainMetrics two = gpt_run(text, "2", "2");
  const TrainMetrics one = gpt_run(text, "1", "");
  const TrainMetrics half = gpt_run(text, "0.5", "3");
  const TrainMetrics three = gpt_run(text, "3", "");
  const TrainMetrics none = gpt_run(text, "0", "");
  const TrainMetrics untested = gpt_run(text, "", "0");
  for (const TrainMetrics* m : {&two, &one, &half, &three, &none, &untested})
    EXPECT_EQ(m->step_losses, dflt.step_losses);
  // Not given: eval_batches (2) batches each, the final loss the curve's last point.
  EXPECT_EQ(dflt.val_loss_steps, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(two.val_loss_curve, dflt.val_loss_curve);
  ASSERT_TRUE(dflt.val_loss_nats_per_char.has_value());
  EXPECT_EQ(*dflt.val_loss_nats_per_char, dflt.val_loss_curve.back());
  // One batch per validation (another curve); the final loss is a test pass of 2 batches.
  EXPECT_EQ(one.val_loss_steps, (std::vector<int64_t>{2, 4}));
  EXPECT_GT(std::fabs(one.val_loss_curve.back() - dflt.val_loss_curve.back()), 1e-7);
  ASSERT_TRUE(one.val_loss_nats_per_char.has_value());
  EXPECT_NEAR(*one.val_loss_nats_per_char, dflt.val_loss_curve.back(), 1e-6);
  // A fraction of the 6 validation batches: 0.5 is 3, the final loss a validation of 3.
  EXPECT_EQ(half.val_loss_curve, three.val_loss_curve);
  ASSERT_TRUE(half.val_loss_nats_per_char.has_value());
  EXPECT_EQ(*half.val_loss_nats_per_char, three.val_loss_curve.back());
  // No validation: no curve; the final loss is still that of 2 batches.
  EXPECT_TRUE(none.val_loss_steps.empty());
  ASSERT_TRUE(none.val_loss_nats_per_char.has_value());
  EXPECT_NEAR(*none.val_loss_nats_per_char, dflt.val_loss_curve.back(), 1e-6);
  // No final evaluation: the curve stays, no final loss.
  EXPECT_EQ(untested.val_loss_curve, dflt.val_loss_curve);
  EXPECT_FALSE(untested.val_loss_nats_per_char.has_value());
}

}  // namespace
}  // namespace mantissa::recipes
