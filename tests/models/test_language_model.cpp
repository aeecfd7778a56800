// LanguageModel on the Trainer: the tiny GPT learns a small text, a checkpoint resumes it bit
// for bit (from the middle of an epoch, across epoch boundaries), gradient accumulation
// equals the bigger batch, the module shares the GPT's parameter names, and a slot a plugin
// replaced at setup reaches the GPT.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>

#include "mantissa/core/cuda.h"
#include "mantissa/data/dataloader.h"
#include "mantissa/data/text_window_dataset.h"
#include "mantissa/mantissa.h"
#include "mantissa/models/language_model.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/trainer.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::models {
namespace {

// Two sentences with structure to learn, repeated.
std::string tiny_text(int repeats) {
  std::string t;
  for (int i = 0; i < repeats; ++i) t += "the cat sat on the mat. the dog ate the log. ";
  return t;
}

struct RunSpec {
  std::string precision = "32-true";
  int64_t max_steps = 4;
  int64_t batch_size = 4;
  int64_t accumulate = 1;
  int64_t total_steps = 14;  // the schedule's length, fixed across a resume
  int64_t text_repeats = 6;  // 6 * 45 bytes: 16 windows of 16 + 1 bytes
  double lr = 3e-3;
  std::string checkpoint_dir;  // ModelCheckpoint with last.safetensors
  std::string resume;
  std::string accelerator = "cpu";
  bool cuda_graphs = false;
};

struct RunResult {
  std::vector<double> step_losses;
  std::vector<ValidationRecord> history;
  std::vector<std::pair<std::string, std::vector<float>>> weights;
  int64_t batches_per_epoch = 0;
};

RunResult run(const RunSpec& s) {
  train::TrainerOptions o;
  o.precision = s.precision;
  o.max_steps = s.max_steps;
  o.accumulate_grad_batches = s.accumulate;
  o.gradient_clip_val = 1.0;
  o.seed = 3;
  o.val_check_interval = train::BatchLimit::batches(3);
  o.limit_val_batches = train::BatchLimit::batches(2);
  o.enable_checkpointing = false;
  o.accelerator = s.accelerator;
  o.cuda_graphs = s.cuda_graphs;
  if (!s.checkpoint_dir.empty()) {
    train::ModelCheckpointOptions mc;
    mc.dirpath = s.checkpoint_dir;
    mc.save_top_k = 0;
    mc.save_last = true;
    o.callbacks.push_back(std::make_shared<train::ModelCheckpoint>(mc));
  }
  train::Trainer trainer(o);
  auto gpt = std::make_shared<GPT>(GPTConfig{.context = 16,
                                             .layers = 1,
                                             .width = 32,
                                             .heads = 2,
                                             .dtype = trainer.precision_plugin().param_dtype()});
  LanguageModel lm(gpt, {.lr = s.lr, .warmup_steps = 2, .total_steps = s.total_steps});
  auto train_set = std::make_shared<data::TextWindowDataset>(tiny_text(s.text_repeats), 16);
  auto val_set = std::make_shared<data::TextWindowDataset>(tiny_text(2), 16);
  data::DataLoader train_loader(train_set, s.batch_size, /*shuffle=*/true, /*seed=*/5);
  data::DataLoader val_loader(val_set, 2);
  trainer.fit(lm, train_loader, &val_loader, s.resume);
  RunResult r{trainer.step_losses(), lm.history(), {}, train_loader.size()};
  for (const auto& [name, t] : lm.state_dict())
    r.weights.emplace_back(name, t.to(kCPU).to_vector<float>());
  return r;
}

TEST(LanguageModel, LearnsASmallTextThroughTheTrainer) {
  const RunResult r =
      run({.max_steps = 40, .batch_size = 8, .total_steps = 40, .text_repeats = 20, .lr = 1e-2});
  ASSERT_EQ(r.step_losses.size(), 40u);
  EXPECT_NEAR(r.step_losses.front(), std::log(256.0), 0.3);
  double last = 0;
  for (size_t i = 35; i < 40; ++i) last += r.step_losses[i] / 5;
  EXPECT_LT(last, 0.6 * r.step_losses.front());
  ASSERT_FALSE(r.history.empty());
  EXPECT_GE(r.history.back().step, 36);  // every 3 batches and at each epoch's end
  EXPECT_LT(r.history.back().val_loss, std::log(256.0) - 2.0);
  EXPECT_TRUE(std::isfinite(r.history.back().train_loss));
}

TEST(LanguageModel, CudaGraphsAreRefusedOffAGpuWithTheReason) {
  try {
    (void)run({.accelerator = "cpu", .cuda_graphs = true});
    FAIL() << "cuda_graphs on the CPU was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a GPU (--accelerator gpu)"), std::string::npos)
        << e.what();
  }
}

