// `mantissa train --model gpt` over the Trainer (recipes/gpt_run.cpp): step and epoch limits,
// refused flags, ignored image-model settings, checkpoints with --resume, accumulation and the
// metrics it reports.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mantissa/io/json_dump.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/tiny_gpt.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::expect_error;
using mantissa::testing::tiny_gpt;

// 2,000 bytes of text: 1,800 for training (112 windows of 16 + 1 bytes: 14 batches of 8).
std::string write_text(const mantissa::testing::TempDir& dir) {
  std::string t;
  while (t.size() < 2000) t += "the quick brown fox jumps over the lazy dog. ";
  t.resize(2000);
  const std::string path = dir.file("text.txt");
  std::ofstream(path) << t;
  return path;
}

TrainOptions tiny_options() {
  TrainOptions o;
  o.model = "gpt";
  o.batch_size = 8;
  o.lr = 1e-2;
  o.seed = 1;
  o.quiet = true;
  return o;
}

TEST(TrainGpt, MaxStepsAndEpochsBoundTheRun) {
  mantissa::testing::TempDir dir;
  const TrainOptions o = tiny_options();
  GptOptions g = tiny_gpt(write_text(dir));
  g.max_steps = 5;
  g.eval_interval = 2;
  TrainMetrics m = run_gpt_training(o, g);
  EXPECT_EQ(m.steps, 5);
  EXPECT_EQ(m.step_losses.size(), 5u);
  // Validations after steps 2 and 4, and one on the final weights.
  EXPECT_EQ(m.val_loss_steps, (std::vector<int64_t>{2, 4, 5}));
  ASSERT_TRUE(m.val_loss_nats_per_char.has_value());
  EXPECT_EQ(*m.val_loss_nats_per_char, m.val_loss_curve.back());
  EXPECT_GT(*m.tokens_per_second, 0);

  g.max_steps.reset();
  g.epochs = 2;  // 14 batches an epoch
  m = run_gpt_training(o, g);
  EXPECT_EQ(m.steps, 28);
  EXPECT_EQ(m.epochs, 2);
  g.max_steps = 20;  // whichever ends first
  EXPECT_EQ(run_gpt_training(o, g).steps, 20);
}

// The metrics JSON's "epochs" is what the run trained, a number also when steps alone limit it,
// and "max_epochs" the limit (null for steps alone). 14 batches an epoch.
TEST(TrainGpt, MetricsJsonCountsTheEpochsTrained) {
  mantissa::testing::TempDir dir;
  TrainOptions o = tiny_options();
  GptOptions g = tiny_gpt(write_text(dir));
  g.eval_interval = 100;
  const auto read = [&] { return nlohmann::json::parse(std::ifstream(o.metrics_json)); };

  // Each run writes its own file: a run refuses to replace an earlier run's metrics.
  o.metrics_json = dir.file("steps.json");
  g.max_steps = 5;  // steps alone: 5 of epoch 0's 14 batches
  TrainMetrics m = run_gpt_training(o, g);
  EXPECT_EQ(m.epochs_trained, 5.0 / 14.0);
  nlohmann::json j = read();
  ASSERT_TRUE(j.at("epochs").is_number_float());
  EXPECT_EQ(j.at("epochs").get<double>(), 5.0 / 14.0);
  EXPECT_TRUE(j.at("max_epochs").is_null());

  g.max_steps.reset();
  g.epochs = 2;  // epochs alone: both whole
  o.metrics_json = dir.file("epochs.json");
  m = run_gpt_training(o, g);
  EXPECT_EQ(m.steps, 28);
  j = read();
  EXPECT_EQ(j.at("epochs").get<double>(), 2.0);
  EXPECT_EQ(j.at("max_epochs").get<int>(), 2);

  g.max_steps = 20;  // the step limit cuts epoch 1 after 6 of its 14 batches
  o.metrics_json = dir.file("both.json");
  m = run_gpt_training(o, g);
  EXPECT_EQ(m.steps, 20);
  j = read();
  EXPECT_EQ(j.at("epochs").get<double>(), 1.0 + 6.0 / 14.0);
  EXPECT_EQ(j.at("max_epochs").get<int>(), 2);
}

