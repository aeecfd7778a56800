// The Trainer's SimpleProfiler: every action and hook counted as often as it ran, op families
// attributed to the outermost op, the report's contents, and errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "mantissa/core/op_profiler.h"
#include "mantissa/train/report/profiler.h"
#include "support/file_size_limit.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train::testing {
namespace {

const ActionTime* find_action(const std::vector<ActionTime>& actions, const std::string& name) {
  for (const auto& a : actions)
    if (a.action == name) return &a;
  return nullptr;
}

int64_t calls_of(const std::vector<ActionTime>& actions, const std::string& name) {
  const ActionTime* a = find_action(actions, name);
  return a ? a->calls : -1;
}

TEST(SimpleProfiler, CountsEveryActionHookAndOpFamilyOfAFit) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "mantissa_profiler_report.txt").string();
  auto profiler = std::make_shared<SimpleProfiler>(
      SimpleProfilerOptions{.dirpath = "", .filename = path, .op_families = true});
  TrainerOptions o = quiet_options();
  o.profiler = profiler;
  o.max_epochs = 2;
  o.accumulate_grad_batches = 2;
  Trainer trainer(o);
  TinyModule module;
  data::DataLoader train(tiny_dataset(32), 8);   // 4 batches per epoch, 2 optimizer steps
  data::DataLoader val(tiny_dataset(16, 5), 8);  // 2 batches
  trainer.fit(module, train, &val);
  EXPECT_FALSE(profiling::op_timing_enabled());  // switched off when fit ends

  const auto actions = profiler->actions();
  EXPECT_EQ(calls_of(actions, "run_training_epoch"), 2);
  EXPECT_EQ(calls_of(actions, "run_training_batch"), 8);
  EXPECT_EQ(calls_of(actions, "get_train_batch"), 8);
  EXPECT_EQ(calls_of(actions, "[TrainModule]training_step"), 8);
  EXPECT_EQ(calls_of(actions, "backward"), 8);
  EXPECT_EQ(calls_of(actions, "optimizer_step"), 4);
  EXPECT_EQ(calls_of(actions, "zero_grad"), 4);
  EXPECT_EQ(calls_of(actions, "run_validation"), 2);
  EXPECT_EQ(calls_of(actions, "[TrainModule]validation_step"), 4);
  EXPECT_EQ(calls_of(actions, "[TrainModule]on_train_epoch_end"), 2);
  EXPECT_EQ(calls_of(actions, "[TrainModule]on_after_backward"), 8);
  // Sorted by total time, and no action outlasts the profiled run.
  for (size_t i = 1; i < actions.size(); ++i)
    EXPECT_GE(actions[i - 1].total_seconds, actions[i].total_seconds);
  EXPECT_LE(actions.front().total_seconds, profiler->profiled_seconds());
  // The batch includes its training step and backward.
  EXPECT_GE(find_action(actions, "run_training_batch")->total_seconds,
            find_action(actions, "backward")->total_seconds);

  // Op families: two Linear layers per forward (training 8 + validation 4 batches), and their
  // backward nodes per training batch; matmul inside linear is not counted on its own.
  const auto& ops = profiler->op_times();
  ASSERT_TRUE(ops.count({"forward", "linear"}));
  EXPECT_EQ(ops.at({"forward", "linear"}).calls, 2 * (8 + 4));
  EXPECT_EQ(ops.count({"forward", "matmul"}), 0u);
  ASSERT_TRUE(ops.count({"backward", "LinearBackward"}));
  EXPECT_EQ(ops.at({"backward", "LinearBackward"}).calls, 2 * 8);
  double in_ops = 0;
  for (const auto& [k, t] : ops) in_ops += t.seconds;
  EXPECT_LE(in_ops, profiler->profiled_seconds());

  // The report went to the file.
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("run_training_batch"), std::string::npos);
  EXPECT_NE(text.str().find("forward linear"), std::string::npos);
  EXPECT_NE(text.str().find("backward LinearBackward"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(SimpleProfiler, NestedOpsCountForTheOutermostOneOnly) {
  profiling::reset_op_times();
  const Tensor x = ones({2, 3}), w = ones({4, 3}), b = zeros({4});
  profiling::set_op_timing(true);
  linear(x, w, b);
  matmul(x, w.t());
  profiling::set_op_timing(false);
  linear(x, w, b);  // not recorded
  const auto times = profiling::op_times();
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times.at({"forward", "linear"}).calls, 1);
  EXPECT_EQ(times.at({"forward", "matmul"}).calls, 1);
  profiling::reset_op_times();
}

TEST(SimpleProfiler, Errors) {
  EXPECT_EQ(make_profiler(""), nullptr);
  EXPECT_EQ(make_profiler("none"), nullptr);
  EXPECT_NE(dynamic_cast<SimpleProfiler*>(make_profiler("simple").get()), nullptr);
  try {
    make_profiler("advanced");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid values are: simple"), std::string::npos);
  }
  SimpleProfiler p;
  EXPECT_THROW(p.stop("never_started"), Error);
}

// The report file is written whole or not at all: a write that fails (here a file size limit,
// as a full disk) is an error naming it, and the file there keeps its content (an unchecked
// ofstream's last buffer would be lost without a word).
TEST(SimpleProfiler, FailedReportWriteKeepsTheFile) {
  mantissa::testing::TempDir dir;
  const std::string path = dir.file("profile.txt");
  std::ofstream(path) << "earlier report\n";
  SimpleProfiler p({.dirpath = dir.str(), .filename = "profile.txt"});
  p.start("run_training_batch");
  p.stop("run_training_batch");
  {
    mantissa::testing::FileSizeLimit full(4);
    mantissa::testing::expect_error([&] { p.describe(); },
                                    {"SimpleProfiler", "profile.txt' is left as it was"});
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "earlier report\n");
  p.describe();  // without the limit it is written
  std::ifstream again(path);
  std::stringstream report;
  report << again.rdbuf();
  EXPECT_NE(report.str().find("run_training_batch"), std::string::npos) << report.str();
}

}  // namespace
}  // namespace mantissa::train::testing
