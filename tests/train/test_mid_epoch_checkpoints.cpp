// Checkpoints written inside an epoch. ModelCheckpoint saves after validations inside an epoch
// (val_check_interval), as Lightning's: a mid-epoch validation can give the best checkpoint,
// named with its step; save_top_k and save_last follow. Resuming from such a checkpoint
// continues the unbroken run exactly: the validation is not repeated, the epoch's on_epoch
// means and the ModelCheckpoint's ranking carry on. One written inside a gradient-accumulation
// window is refused on resume.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "support/temp_dir.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
namespace fs = std::filesystem;

// 32 examples in batches of 8: 4 training batches per epoch, so a validation every 2 batches
// runs after steps 2 (mid-epoch), 4 (end), 6 (mid-epoch), 8 (end).
using Loaders = testing::TinyLoaders;

// The training loss logged per step and per epoch (train_loss_epoch, the epoch's mean).
class EpochMeanLoss : public TinyModule {
 public:
  Tensor training_step(const data::Example& batch, int64_t) override {
    Tensor loss = cross_entropy(net_->forward(batch.input), batch.target);
    log("train_loss", loss.item(), false, /*on_step=*/true, /*on_epoch=*/true);
    return loss;
  }
};

// val_loss by global step: 3, 2, 1 (the best, mid-epoch 2), 1.5.
class ScriptedValLoss : public EpochMeanLoss {
 public:
  void validation_step(const data::Example&, int64_t) override {
    static const std::map<int64_t, double> by_step = {{2, 3.0}, {4, 2.0}, {6, 1.0}, {8, 1.5}};
    log("val_loss", by_step.at(trainer().global_step()));
  }
};

// The global step of every validation.
class ValidationSteps : public Callback {
 public:
  std::vector<int64_t> steps;
  void on_validation_end(Trainer& trainer, TrainModule&) override {
    steps.push_back(trainer.global_step());
  }
};

TrainerOptions validating_every_two_batches(std::vector<std::shared_ptr<Callback>> callbacks) {
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  o.seed = 11;
  o.val_check_interval = BatchLimit::batches(2);
  o.callbacks = std::move(callbacks);
  return o;
}

ModelCheckpointOptions ranked_by_val_loss(const std::string& dir, int64_t top_k) {
  ModelCheckpointOptions mc;
  mc.dirpath = dir;
  mc.monitor = "val_loss";
  mc.save_top_k = top_k;
  return mc;
}

