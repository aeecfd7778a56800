// How `mantissa train` runs end: runs that end without a training step end cleanly (the
// summary prints without a step), the final test accuracy is that of the
// weights the run ends with (also when --max-steps stops mid-epoch), and outputs are checked
// before any work.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/run_metrics.h"
#include "mantissa/recipes/thread_count.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::expect_error;
using mantissa::testing::TempDir;

bool have_data() {
  return fs::exists(data::FashionMNIST::default_root() + "/train-images-idx3-ubyte.gz");
}

// 512 images in batches of 128: 4 steps per epoch, a few seconds in all.
TrainOptions tiny_run(int epochs) {
  TrainOptions o;
  o.epochs = epochs;
  o.batch_size = 128;
  o.train_subset = 512;
  o.hidden = "32";
  o.seed = 3;
  o.quiet = true;
  return o;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class TrainEndings : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  }
};

TEST(TrainSummary, EmptyMetricsDoNotCrash) {
  TrainMetrics m;  // a run that recorded nothing
  EXPECT_EQ(format_summary(m), "no test evaluation ran\n");
  m.nothing_trained_reason = "--max-steps 0 allows no optimizer step";
  m.final_test_accuracy = 0.125;
  EXPECT_EQ(format_summary(m),
            "nothing to train: --max-steps 0 allows no optimizer step\n"
            "test accuracy of the final weights: 0.1250  (peak memory 0.0 MiB)\n");
}

TEST_F(TrainEndings, MaxStepsZeroEvaluatesTheInitialWeights) {
  TempDir tmp;
  TrainOptions o = tiny_run(1);
  o.max_steps = 0;
  o.metrics_json = tmp.file("m.json");
  const TrainMetrics m = run_training(o);
  EXPECT_TRUE(m.step_losses.empty());
  EXPECT_NE(m.nothing_trained_reason.find("--max-steps 0"), std::string::npos);
  ASSERT_TRUE(m.final_test_accuracy.has_value());
  EXPECT_NEAR(*m.final_test_accuracy, 0.1, 0.08);  // untrained: about chance
  EXPECT_NE(format_summary(m).find("nothing to train: --max-steps 0"), std::string::npos);
  const auto j = read_json(o.metrics_json);
  EXPECT_EQ(j["final_test_accuracy"].get<double>(), *m.final_test_accuracy);
  EXPECT_TRUE(j["final_train_loss"].is_null());
}

TEST_F(TrainEndings, LimitTrainBatchesZero) {
  TrainOptions o = tiny_run(2);
  o.limit_train_batches = "0";
  const TrainMetrics m = run_training(o);
  EXPECT_TRUE(m.step_losses.empty());
  EXPECT_NE(m.nothing_trained_reason.find("--limit-train-batches 0 leaves no training batch"),
            std::string::npos)
      << m.nothing_trained_reason;
  EXPECT_TRUE(m.final_test_accuracy.has_value());
  EXPECT_NO_THROW(format_summary(m));
}

// Resuming a run that has finished, and a checkpoint beyond --epochs: nothing to train, and the
// final accuracy is the checkpoint's weights' (the same number the first run reported).
TEST_F(TrainEndings, ResumeFinishedOrBeyondEpochs) {
  TempDir tmp;
  TrainOptions first = tiny_run(2);
  first.checkpoint_dir = tmp.file("ckpt");
  const TrainMetrics done = run_training(first);
  ASSERT_TRUE(done.final_test_accuracy.has_value());
  EXPECT_EQ(*done.final_test_accuracy, done.test_accuracy.back());

  TrainOptions again = tiny_run(2);
  again.resume = tmp.file("ckpt/last.safetensors");
  const TrainMetrics finished = run_training(again);
  EXPECT_EQ(finished.step_losses, done.step_losses);  // the whole run's history, nothing new
  EXPECT_NE(finished.nothing_trained_reason.find("has already trained 2 epochs and --epochs is 2"),
            std::string::npos)
      << finished.nothing_trained_reason;
  ASSERT_TRUE(finished.final_test_accuracy.has_value());
  EXPECT_EQ(*finished.final_test_accuracy, *done.final_test_accuracy);
  EXPECT_EQ(*finished.final_test_loss, *done.final_test_loss);

  TrainOptions fewer = tiny_run(1);  // the checkpoint's epoch is beyond --epochs
  fewer.resume = tmp.file("ckpt/last.safetensors");
  const TrainMetrics beyond = run_training(fewer);
  EXPECT_EQ(beyond.step_losses, done.step_losses);
  EXPECT_NE(beyond.nothing_trained_reason.find("--epochs is 1"), std::string::npos);
  EXPECT_EQ(*beyond.final_test_accuracy, *done.final_test_accuracy);
  EXPECT_NO_THROW(format_summary(beyond));
}

