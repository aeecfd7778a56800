// A checkpoint's position (epoch, batches_in_epoch, global_step) must add up as the Trainer
// counts its optimizer steps (resume_plan.cpp, check_position): a file whose batches_in_epoch
// was set to 0 with global_step still 16 resumed "at the start of epoch 2" and trained that
// epoch again under a step counter of 16. Every checkpoint a run writes still resumes: at an
// epoch's end, mid-epoch, under gradient accumulation, with a batch limit, and after a resume
// that changed the batches per epoch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "mantissa/core/warning.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::expect_error;
using testing::flat_params;
using testing::LambdaCallback;
using testing::quiet_options;
using testing::TinyModule;
using json = nlohmann::json;

fs::path temp_dir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mantissa_position_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

struct Spec {
  int64_t epochs = 2;
  int64_t max_steps = -1;
  int64_t accumulate = 1;
  int64_t limit = -1;  // limit_train_batches (batches), -1: all 4
  std::string resume;
  std::string save_at_epoch_end;    // written at every epoch's end (the last one stays)
  int64_t save_after_batches = -1;  // ... or after this many batches of the fit, to save_path
  std::string save_path;
};

struct Run {
  int64_t global_step = 0;
  int64_t epoch = 0;
};

// TinyModule on 32 examples in batches of 8 (4 batches per epoch).
Run fit(const Spec& s) {
  TrainerOptions o = quiet_options();
  o.seed = 3;
  o.max_epochs = s.epochs;
  o.max_steps = s.max_steps;
  o.accumulate_grad_batches = s.accumulate;
  if (s.limit >= 0) o.limit_train_batches = BatchLimit::batches(s.limit);
  auto cb = std::make_shared<LambdaCallback>();
  int64_t batches = 0;
  cb->batch_end = [&](Trainer& t, int64_t) {
    if (++batches == s.save_after_batches) t.save_checkpoint(s.save_path);
  };
  cb->epoch_end = [&](Trainer& t) {
    if (!s.save_at_epoch_end.empty()) t.save_checkpoint(s.save_at_epoch_end);
  };
  o.callbacks.push_back(cb);
  Trainer trainer(o);
  TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
  trainer.fit(module, loader, nullptr, s.resume);
  return {trainer.global_step(), trainer.current_epoch()};
}

json trainer_meta(const std::string& path) {
  return json::parse(load_checkpoint_file(path).metadata.at(kCheckpointMetadataKey));
}

// `path` with its trainer metadata changed by `edit`, written to `out`; without its step losses
// (as older files are), which would show another global_step first.
std::string edited(const std::string& path, const std::string& out,
                   const std::function<void(json&)>& edit) {
  CheckpointContents c = load_checkpoint_file(path);
  std::erase_if(c.tensors, [](const auto& t) { return t.first == "trainer.step_losses"; });
  json meta = json::parse(c.metadata.at(kCheckpointMetadataKey));
  edit(meta);
  c.metadata[kCheckpointMetadataKey] = meta.dump();
  save_checkpoint_file(out, c);
  return out;
}

TEST(CheckpointPosition, AnEpochEndCheckpointWithItsBatchesSetToZeroIsDamage) {
  const fs::path dir = temp_dir("epoch_end");
  const std::string ck = (dir / "end.safetensors").string();
  fit({.epochs = 2, .save_at_epoch_end = ck});
  const json meta = trainer_meta(ck);
  ASSERT_EQ(meta.at("epoch"), 1);
  ASSERT_EQ(meta.at("batches_in_epoch"), 4);
  ASSERT_EQ(meta.at("global_step"), 8);
  EXPECT_FALSE(meta.contains("steps_before_epoch"));  // 1 epoch of 4 steps before this one
  EXPECT_EQ(fit({.epochs = 3, .resume = ck}).global_step, 12);

  // The trial's file: epoch 2 "at its start", global_step still 8.
  const std::string zero =
      edited(ck, (dir / "zero.safetensors").string(), [](json& m) { m["batches_in_epoch"] = 0; });
  expect_error([&] { fit({.epochs = 3, .resume = zero}); },
               {"zero.safetensors", "the checkpoint's position does not add up", "global_step is 8",
                "epoch 1 (completed epochs) x 4 optimizer step(s) per epoch",
                "0 batch(es) trained in epoch 2 (batches_in_epoch) make 4", "the file is damaged"});
  // One field changed alone, whichever: the others contradict it.
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"global_step", 9},
                                   {"global_step", 7},
                                   {"epoch", 0},
                                   {"epoch", 2},
                                   {"batches_in_epoch", 3}}) {
    const std::string bad =
        edited(ck, (dir / "bad.safetensors").string(), [&](json& m) { m[key] = value; });
    expect_error([&] { fit({.epochs = 3, .resume = bad}); },
                 {"does not add up", "the file is damaged"});
  }
  // A file written before the accumulation was recorded: some accumulation must add up.
  const std::string older = edited(ck, (dir / "older.safetensors").string(),
                                   [](json& m) { m.erase("accumulate_grad_batches"); });
  EXPECT_EQ(fit({.epochs = 3, .resume = older}).global_step, 12);
  const std::string older_zero = edited(older, (dir / "older_zero.safetensors").string(),
                                        [](json& m) { m["batches_in_epoch"] = 0; });
  // It may come from a run whose batches per epoch a resume changed, which such a file does
  // not record: said, not refused (a sound checkpoint must not be refused as damaged).
  WarningRecorder warnings;
  fit({.epochs = 3, .resume = older_zero});
  const std::vector<std::string> said = warnings.messages();
  EXPECT_TRUE(std::any_of(said.begin(), said.end(), [](const std::string& w) {
    return w.find("does not add up") != std::string::npos &&
           w.find("predates mantissa recording its accumulation") != std::string::npos;
  })) << ::testing::PrintToString(said);
}