// Each epoch entry's samples (its seconds times its samples/s).
std::vector<int64_t> epoch_samples(const TrainMetrics& m) {
  std::vector<int64_t> out;
  for (size_t e = 0; e < m.epoch_seconds.size(); ++e)
    out.push_back(std::llround(m.epoch_seconds[e] * m.epoch_samples_per_second[e]));
  return out;
}

// The LanguageModel's state in checkpoint `path`, and the same file with it replaced.
nlohmann::json module_state(const std::string& path) {
  const train::CheckpointContents c = train::load_checkpoint_file(path);
  return nlohmann::json::parse(c.metadata.at(train::kCheckpointMetadataKey)).at("module");
}
void save_with_module_state(const std::string& from, const std::string& to,
                            const nlohmann::json& state) {
  train::CheckpointContents c = train::load_checkpoint_file(from);
  nlohmann::json meta = nlohmann::json::parse(c.metadata.at(train::kCheckpointMetadataKey));
  meta["module"] = state;
  c.metadata[train::kCheckpointMetadataKey] = io::dump_json(meta);
  train::save_checkpoint_file(to, c);
}

// A run resumed inside an epoch reports that epoch whole: its entry counts the seconds and
// samples trained before the checkpoint (they counted from the resume), and the lists begin
// with the checkpoint's epochs, as the image models' do. 14 batches of 8 windows an epoch.
TEST(TrainGpt, ResumedEpochCountsWhatWasTrainedBeforeTheCheckpoint) {
  mantissa::testing::TempDir dir;
  TrainOptions o = tiny_options();
  GptOptions g = tiny_gpt(write_text(dir));
  g.eval_interval = 100;
  g.epochs = 2;
  o.every_n_train_steps = 10;
  o.checkpoint_dir = dir.file("ck");
  const TrainMetrics through = run_gpt_training(o, g);
  EXPECT_EQ(epoch_samples(through), (std::vector<int64_t>{112, 112}));

  // Step 20: epoch 1 after 6 of its 14 batches.
  const std::string ck = dir.file("ck/epoch=1-step=20.safetensors");
  const nlohmann::json state = module_state(ck);
  EXPECT_EQ(state.at("epoch_seconds"), nlohmann::json::array({through.epoch_seconds[0]}));
  EXPECT_EQ(state.at("epoch_samples"), nlohmann::json::array({112}));
  EXPECT_EQ(state.at("epoch_samples_so_far"), 48);
  const double before = state.at("epoch_seconds_so_far").get<double>();
  EXPECT_GT(before, 0);

  const auto resume = [&](const std::string& checkpoint, const std::string& out) {
    TrainOptions r = o;
    r.checkpoint_dir = dir.file(out);
    r.resume = checkpoint;
    return run_gpt_training(r, g);
  };
  TrainMetrics resumed = resume(ck, "ck_resumed");
  EXPECT_EQ(resumed.step_losses.size(), 28u);
  ASSERT_EQ(resumed.epoch_seconds.size(), 2u);
  EXPECT_EQ(resumed.epoch_seconds[0], through.epoch_seconds[0]);
  EXPECT_GE(resumed.epoch_seconds[1], before);
  EXPECT_EQ(epoch_samples(resumed), (std::vector<int64_t>{112, 112}));

  // The recorded time is what counts: 1000 seconds before the checkpoint.
  nlohmann::json slow = state;
  slow["epoch_seconds_so_far"] = 1000.0;
  save_with_module_state(ck, dir.file("slow.safetensors"), slow);
  resumed = resume(dir.file("slow.safetensors"), "ck_slow");
  ASSERT_EQ(resumed.epoch_seconds.size(), 2u);
  EXPECT_GE(resumed.epoch_seconds[1], 1000.0);
  EXPECT_EQ(epoch_samples(resumed), (std::vector<int64_t>{112, 112}));

  // A checkpoint that records no epochs still resumes: the lists start at the resume.
  nlohmann::json older = state;
  for (const char* key :
       {"epoch_seconds", "epoch_samples", "epoch_seconds_so_far", "epoch_samples_so_far"})
    ASSERT_EQ(older.erase(key), 1u) << key;
  save_with_module_state(ck, dir.file("older.safetensors"), older);
  resumed = resume(dir.file("older.safetensors"), "ck_older");
  EXPECT_EQ(resumed.step_losses.size(), 28u);
  EXPECT_EQ(epoch_samples(resumed), (std::vector<int64_t>{64}));

  // A run that early stopping cut inside epoch 1 (validations after batch 10 and 14 of each
  // epoch; no better val_loss by 100 at steps 14 and 24), resumed to its end: that epoch's
  // entry is its part and the rest, once.
  TrainOptions cut = o;
  cut.checkpoint_dir = dir.file("ck_cut");
  cut.every_n_train_steps = 0;
  cut.early_stopping_monitor = "val_loss";
  cut.early_stopping_patience = 2;
  cut.early_stopping_min_delta = 100;
  GptOptions gc = g;
  gc.eval_interval = 10;
  const TrainMetrics first = run_gpt_training(cut, gc);
  EXPECT_EQ(epoch_samples(first), (std::vector<int64_t>{112, 80}));
  TrainOptions rest = o;
  rest.checkpoint_dir = dir.file("ck_cut_resumed");
  rest.resume = dir.file("ck_cut/last.safetensors");
  resumed = run_gpt_training(rest, gc);
  ASSERT_EQ(resumed.epoch_seconds.size(), 2u);
  EXPECT_EQ(resumed.epoch_seconds[0], first.epoch_seconds[0]);
  EXPECT_GE(resumed.epoch_seconds[1], first.epoch_seconds[1]);
  EXPECT_EQ(epoch_samples(resumed), (std::vector<int64_t>{112, 112}));
  // Resumed where it ended (--max-steps 20 again), nothing trains: the lists are the
  // checkpoint's.
  TrainOptions at_end = o;
  at_end.checkpoint_dir = dir.file("ck_steps");
  at_end.every_n_train_steps = 0;
  GptOptions gs = g;
  gs.max_steps = 20;
  const TrainMetrics stepped = run_gpt_training(at_end, gs);
  at_end.resume = dir.file("ck_steps/last.safetensors");
  at_end.checkpoint_dir = dir.file("ck_steps_resumed");
  resumed = run_gpt_training(at_end, gs);
  EXPECT_EQ(resumed.epoch_seconds, stepped.epoch_seconds);
  EXPECT_EQ(epoch_samples(resumed), (std::vector<int64_t>{112, 48}));
}