// File name -> score of the kept checkpoints.
std::map<std::string, double> kept(const ModelCheckpoint& mc) {
  std::map<std::string, double> out;
  for (const auto& [path, score] : mc.best_k_models()) out[fs::path(path).filename()] = score;
  return out;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json trainer_metadata(const std::string& path) {
  return nlohmann::json::parse(load_checkpoint_file(path).metadata.at(kCheckpointMetadataKey));
}

TEST(MidEpochCheckpoints, EveryValidationIsRankedWithItsStepInTheName) {
  mantissa::testing::TempDir dir;
  auto mc = std::make_shared<ModelCheckpoint>(ranked_by_val_loss(dir.file("ckpt"), -1));
  Trainer trainer(validating_every_two_batches({mc}));
  ScriptedValLoss module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  const std::map<std::string, double> expected = {{"epoch=0-step=2.safetensors", 3.0},
                                                  {"epoch=0-step=4.safetensors", 2.0},
                                                  {"epoch=1-step=6.safetensors", 1.0},
                                                  {"epoch=1-step=8.safetensors", 1.5}};
  EXPECT_EQ(kept(*mc), expected);
  EXPECT_EQ(fs::path(mc->best_model_path()).filename(), "epoch=1-step=6.safetensors");
  EXPECT_EQ(mc->best_model_score(), 1.0);
  // The mid-epoch file is the weights after step 6, in epoch 1 after batch 2, its validation
  // done.
  const nlohmann::json meta = trainer_metadata(dir.file("ckpt/epoch=1-step=6.safetensors"));
  EXPECT_EQ(meta["global_step"], 6);
  EXPECT_EQ(meta["epoch"], 1);
  EXPECT_EQ(meta["batches_in_epoch"], 2);
  EXPECT_FALSE(meta.contains("validation_due"));
  EXPECT_EQ(meta["callback_metrics"]["val_loss"], 1.0);
}

TEST(MidEpochCheckpoints, TopOneAndLastFollowTheMidEpochBest) {
  mantissa::testing::TempDir dir;
  ModelCheckpointOptions options = ranked_by_val_loss(dir.file("ckpt"), 1);
  options.save_last = true;
  auto mc = std::make_shared<ModelCheckpoint>(options);
  Trainer trainer(validating_every_two_batches({mc}));
  ScriptedValLoss module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  EXPECT_EQ(files_in(dir.file("ckpt")),
            (std::vector<std::string>{"epoch=1-step=6.safetensors", "last.safetensors"}));
  EXPECT_EQ(kept(*mc), (std::map<std::string, double>{{"epoch=1-step=6.safetensors", 1.0}}));
  EXPECT_EQ(trainer_metadata(dir.file("ckpt/last.safetensors"))["global_step"], 8);
  // Without a monitor the newest save_top_k are kept, mid-epoch ones among them.
  mantissa::testing::TempDir newest_dir;
  ModelCheckpointOptions newest;
  newest.dirpath = newest_dir.file("ckpt");
  newest.save_top_k = 2;
  auto latest = std::make_shared<ModelCheckpoint>(newest);
  Trainer again(validating_every_two_batches({latest}));
  ScriptedValLoss other;
  again.fit(other, l.train, &l.val);
  EXPECT_EQ(files_in(newest_dir.file("ckpt")),
            (std::vector<std::string>{"epoch=1-step=6.safetensors", "epoch=1-step=8.safetensors"}));
}

// A filename without {step} names every checkpoint of an epoch alike. The later one wrote over
// the earlier, which the kept set still listed (as the best, here: "epoch=1" held step 8's
// weights with step 6's score). As in Lightning, a taken name gets a version.
TEST(MidEpochCheckpoints, AFilenameWithoutStepGetsAVersionPerCheckpointOfTheEpoch) {
  mantissa::testing::TempDir dir;
  ModelCheckpointOptions options = ranked_by_val_loss(dir.file("ckpt"), -1);
  options.filename = "{epoch}";
  auto mc = std::make_shared<ModelCheckpoint>(options);
  Trainer trainer(validating_every_two_batches({mc}));
  ScriptedValLoss module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  const std::map<std::string, double> expected = {{"epoch=0.safetensors", 3.0},
                                                  {"epoch=0-v1.safetensors", 2.0},
                                                  {"epoch=1.safetensors", 1.0},
                                                  {"epoch=1-v1.safetensors", 1.5}};
  EXPECT_EQ(kept(*mc), expected);
  EXPECT_EQ(files_in(dir.file("ckpt")),
            (std::vector<std::string>{"epoch=0-v1.safetensors", "epoch=0.safetensors",
                                      "epoch=1-v1.safetensors", "epoch=1.safetensors"}));
  // Each file holds the step its score was measured at.
  const std::map<std::string, int64_t> steps = {{"epoch=0.safetensors", 2},
                                                {"epoch=0-v1.safetensors", 4},
                                                {"epoch=1.safetensors", 6},
                                                {"epoch=1-v1.safetensors", 8}};
  for (const auto& [file, step] : steps) {
    const nlohmann::json meta = trainer_metadata(dir.file("ckpt/" + file));
    EXPECT_EQ(meta["global_step"], step) << file;
    EXPECT_EQ(meta["callback_metrics"]["val_loss"], expected.at(file)) << file;
  }
  EXPECT_EQ(fs::path(mc->best_model_path()).filename(), "epoch=1.safetensors");
  EXPECT_EQ(trainer_metadata(mc->best_model_path())["global_step"], 6);
}

// With save_top_k the file that leaves the kept set is the one removed, a versioned one
// included, and a checkpoint may take the name of the file it pushes out; a run resumed from a
// versioned file goes on naming, ranking and removing as the unbroken run, except that the
// file it resumed from stays on the disk when it leaves the kept set.
TEST(MidEpochCheckpoints, VersionedCheckpointsAreRankedRemovedAndResumedLikeOthers) {
  Loaders l;
  auto top_two = [](const std::string& dir) {
    ModelCheckpointOptions options = ranked_by_val_loss(dir, 2);
    options.filename = "{epoch}";
    options.save_last = true;
    return std::make_shared<ModelCheckpoint>(options);
  };
  mantissa::testing::TempDir straight_dir;
  auto straight = top_two(straight_dir.file("ckpt"));
  std::vector<float> straight_params;
  {
    Trainer trainer(validating_every_two_batches({straight}));
    ScriptedValLoss module;
    trainer.fit(module, l.train, &l.val);
    straight_params = testing::flat_params(module);
  }
  // Step 2 (3.0) "epoch=0"; step 4 (2.0) "epoch=0-v1"; step 6 (1.0) pushes out "epoch=0" (3.0)
  // and is "epoch=1"; step 8 (1.5) pushes out "epoch=0-v1" (2.0), and "epoch=1" is kept, so it
  // is "epoch=1-v1".
  const std::map<std::string, double> expected = {{"epoch=1.safetensors", 1.0},
                                                  {"epoch=1-v1.safetensors", 1.5}};
  EXPECT_EQ(kept(*straight), expected);
  EXPECT_EQ(files_in(straight_dir.file("ckpt")),
            (std::vector<std::string>{"epoch=1-v1.safetensors", "epoch=1.safetensors",
                                      "last.safetensors"}));
  EXPECT_EQ(trainer_metadata(straight_dir.file("ckpt/epoch=1.safetensors"))["global_step"], 6);
  EXPECT_EQ(trainer_metadata(straight_dir.file("ckpt/epoch=1-v1.safetensors"))["global_step"], 8);

  // One epoch, then a resume from its versioned end-of-epoch file.
  mantissa::testing::TempDir dir;
  {
    TrainerOptions o = validating_every_two_batches({top_two(dir.file("ckpt"))});
    o.max_epochs = 1;
    Trainer trainer(o);
    ScriptedValLoss module;
    trainer.fit(module, l.train, &l.val);
  }
  const std::string versioned = dir.file("ckpt/epoch=0-v1.safetensors");
  ASSERT_TRUE(fs::exists(versioned));
  EXPECT_EQ(trainer_metadata(versioned)["global_step"], 4);
  auto mc = top_two(dir.file("ckpt"));
  Trainer trainer(validating_every_two_batches({mc}));
  ScriptedValLoss module;
  trainer.fit(module, l.train, &l.val, versioned);
  EXPECT_EQ(testing::flat_params(module), straight_params);
  EXPECT_EQ(kept(*mc), expected);
  // Step 6 removed "epoch=0"; step 8 pushed "epoch=0-v1" out of the kept set, but that is the
  // file this run resumed from: it is not removed.
  EXPECT_EQ(files_in(dir.file("ckpt")),
            (std::vector<std::string>{"epoch=0-v1.safetensors", "epoch=1-v1.safetensors",
                                      "epoch=1.safetensors", "last.safetensors"}));
  EXPECT_EQ(trainer_metadata(versioned)["global_step"], 4);
  EXPECT_EQ(fs::path(mc->best_model_path()).filename(), "epoch=1.safetensors");

  // save_top_k 1: each better checkpoint takes the name of the one it pushes out (no version).
  mantissa::testing::TempDir top_one_dir;
  ModelCheckpointOptions options = ranked_by_val_loss(top_one_dir.file("ckpt"), 1);
  options.filename = "{epoch}";
  auto top_one = std::make_shared<ModelCheckpoint>(options);
  Trainer again(validating_every_two_batches({top_one}));
  ScriptedValLoss other;
  again.fit(other, l.train, &l.val);
  EXPECT_EQ(files_in(top_one_dir.file("ckpt")), (std::vector<std::string>{"epoch=1.safetensors"}));
  EXPECT_EQ(trainer_metadata(top_one_dir.file("ckpt/epoch=1.safetensors"))["global_step"], 6);
}

TEST(MidEpochCheckpoints, ResumingFromTheMidEpochBestContinuesTheUnbrokenRun) {
  mantissa::testing::TempDir dir;
  Loaders l;
  auto straight_steps = std::make_shared<ValidationSteps>();
  auto straight_mc = std::make_shared<ModelCheckpoint>(ranked_by_val_loss(dir.file("ckpt"), 1));
  std::vector<float> straight_params;
  std::map<std::string, double> straight_metrics;
  {
    Trainer trainer(validating_every_two_batches({straight_steps, straight_mc}));
    ScriptedValLoss module;
    trainer.fit(module, l.train, &l.val);
    straight_params = testing::flat_params(module);
    straight_metrics = trainer.callback_metrics();
  }
  ASSERT_EQ(straight_steps->steps, (std::vector<int64_t>{2, 4, 6, 8}));
  const std::string best = straight_mc->best_model_path();
  ASSERT_EQ(fs::path(best).filename(), "epoch=1-step=6.safetensors");

  auto steps = std::make_shared<ValidationSteps>();
  auto mc = std::make_shared<ModelCheckpoint>(ranked_by_val_loss(dir.file("ckpt"), 1));
  Trainer trainer(validating_every_two_batches({steps, mc}));
  ScriptedValLoss module;
  trainer.fit(module, l.train, &l.val, best);
  // Weights bit for bit; step 6's validation is not run again; the epoch's mean training loss
  // covers its batches before the checkpoint too; the ranking goes on from the checkpoint's
  // (it held the previous best, step 4's, and reported that).
  EXPECT_EQ(testing::flat_params(module), straight_params);
  EXPECT_EQ(steps->steps, (std::vector<int64_t>{8}));
  EXPECT_EQ(trainer.callback_metrics(), straight_metrics);
  EXPECT_EQ(mc->best_model_path(), best);
  EXPECT_EQ(mc->best_k_models(), straight_mc->best_k_models());
  EXPECT_TRUE(fs::exists(best));
}

// val_loss by global step: 3, 2 (the best of epoch 0), 1, 0.5: every validation after step 4
// is a new best.
class ImprovingValLoss : public EpochMeanLoss {
 public:
  void validation_step(const data::Example&, int64_t) override {
    static const std::map<int64_t, double> by_step = {{2, 3.0}, {4, 2.0}, {6, 1.0}, {8, 0.5}};
    log("val_loss", by_step.at(trainer().global_step()));
  }
};

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The checkpoint a run resumed from is kept when it falls out of the top k, as Lightning keeps
// it (_should_remove_checkpoint): should the resumed run fail, it can be resumed from again. It
// leaves the kept set, so the later checkpoints push out others; last.safetensors is written
// over as ever. The resumed run's first better checkpoint does not remove it.
TEST(MidEpochCheckpoints, TheCheckpointAResumedRunStartedFromIsNotRemoved) {
  Loaders l;
  auto top_one = [](const std::string& dir, const std::string& filename) {
    ModelCheckpointOptions options = ranked_by_val_loss(dir, 1);
    options.filename = filename;
    options.save_last = true;
    return std::make_shared<ModelCheckpoint>(options);
  };
  auto first_epoch = [&](const std::string& dir, const std::string& filename) {
    TrainerOptions o = validating_every_two_batches({top_one(dir, filename)});
    o.max_epochs = 1;
    Trainer trainer(o);
    ImprovingValLoss module;
    trainer.fit(module, l.train, &l.val);
  };

  // Epoch 0 keeps step 4's checkpoint (2.0; step 2's was removed); the resume from it, named
  // by another spelling of its path, puts step 6 (1.0) first, which pushes it out of the top k,
  // then step 8 (0.5), which pushes out step 6's, removed.
  mantissa::testing::TempDir dir;
  first_epoch(dir.file("ckpt"), "{epoch}-{step}");
  const std::string resumed = dir.file("ckpt/epoch=0-step=4.safetensors");
  ASSERT_EQ(files_in(dir.file("ckpt")),
            (std::vector<std::string>{"epoch=0-step=4.safetensors", "last.safetensors"}));
  const std::string resumed_bytes = bytes_of(resumed);
  ASSERT_FALSE(resumed_bytes.empty());
  auto mc = top_one(dir.file("ckpt"), "{epoch}-{step}");
  Trainer trainer(validating_every_two_batches({mc}));
  ImprovingValLoss module;
  trainer.fit(module, l.train, &l.val, dir.file("ckpt/./epoch=0-step=4.safetensors"));
  EXPECT_EQ(files_in(dir.file("ckpt")),
            (std::vector<std::string>{"epoch=0-step=4.safetensors", "epoch=1-step=8.safetensors",
                                      "last.safetensors"}));
  EXPECT_TRUE(bytes_of(resumed) == resumed_bytes) << resumed << " changed or is gone";
  EXPECT_EQ(kept(*mc), (std::map<std::string, double>{{"epoch=1-step=8.safetensors", 0.5}}));
  EXPECT_EQ(fs::path(mc->best_model_path()).filename(), "epoch=1-step=8.safetensors");
  EXPECT_EQ(trainer_metadata(dir.file("ckpt/epoch=1-step=8.safetensors"))["global_step"], 8);
  EXPECT_EQ(trainer_metadata(dir.file("ckpt/last.safetensors"))["global_step"], 8);

  // With one name for every checkpoint, each better one takes the name of the one it pushes
  // out, but not the resumed-from file's: step 6's gets a version ("best-v1"), and step 8's
  // takes that name from it.
  mantissa::testing::TempDir named_dir;
  first_epoch(named_dir.file("ckpt"), "best");
  const std::string best = named_dir.file("ckpt/best.safetensors");
  ASSERT_EQ(trainer_metadata(best)["global_step"], 4);
  const std::string best_bytes = bytes_of(best);
  auto named = top_one(named_dir.file("ckpt"), "best");
  Trainer again(validating_every_two_batches({named}));
  ImprovingValLoss other;
  again.fit(other, l.train, &l.val, best);
  EXPECT_EQ(
      files_in(named_dir.file("ckpt")),
      (std::vector<std::string>{"best-v1.safetensors", "best.safetensors", "last.safetensors"}));
  EXPECT_TRUE(bytes_of(best) == best_bytes) << best << " changed or is gone";
  EXPECT_EQ(kept(*named), (std::map<std::string, double>{{"best-v1.safetensors", 0.5}}));
  EXPECT_EQ(trainer_metadata(named_dir.file("ckpt/best-v1.safetensors"))["global_step"], 8);

  // Without the version counter (Lightning: "write over taken names") every later checkpoint
  // takes the name, but the resumed-from file is not written over: step 6's and step 8's go to
  // best-v1 (8 over 6 there). It was written over with step 6's weights, then step 8's.
  mantissa::testing::TempDir plain_dir;
  first_epoch(plain_dir.file("ckpt"), "best");
  const std::string plain_best = plain_dir.file("ckpt/best.safetensors");
  const std::string plain_bytes = bytes_of(plain_best);
  ModelCheckpointOptions no_counter = ranked_by_val_loss(plain_dir.file("ckpt"), 1);
  no_counter.filename = "best";
  no_counter.save_last = true;
  no_counter.enable_version_counter = false;
  auto plain = std::make_shared<ModelCheckpoint>(no_counter);
  Trainer third(validating_every_two_batches({plain}));
  ImprovingValLoss third_module;
  third.fit(third_module, l.train, &l.val, plain_best);
  EXPECT_TRUE(bytes_of(plain_best) == plain_bytes) << plain_best << " was written over";
  EXPECT_EQ(trainer_metadata(plain_best)["global_step"], 4);
  EXPECT_EQ(
      files_in(plain_dir.file("ckpt")),
      (std::vector<std::string>{"best-v1.safetensors", "best.safetensors", "last.safetensors"}));
  EXPECT_EQ(kept(*plain), (std::map<std::string, double>{{"best-v1.safetensors", 0.5}}));
  EXPECT_EQ(trainer_metadata(plain_dir.file("ckpt/best-v1.safetensors"))["global_step"], 8);
}

TEST(MidEpochCheckpoints, TheEpochsOnEpochMeansSurviveAResume) {
  mantissa::testing::TempDir dir;
  Loaders l;
  std::map<std::string, double> straight;
  {
    ModelCheckpointOptions mc;
    mc.dirpath = dir.file("ckpt");
    mc.filename = "{step}";
    mc.save_top_k = -1;
    mc.every_n_train_steps = 3;
    TrainerOptions o = quiet_options();
    o.seed = 11;
    o.callbacks = {std::make_shared<ModelCheckpoint>(mc)};
    Trainer trainer(o);
    EpochMeanLoss module;
    trainer.fit(module, l.train);
    straight = trainer.callback_metrics();
  }
  TrainerOptions o = quiet_options();
  o.seed = 11;
  Trainer trainer(o);
  EpochMeanLoss module;
  trainer.fit(module, l.train, nullptr, dir.file("ckpt/step=3.safetensors"));
  // train_loss_epoch is the mean of the epoch's 4 batches, 3 of them before the checkpoint (it
  // was the last batch's alone).
  ASSERT_TRUE(straight.count("train_loss_epoch"));
  EXPECT_EQ(trainer.callback_metrics(), straight);

  // The sums are a field of an untrusted file: a damaged one is refused, naming it.
  CheckpointContents contents = load_checkpoint_file(dir.file("ckpt/step=3.safetensors"));
  nlohmann::json meta = nlohmann::json::parse(contents.metadata.at(kCheckpointMetadataKey));
  ASSERT_EQ(meta["epoch_sums"]["train_loss"]["count"], 3);
  meta["epoch_sums"]["train_loss"]["count"] = 0;
  contents.metadata[kCheckpointMetadataKey] = meta.dump();
  save_checkpoint_file(dir.file("damaged.safetensors"), contents);
  Trainer other(o);
  EpochMeanLoss fresh;
  try {
    other.fit(fresh, l.train, nullptr, dir.file("damaged.safetensors"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'epoch_sums.train_loss.count'"), std::string::npos)
        << e.what();
  }
}

// Epoch ends and validations as (epoch, global step).
class EpochEnds : public Callback {
 public:
  std::vector<std::pair<int64_t, int64_t>> epoch_ends, validations;
  void on_train_epoch_end(Trainer& trainer, TrainModule&) override {
    epoch_ends.emplace_back(trainer.current_epoch(), trainer.global_step());
  }
  void on_validation_end(Trainer& trainer, TrainModule&) override {
    validations.emplace_back(trainer.current_epoch(), trainer.global_step());
  }
};

// A step checkpoint after an epoch's last batch comes before that epoch's validation and end.
// The resumed run runs both, in that epoch (it went on to the next epoch: the validation ran
// there, and the epoch's on_train_epoch_end hooks, its means and checkpoints never ran).
TEST(MidEpochCheckpoints, AStepCheckpointAtAnEpochsLastBatchEndsThatEpochOnResume) {
  mantissa::testing::TempDir dir;
  Loaders l;
  auto straight = std::make_shared<EpochEnds>();
  std::map<std::string, double> straight_metrics;
  {
    ModelCheckpointOptions mc;
    mc.dirpath = dir.file("ckpt");
    mc.filename = "{step}";
    mc.save_top_k = -1;
    mc.every_n_train_steps = 4;  // the last batch of each epoch
    TrainerOptions o = quiet_options();
    o.max_epochs = 2;
    o.seed = 11;
    o.callbacks = {straight, std::make_shared<ModelCheckpoint>(mc)};
    Trainer trainer(o);
    EpochMeanLoss module;
    trainer.fit(module, l.train, &l.val);
    straight_metrics = trainer.callback_metrics();
  }
  using Points = std::vector<std::pair<int64_t, int64_t>>;
  ASSERT_EQ(straight->epoch_ends, (Points{{0, 4}, {1, 8}}));
  auto resumed = std::make_shared<EpochEnds>();
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  o.seed = 11;
  o.callbacks = {resumed};
  Trainer trainer(o);
  EpochMeanLoss module;
  trainer.fit(module, l.train, &l.val, dir.file("ckpt/step=4.safetensors"));
  EXPECT_EQ(resumed->validations, straight->validations);
  EXPECT_EQ(resumed->epoch_ends, straight->epoch_ends);
  EXPECT_EQ(trainer.callback_metrics(), straight_metrics);
}

// A checkpoint inside a gradient-accumulation window lacks the window's gradients: resuming
// from it is refused (it silently started a shorter window, so the resumed run differed).
TEST(MidEpochCheckpoints, ACheckpointInsideAnAccumulationWindowIsRefusedOnResume) {
  mantissa::testing::TempDir dir;
  Loaders l;
  {
    // Validation after 3 batches: inside the second window of 2 (after step 1).
    TrainerOptions o = validating_every_two_batches(
        {std::make_shared<ModelCheckpoint>(ranked_by_val_loss(dir.file("ckpt"), -1))});
    o.max_epochs = 1;
    o.accumulate_grad_batches = 2;
    o.val_check_interval = BatchLimit::batches(3);
    Trainer trainer(o);
    TinyModule module;
    ::testing::internal::CaptureStderr();
    trainer.fit(module, l.train, &l.val);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("inside a gradient-accumulation window"), std::string::npos) << err;
  }
  const std::string inside = dir.file("ckpt/epoch=0-step=1.safetensors");
  ASSERT_TRUE(fs::exists(inside));
  EXPECT_EQ(trainer_metadata(inside)["accumulated_batches"], 1);
  TrainerOptions o = quiet_options();
  o.accumulate_grad_batches = 2;
  Trainer trainer(o);
  TinyModule module;
  try {
    trainer.fit(module, l.train, &l.val, inside);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after batch 3 of epoch 1, inside a "
                                         "gradient-accumulation window: 1 batch(es)"),
              std::string::npos)
        << e.what();
  }
  // At an optimizer step (the epoch's end) the same run's checkpoint resumes.
  Trainer at_step(o);
  TinyModule stepped;
  EXPECT_NO_THROW(
      at_step.fit(stepped, l.train, &l.val, dir.file("ckpt/epoch=0-step=2.safetensors")));
  // The same for a checkpoint saved by hand after the first batch of a window.
  auto save_after_first_batch = std::make_shared<testing::LambdaCallback>();
  save_after_first_batch->batch_end = [&](Trainer& t, int64_t b) {
    if (b == 0) t.save_checkpoint(dir.file("by_hand.safetensors"));
  };
  TrainerOptions by_hand = o;
  by_hand.callbacks = {save_after_first_batch};
  Trainer first(by_hand);
  TinyModule m1;
  first.fit(m1, l.train);
  Trainer second(o);
  TinyModule m2;
  EXPECT_THROW(second.fit(m2, l.train, nullptr, dir.file("by_hand.safetensors")), Error);
}

}  // namespace
}  // namespace mantissa::train