TEST(CheckpointPosition, NothingIsRestoredFromAFileThatDoesNotAddUp) {
  const fs::path dir = temp_dir("nothing");
  const std::string ck = (dir / "end.safetensors").string();
  fit({.epochs = 1, .save_at_epoch_end = ck});
  const std::string bad =
      edited(ck, (dir / "bad.safetensors").string(), [](json& m) { m["global_step"] = 40; });
  TrainerOptions o = quiet_options();
  o.max_epochs = 0;
  Trainer trainer(o);
  TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
  trainer.fit(module, loader);
  const std::vector<float> before = flat_params(module);
  expect_error([&] { restore_checkpoint(trainer, load_checkpoint_file(bad), bad); },
               {"global_step is 40", "the file is damaged"});
  EXPECT_EQ(flat_params(module), before);
  EXPECT_EQ(trainer.global_step(), 0);
}

TEST(CheckpointPosition, AccumulationLimitsAndMidEpochCheckpointsAddUp) {
  const fs::path dir = temp_dir("accumulate");
  // 4 batches, a step every 3 and on the last: 2 steps per epoch. Mid-epoch after batch 3 of
  // epoch 2 (after 7 batches): 2 + 1 steps.
  const std::string mid = (dir / "mid.safetensors").string();
  const std::string end = (dir / "end.safetensors").string();
  fit({.epochs = 2,
       .accumulate = 3,
       .save_at_epoch_end = end,
       .save_after_batches = 7,
       .save_path = mid});
  json meta = trainer_meta(mid);
  EXPECT_EQ(meta.at("global_step"), 3);
  EXPECT_EQ(meta.at("batches_in_epoch"), 3);
  EXPECT_EQ(meta.at("accumulate_grad_batches"), 3);
  EXPECT_EQ(fit({.epochs = 2, .accumulate = 3, .resume = mid}).global_step, 4);
  EXPECT_EQ(fit({.epochs = 3, .accumulate = 3, .resume = end}).global_step, 6);
  // Under another accumulation now, the checkpoint's counts are its own.
  EXPECT_EQ(fit({.epochs = 3, .accumulate = 1, .resume = end}).global_step, 8);
  const std::string bad = edited(end, (dir / "bad.safetensors").string(),
                                 [](json& m) { m["accumulate_grad_batches"] = 1; });
  expect_error([&] { fit({.epochs = 3, .accumulate = 3, .resume = bad}); },
               {"global_step is 4",
                "x 4 optimizer step(s) per epoch (4 batches, "
                "accumulate_grad_batches 1)",
                "the file is damaged"});

  // A batch limit, and max_steps cutting an epoch short (the checkpoint after fit).
  const std::string cut = (dir / "cut.safetensors").string();
  {
    TrainerOptions o = quiet_options();
    o.max_epochs = 3;
    o.max_steps = 5;
    o.limit_train_batches = BatchLimit::batches(3);
    Trainer trainer(o);
    TinyModule module;
    data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
    trainer.fit(module, loader);
    trainer.save_checkpoint(cut);
  }
  meta = trainer_meta(cut);
  EXPECT_EQ(meta.at("epoch"), 1);
  EXPECT_EQ(meta.at("batches_in_epoch"), 2);
  EXPECT_EQ(meta.at("global_step"), 5);
  EXPECT_EQ(fit({.epochs = 3, .limit = 3, .resume = cut}).global_step, 9);
}

// A resume that changes the batches per epoch (warned about and applied): the completed epochs
// do not all have the run's length, so its checkpoints record the steps before their epoch.
TEST(CheckpointPosition, AResumeWithOtherBatchesPerEpochWritesCheckpointsThatResume) {
  const fs::path dir = temp_dir("limit");
  const std::string first = (dir / "first.safetensors").string();
  fit({.epochs = 1, .save_at_epoch_end = first});  // 4 steps
  const std::string second = (dir / "second.safetensors").string();
  EXPECT_EQ(
      fit({.epochs = 2, .limit = 2, .resume = first, .save_at_epoch_end = second}).global_step, 6);
  const json meta = trainer_meta(second);
  EXPECT_EQ(meta.at("epoch"), 1);
  EXPECT_EQ(meta.at("batches_in_epoch"), 2);
  EXPECT_EQ(meta.at("steps_before_epoch"), 4);
  EXPECT_EQ(fit({.epochs = 3, .limit = 2, .resume = second}).global_step, 8);
  EXPECT_EQ(fit({.epochs = 3, .resume = second}).global_step, 10);
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"global_step", 7},
                                   {"batches_in_epoch", 1},
                                   {"steps_before_epoch", 3}}) {
    const std::string bad =
        edited(second, (dir / "bad.safetensors").string(), [&](json& m) { m[key] = value; });
    expect_error([&] { fit({.epochs = 3, .limit = 2, .resume = bad}); },
                 {"does not add up", "steps_before_epoch", "the file is damaged"});
  }
}

}  // namespace
}  // namespace mantissa::train