// --max-steps 6 with 4 batches per epoch stops in the middle of the second epoch: the reported
// accuracy must be measured on the weights after step 6, not copied from epoch 1 (or 0.0).
// Evaluating the saved final weights again (a resume with nothing left to train) must give
// exactly the metrics JSON's number.
TEST_F(TrainEndings, MaxStepsMidEpochReportsTheFinalWeights) {
  TempDir tmp;
  TrainOptions o = tiny_run(3);
  o.max_steps = 6;
  o.checkpoint_dir = tmp.file("ckpt");
  o.metrics_json = tmp.file("m.json");
  const TrainMetrics m = run_training(o);
  ASSERT_EQ(m.step_losses.size(), 6u);
  ASSERT_EQ(m.test_accuracy.size(), 2u);
  const auto j = read_json(o.metrics_json);
  const double reported = j["final_test_accuracy"].get<double>();
  EXPECT_EQ(reported, m.test_accuracy.back());
  // Measured after step 6, not copied from the end of epoch 1 (the loss always moves).
  EXPECT_EQ(j["final_test_loss"].get<double>(), m.test_loss.back());
  EXPECT_NE(m.test_loss.back(), m.test_loss.front());

  TrainOptions check = tiny_run(3);
  check.max_steps = 6;
  check.resume = tmp.file("ckpt/last.safetensors");
  const TrainMetrics evaluated = run_training(check);
  EXPECT_EQ(evaluated.step_losses, m.step_losses);
  EXPECT_NE(evaluated.nothing_trained_reason.find("already at step 6"), std::string::npos)
      << evaluated.nothing_trained_reason;
  ASSERT_TRUE(evaluated.final_test_accuracy.has_value());
  EXPECT_EQ(*evaluated.final_test_accuracy, reported);
  EXPECT_EQ(*evaluated.final_test_loss, j["final_test_loss"].get<double>());
}

// The sanity check validates a few batches before training; a run without steps reported
// their accuracy as that of the final weights (1 batch of 1000 test images, not the 10000).
TEST_F(TrainEndings, SanityCheckIsNotTheFinalEvaluation) {
  TrainOptions o = tiny_run(1);
  o.max_steps = 0;
  const TrainMetrics plain = run_training(o);
  o.num_sanity_val_steps = 1;
  const TrainMetrics sanity = run_training(o);
  ASSERT_TRUE(sanity.final_test_accuracy.has_value());
  EXPECT_EQ(*sanity.final_test_accuracy, *plain.final_test_accuracy);
  EXPECT_EQ(*sanity.final_test_loss, *plain.final_test_loss);
}

// With --check-val-every-n-epoch 2 the odd epochs have no validation: their test numbers are
// NaN (null in the metrics JSON), not 0 before the first validation or the previous one's.
TEST_F(TrainEndings, EpochsWithoutValidationHaveNoTestNumbers) {
  TempDir tmp;
  TrainOptions o = tiny_run(3);
  o.check_val_every_n_epoch = 2;
  o.metrics_json = tmp.file("m.json");
  const TrainMetrics m = run_training(o);
  ASSERT_EQ(m.test_loss.size(), 3u);
  EXPECT_TRUE(std::isnan(m.test_loss[0]));
  EXPECT_TRUE(std::isnan(m.test_accuracy[0]));
  EXPECT_FALSE(std::isnan(m.test_loss[1]));
  EXPECT_TRUE(std::isnan(m.test_loss[2]));
  EXPECT_TRUE(std::isnan(m.test_accuracy[2]));
  const auto j = read_json(o.metrics_json);
  EXPECT_TRUE(j["test_loss"][0].is_null());
  EXPECT_EQ(j["test_accuracy"][1].get<double>(), m.test_accuracy[1]);
  EXPECT_TRUE(j["test_accuracy"][2].is_null());
  // The final accuracy is still that of the final weights.
  ASSERT_TRUE(m.final_test_accuracy.has_value());
  EXPECT_FALSE(std::isnan(*m.final_test_accuracy));
}