TEST(LanguageModel, GraphedGpuFitFollowsTheEagerGpuFit) {
  if (!cuda::is_available()) GTEST_SKIP() << "no usable GPU: " << cuda::unavailable_reason();
  // 52 windows in batches of 8: a smaller last batch each epoch, which runs eagerly.
  for (const char* precision : {"32-true", "16-mixed"}) {
    SCOPED_TRACE(precision);
    const RunSpec spec{.precision = precision,
                       .max_steps = 20,
                       .batch_size = 8,
                       .total_steps = 20,
                       .text_repeats = 20,
                       .lr = 1e-2,
                       .accelerator = "gpu"};
    RunSpec graphed_spec = spec;
    graphed_spec.cuda_graphs = true;
    const RunResult eager = run(spec), graphed = run(graphed_spec);
    ASSERT_EQ(graphed.step_losses.size(), 20u);
    ASSERT_EQ(eager.step_losses.size(), 20u);
    // The embeddings' gradients are sums by atomics on a GPU: equal up to their order.
    for (size_t i = 0; i < 20; ++i)
      EXPECT_NEAR(graphed.step_losses[i], eager.step_losses[i], 1e-3 * eager.step_losses[i]);
    EXPECT_LT(graphed.step_losses.back(), graphed.step_losses.front());
    ASSERT_FALSE(graphed.history.empty());
    EXPECT_TRUE(std::isfinite(graphed.history.back().train_loss));  // on_training_loss logged it
  }
}

class LanguageModelResume : public ::testing::TestWithParam<const char*> {};