// The sanity check's validation batches before training are no validation of the run: they
// were recorded (and printed) as one at step 0, with a NaN training loss, in the curve.
TEST(TrainGpt, SanityCheckIsNotAValidation) {
  mantissa::testing::TempDir dir;
  TrainOptions o = tiny_options();
  o.num_sanity_val_steps = 1;
  GptOptions g = tiny_gpt(write_text(dir));
  g.max_steps = 4;
  g.eval_interval = 2;
  const TrainMetrics m = run_gpt_training(o, g);
  EXPECT_EQ(m.val_loss_steps, (std::vector<int64_t>{2, 4}));
  for (double loss : m.train_loss) EXPECT_FALSE(std::isnan(loss));
}

TEST(TrainGpt, RefusesBadLimits) {
  mantissa::testing::TempDir dir;
  const TrainOptions o = tiny_options();
  const GptOptions base = tiny_gpt(write_text(dir));
  GptOptions g = base;
  g.max_steps = 0;
  expect_error([&] { run_gpt_training(o, g); }, {"--max-steps must be at least 1", "got 0"});
  g.max_steps = -5;
  expect_error([&] { run_gpt_training(o, g); }, "--max-steps");
  g.max_steps = -1;
  expect_error([&] { run_gpt_training(o, g); }, "needs --epochs");
  g = base;
  g.epochs = 0;
  expect_error([&] { run_gpt_training(o, g); }, "--epochs must be at least 1");
  TrainOptions both = o;
  both.val_check_interval = "0.5";
  g = base;
  g.eval_interval = 3;
  expect_error([&] { run_gpt_training(both, g); }, "--val-check-interval");
  TrainOptions master = o;
  master.master_weights = true;
  expect_error([&] { run_gpt_training(master, base); }, "--master-weights");
}