// A run that --max-steps stopped inside an epoch, extended by --resume: the resumed metrics
// cover the run once (the cut epoch's partial numbers were kept beside the finished epoch's:
// one epoch more than the run had), equal to those of the run that never stopped.
TEST_F(TrainEndings, ExtendingAMaxStepsRunReportsEachEpochOnce) {
  TempDir tmp;
  const TrainMetrics straight = run_training(tiny_run(3));
  TrainOptions first = tiny_run(3);
  first.max_steps = 6;  // 4 steps an epoch: the second epoch is cut after 2 of its 4
  first.checkpoint_dir = tmp.file("ckpt");
  ASSERT_EQ(run_training(first).train_loss.size(), 2u);
  TrainOptions second = tiny_run(3);
  second.checkpoint_dir = tmp.file("ckpt");
  second.resume = tmp.file("ckpt/last.safetensors");
  const TrainMetrics resumed = run_training(second);
  EXPECT_EQ(resumed.step_losses, straight.step_losses);
  EXPECT_EQ(resumed.train_loss, straight.train_loss);
  EXPECT_EQ(resumed.train_accuracy, straight.train_accuracy);
  EXPECT_EQ(resumed.test_loss, straight.test_loss);
  EXPECT_EQ(resumed.test_accuracy, straight.test_accuracy);
  EXPECT_EQ(resumed.epoch_seconds.size(), 3u);
}

// Bad output locations fail before the data is even loaded (the data dir does not exist).
TEST(TrainOutputs, CheckedBeforeAnyWork) {
  TempDir tmp;
  std::ofstream(tmp.file("file")) << "x";
  TrainOptions o = tiny_run(1);
  o.data_dir = "/nonexistent";
  {
    TrainOptions t = o;
    t.checkpoint_dir = tmp.file("file");
    expect_error([&] { run_training(t); }, {"--checkpoint-dir", "is not a directory"});
  }
  {
    TrainOptions t = o;
    t.metrics_json = tmp.file("file/m.json");
    expect_error([&] { run_training(t); }, {"--metrics-json"});
    t.metrics_json = tmp.str();
    expect_error([&] { run_training(t); }, {"--metrics-json", "is a directory"});
    t.metrics_json = "/proc/m.json";
    expect_error([&] { run_training(t); }, {"--metrics-json", "is not writable"});
  }
  {
    TrainOptions t = o;
    t.logger = "csv";
    t.log_dir = tmp.file("file/logs");
    expect_error([&] { run_training(t); }, {"--log-dir"});
  }
  {
    TrainOptions t = o;  // a good, missing directory is created; then the data is missing
    t.checkpoint_dir = tmp.file("new/ckpt");
    expect_error([&] { run_training(t); }, {"dataset-fashion-mnist"});
    EXPECT_TRUE(fs::is_directory(tmp.file("new/ckpt")));
  }
}

TEST(TrainOptionsCheck, ThreadsAndLogEveryNSteps) {
  TrainOptions o = tiny_run(1);
  o.data_dir = "/nonexistent";
  o.threads = -2;
  expect_error([&] { run_training(o); }, {"--threads must be at least 1, got -2"});
  o.threads = 0;
  o.log_every_n_steps = 0;
  expect_error([&] { run_training(o); }, {"--log-every-n-steps must be at least 1, got 0"});
}

TEST(ThreadCount, MoreThanTheCoresWarnsOnce) {
  const int before = omp_get_max_threads();
  const int cores = omp_get_num_procs();
  ::testing::internal::CaptureStderr();
  apply_thread_count(cores + 7);
  apply_thread_count(cores + 7);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(omp_get_max_threads(), cores + 7);
  omp_set_num_threads(before);
  EXPECT_EQ(err, fmt::format("mantissa: warning: --threads {} is more than the {} cores of this "
                             "machine; expect it to be slower\n",
                             cores + 7, cores));
  expect_error([] { apply_thread_count(-1); }, "--threads must be at least 1");
}

// --log-every-n-steps reaches the loggers: every 2nd step's loss in metrics.csv, steps 2 and 4
// numbered 1 and 3 as Lightning's loggers number them.
TEST_F(TrainEndings, LogEveryNStepsReachesTheLogger) {
  TempDir tmp;
  TrainOptions o = tiny_run(1);
  o.logger = "csv";
  o.log_dir = tmp.file("logs");
  o.log_every_n_steps = 2;
  run_training(o);
  std::ifstream in(tmp.file("logs/version_0/metrics.csv"));
  ASSERT_TRUE(in.good());
  std::string header, line;
  std::getline(in, header);
  const auto columns = split(header, ',');
  const auto loss_col = std::find(columns.begin(), columns.end(), "train_loss") - columns.begin();
  ASSERT_LT(static_cast<size_t>(loss_col), columns.size()) << header;
  std::vector<std::string> steps;
  while (std::getline(in, line)) {
    const auto cells = split(line, ',');
    if (cells.size() > static_cast<size_t>(loss_col) && !cells[loss_col].empty())
      steps.push_back(cells.back());
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"1", "3"}));
}

}  // namespace
}  // namespace mantissa::recipes