TEST_P(LanguageModelResume, HalfThenResumeEqualsTheStraightRunBitForBit) {
  mantissa::testing::TempDir dir;
  const RunResult straight = run({.precision = GetParam(), .max_steps = 14});
  ASSERT_EQ(straight.batches_per_epoch, 4);  // 14 steps cross three epoch ends
  const RunResult first = run(
      {.precision = GetParam(), .max_steps = 7, .checkpoint_dir = dir.str()});  // stops in epoch 2
  const RunResult resumed =
      run({.precision = GetParam(), .max_steps = 14, .resume = dir.file("last.safetensors")});
  ASSERT_EQ(first.step_losses.size(), 7u);
  // The resumed run's history starts with the checkpoint's: it covers all 14 steps.
  ASSERT_EQ(resumed.step_losses.size(), 14u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(first.step_losses[i], straight.step_losses[i]) << "step " << i;
  }
  for (size_t i = 0; i < 14; ++i) {
    EXPECT_EQ(resumed.step_losses[i], straight.step_losses[i]) << "step " << i;
  }
  ASSERT_EQ(resumed.weights.size(), straight.weights.size());
  for (size_t i = 0; i < straight.weights.size(); ++i) {
    EXPECT_EQ(resumed.weights[i].first, straight.weights[i].first);
    EXPECT_EQ(resumed.weights[i].second, straight.weights[i].second) << straight.weights[i].first;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, LanguageModelResume, ::testing::Values("32-true", "16-mixed"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = std::isalnum(c) ? c : '_';
                           return n;
                         });

TEST(LanguageModel, AccumulatingTwoBatchesEqualsTheDoubleBatch) {
  // 16 windows: two steps of 8 windows each way.
  const RunResult big = run({.max_steps = 2, .batch_size = 8});
  const RunResult accumulated = run({.max_steps = 2, .batch_size = 4, .accumulate = 2});
  ASSERT_EQ(big.step_losses.size(), 2u);
  ASSERT_EQ(accumulated.step_losses.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(accumulated.step_losses[i], big.step_losses[i], 1e-5);
  for (size_t i = 0; i < big.weights.size(); ++i) {
    for (size_t j = 0; j < big.weights[i].second.size(); ++j) {
      ASSERT_NEAR(accumulated.weights[i].second[j], big.weights[i].second[j], 1e-5)
          << big.weights[i].first << "[" << j << "]";
    }
  }
}

TEST(LanguageModel, SharesTheGptsNamesAndHandsReplacedSlotsOn) {
  auto gpt = std::make_shared<GPT>(GPTConfig{.context = 16, .layers = 1, .width = 32, .heads = 2});
  LanguageModel lm(gpt);
  std::vector<std::string> a, b;
  for (const auto& [n, t] : lm.named_parameters()) a.push_back(n);
  for (const auto& [n, t] : gpt->named_parameters()) b.push_back(n);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);

  // transformer-engine replaces LayerNorms at setup, "ln_f" among them (a direct slot).
  train::TrainerOptions o;
  o.precision = "transformer-engine";
  o.max_steps = 1;
  o.enable_checkpointing = false;
  train::Trainer trainer(o);
  auto train_set = std::make_shared<data::TextWindowDataset>(tiny_text(2), 16);
  data::DataLoader loader(train_set, 2);
  trainer.fit(lm, loader);
  EXPECT_EQ(dynamic_cast<nn::LayerNorm*>(lm.child("ln_f").get()), nullptr);
  EXPECT_EQ(lm.gpt().child("ln_f"), lm.child("ln_f"));
}

// A copy of checkpoint `from` whose LanguageModel state ("module" in the trainer metadata) has
// `damage` applied.
std::string damaged_copy(const std::string& from, const std::string& to,
                         const std::function<void(nlohmann::json&)>& damage) {
  io::SafetensorsFile file = io::load_safetensors(from);
  nlohmann::json meta = nlohmann::json::parse(file.metadata.at(train::kCheckpointMetadataKey));
  damage(meta.at("module"));
  file.metadata[train::kCheckpointMetadataKey] = meta.dump();
  // A hand-made state, not damage to a written file: without the checksums its content is
  // what the checks judge (the checksums would refuse any change).
  file.metadata.erase("mantissa.checksums");
  io::save_safetensors(to, file.tensors, file.metadata);
  return to;
}

// The GPT's module state is range-checked as ImageClassifier's is: losses are cross-entropies
// (>= 0, null for a non-finite one), validation steps are steps of the run in the order they
// ran, and the pending interval's count is a counter whose sum is 0 without losses. A damaged
// value must not go on into the resumed run's curves and metrics JSON.
TEST(LanguageModel, DamagedModuleStateIsRefusedOnResume) {
  mantissa::testing::TempDir dir;
  run({.max_steps = 7, .checkpoint_dir = dir.str()});
  const std::string last = dir.file("last.safetensors");
  {
    // The checkpoint as written: validations every 3 batches and at the epochs' ends.
    const io::SafetensorsHeader header = io::read_safetensors_header(last);
    const nlohmann::json module =
        nlohmann::json::parse(header.metadata.at(train::kCheckpointMetadataKey)).at("module");
    ASSERT_EQ(module.at("val_steps"), nlohmann::json({3.0, 4.0, 7.0}));
  }
  const struct {
    const char* what;
    std::function<void(nlohmann::json&)> damage;
    std::string error;
  } cases[] = {
      {"negative validation loss", [](nlohmann::json& m) { m["val_loss"][0] = -5.0; },
       "LanguageModel state: field 'module.val_loss' holds -5, outside [0, inf]"},
      {"negative training loss", [](nlohmann::json& m) { m["val_train_loss"][1] = -0.5; },
       "field 'module.val_train_loss' holds -0.5, outside [0, inf]"},
      {"steps out of order",
       [](nlohmann::json& m) {
         m["val_steps"] = {3.0, 7.0, 4.0};
       },
       "field 'module.val_steps' goes back from step 7 to step 4; the file is damaged"},
      {"a sum of no losses",
       [](nlohmann::json& m) {
         m["interval_loss_count"] = 0;
         m["interval_loss_sum"] = 5.0;
       },
       "'module.interval_loss_sum' is 5 but 'module.interval_loss_count' is 0"},
      {"a count beyond 2^53", [](nlohmann::json& m) { m["interval_loss_count"] = 1LL << 62; },
       "'module.interval_loss_count' must be a number in [0, 9007199254740992]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string damaged = damaged_copy(last, dir.file("damaged.safetensors"), c.damage);
    mantissa::testing::expect_error([&] { run({.max_steps = 14, .resume = damaged}); },
                                    {"damaged.safetensors", c.error});
  }
  // Two validations at one step are no damage: with accumulated gradients a validation every
  // few batches can fall twice between two optimizer steps.
  const std::string twice =
      damaged_copy(last, dir.file("twice.safetensors"), [](nlohmann::json& m) {
        m["val_steps"] = {3.0, 7.0, 7.0};
      });
  const RunResult resumed = run({.max_steps = 14, .resume = twice});
  ASSERT_GE(resumed.history.size(), 4u);
  EXPECT_EQ(resumed.history[1].step, 7);
  EXPECT_EQ(resumed.history[2].step, 7);
  EXPECT_GT(resumed.history[3].step, 7);
}

}  // namespace
}  // namespace mantissa::models