// The image models' settings mean nothing to the GPT: the run ignores them (`mantissa train`
// warns when they are given) and trains exactly as without them.
TEST(TrainGpt, IgnoresTheImageModelsSettings) {
  mantissa::testing::TempDir dir;
  const TrainOptions o = tiny_options();
  GptOptions g = tiny_gpt(write_text(dir));
  g.max_steps = 2;
  TrainOptions image = o;
  image.hidden = "64,64";
  image.vit_patch = 4;
  image.vit_pool = "mean";
  image.train_subset = 100;
  image.data_dir = dir.file("no-such-dir");
  image.lr_schedule = "onecycle";
  const TrainMetrics plain = run_gpt_training(o, g);
  const TrainMetrics ignored = run_gpt_training(image, g);
  EXPECT_EQ(ignored.steps, 2);
  EXPECT_EQ(ignored.step_losses, plain.step_losses);
}

TEST(TrainGpt, ResumeFromAnEpochCheckpointRepeatsTheRunBitForBit) {
  mantissa::testing::TempDir dir;
  TrainOptions o = tiny_options();
  GptOptions g = tiny_gpt(write_text(dir));
  g.max_steps = 10;
  o.checkpoint_dir = dir.file("ckpt");
  o.accumulate_grad_batches = 2;  // 14 batches: 7 optimizer steps an epoch
  const TrainMetrics straight = run_gpt_training(o, g);
  EXPECT_EQ(straight.steps, 10);
  EXPECT_EQ(straight.epochs_trained, 1.0 + 6.0 / 14.0);  // 20 batches
  ASSERT_EQ(straight.step_losses.size(), 10u);
  ASSERT_TRUE(std::filesystem::exists(dir.file("ckpt/epoch=0-step=7.safetensors")));
  ASSERT_TRUE(std::filesystem::exists(dir.file("ckpt/last.safetensors")));

  // The same command from the end of epoch 0: the last three steps again, to the last bit.
  TrainOptions again = o;
  again.checkpoint_dir.clear();
  again.resume = dir.file("ckpt/epoch=0-step=7.safetensors");
  const TrainMetrics resumed = run_gpt_training(again, g);
  EXPECT_EQ(resumed.steps, 10);
  EXPECT_EQ(resumed.epochs_trained, 1.0 + 6.0 / 14.0);  // the checkpoint's epoch counted
  ASSERT_GE(resumed.step_losses.size(), 3u);
  for (size_t i = 1; i <= 3; ++i) {
    EXPECT_EQ(resumed.step_losses[resumed.step_losses.size() - i], straight.step_losses[10 - i]);
  }
  EXPECT_EQ(*resumed.val_loss_nats_per_char, *straight.val_loss_nats_per_char);

  // Resuming the finished run trains nothing and validates the restored weights.
  again.resume = dir.file("ckpt/last.safetensors");
  const TrainMetrics finished = run_gpt_training(again, g);
  EXPECT_EQ(finished.steps, 10);
  EXPECT_EQ(*finished.val_loss_nats_per_char, *straight.val_loss_nats_per_char);
}

}  // namespace
}  // namespace mantissa::recipes
