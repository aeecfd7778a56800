// ModelCheckpoint's filename template (src/train/checkpoint/checkpoint_filename.h): Lightning's
// keys and format specs, and the errors for an unknown key (Lightning silently writes "key=0"),
// unpaired braces and specs that fit no value.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "tiny_module.h"
#include "train/checkpoint/checkpoint_filename.h"

namespace mantissa::train {
namespace {

using mantissa::testing::error_of;
using mantissa::testing::expect_error;

const std::map<std::string, double> kMetrics = {{"train_loss", 0.51234}, {"val_loss", 0.43219}};

TEST(CheckpointFilename, FormatsEpochStepAndMetricsWithOptionalSpecs) {
  EXPECT_EQ(format_checkpoint_filename("{epoch}-{step}", 3, 200, kMetrics), "epoch=3-step=200");
  EXPECT_EQ(format_checkpoint_filename("run/{epoch:02d}-{val_loss:.2f}", 3, 200, kMetrics),
            "run/epoch=03-val_loss=0.43");
  EXPECT_EQ(format_checkpoint_filename("best_{val_loss}", 0, 0, kMetrics), "best_val_loss=0.4322");
  EXPECT_EQ(format_checkpoint_filename("plain", 1, 2, {}), "plain");
}

TEST(CheckpointFilename, ATakenNameGetsLightningsVersionSuffix) {
  EXPECT_EQ(versioned_checkpoint_filename("epoch=0", 1), "epoch=0-v1");
  EXPECT_EQ(versioned_checkpoint_filename("run/epoch=03-val_loss=0.41", 12),
            "run/epoch=03-val_loss=0.41-v12");
}

TEST(CheckpointFilename, UnknownKeyIsAnErrorListingTheKeys) {
  expect_error([] { format_checkpoint_filename("{epoch}-{nosuch}", 1, 2, kMetrics); },
               {"filename '{epoch}-{nosuch}' names the key 'nosuch'",
                "the keys are: epoch, step, train_loss, val_loss"});
}

TEST(CheckpointFilename, BadTemplatesAreRefusedWhenTheCallbackIsBuilt) {
  auto refused = [](const std::string& filename, const std::string& why) {
    ModelCheckpointOptions mc;
    mc.filename = filename;
    expect_error([&] { ModelCheckpoint checkpoint(mc); }, why);
  };
  refused("{epoch", "'{' without its '}' at character 1");
  refused("epoch}", "'}' without its '{' at character 6");
  refused("a{{epoch}}", "'{' without its '}' at character 2");
  refused("x-{}", "a field without a key at character 3");
  refused("{epoch:.2q}", "the format spec '.2q' of 'epoch' does not fit an integer");
  refused("{val_loss:d}", "the format spec 'd' of 'val_loss' does not fit a floating-point");
}

// In a run: the first save stops with the error before any file is written.
TEST(CheckpointFilename, UnknownKeyStopsTheFirstSave) {
  mantissa::testing::TempDir dir;
  ModelCheckpointOptions mc;
  mc.dirpath = dir.str();
  mc.filename = "{nosuch}";
  TrainerOptions o = testing::quiet_options();
  o.max_epochs = 1;
  o.callbacks.push_back(std::make_shared<ModelCheckpoint>(mc));
  Trainer trainer(o);
  testing::TinyModule module;
  data::DataLoader train(testing::tiny_dataset(16), 8);
  const std::string err = error_of([&] { trainer.fit(module, train); });
  EXPECT_NE(err.find("names the key 'nosuch'"), std::string::npos) << err;
  EXPECT_NE(err.find("the keys are: epoch, step, train_loss"), std::string::npos) << err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.str()));
}

// An empty filename is Lightning's default "{epoch}-{step}" (its `if not filename`), not the
// hidden files ".safetensors" and "-v1.safetensors" it gave.
TEST(CheckpointFilename, EmptyFilenameIsTheDefaultEpochStepPattern) {
  mantissa::testing::TempDir dir;
  ModelCheckpointOptions mc;
  mc.dirpath = dir.str();
  mc.filename = "";
  mc.save_top_k = -1;
  auto checkpoint = std::make_shared<ModelCheckpoint>(mc);
  EXPECT_EQ(checkpoint->options().filename, "{epoch}-{step}");
  TrainerOptions o = testing::quiet_options();
  o.max_epochs = 2;
  o.callbacks.push_back(checkpoint);
  Trainer trainer(o);
  testing::TinyModule module;
  data::DataLoader train(testing::tiny_dataset(16), 8);
  trainer.fit(module, train);
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.str()))
    files.insert(e.path().filename().string());
  EXPECT_EQ(files,
            (std::set<std::string>{"epoch=0-step=2.safetensors", "epoch=1-step=4.safetensors"}));
}

// A new run in a directory that holds an earlier run's checkpoint of the same name keeps that
// file and writes its own beside it, with a version (Lightning's version counter); it wrote
// over it. last.safetensors keeps its name. enable_version_counter = false writes over it.
TEST(CheckpointFilename, ANewRunKeepsAnEarlierRunsCheckpointOfTheSameName) {
  mantissa::testing::TempDir dir;
  data::DataLoader train(testing::tiny_dataset(16), 8);
  auto fit = [&](int64_t seed, bool version_counter) {
    ModelCheckpointOptions mc;
    mc.dirpath = dir.str();
    mc.save_top_k = -1;
    mc.save_last = true;
    mc.enable_version_counter = version_counter;
    TrainerOptions o = testing::quiet_options();
    o.max_epochs = 1;
    o.seed = seed;
    auto checkpoint = std::make_shared<ModelCheckpoint>(mc);
    o.callbacks.push_back(checkpoint);
    Trainer trainer(o);
    testing::TinyModule module;
    ::testing::internal::CaptureStderr();
    trainer.fit(module, train);
    const std::string err = ::testing::internal::GetCapturedStderr();
    return std::make_pair(checkpoint->best_model_path(), err);
  };
  auto weights = [](const std::string& path) {
    for (const auto& [name, t] : load_checkpoint_file(path).tensors) {
      if (name == "model.net.0.weight") return t.contiguous().to_vector<float>();
    }
    return std::vector<float>{};
  };
  const auto [first, first_err] = fit(1, true);
  EXPECT_EQ(first, dir.file("epoch=0-step=2.safetensors"));
  const std::vector<float> first_weights = weights(first);
  ASSERT_FALSE(first_weights.empty());
  const auto [second, second_err] = fit(2, true);
  EXPECT_EQ(second, dir.file("epoch=0-step=2-v1.safetensors"));
  EXPECT_NE(second_err.find("this run's last.safetensors replaces theirs, and its other "
                            "checkpoints whose names are taken get a version (-v1, -v2, ...)"),
            std::string::npos)
      << second_err;
  // The first run's file is as it was, the second's holds other weights.
  EXPECT_EQ(weights(first), first_weights);
  EXPECT_NE(weights(second), first_weights);
  EXPECT_EQ(weights(dir.file("last.safetensors")), weights(second));
  // Without the counter the name is written over.
  const auto [third, third_err] = fit(3, false);
  EXPECT_EQ(third, dir.file("epoch=0-step=2.safetensors"));
  EXPECT_NE(third_err.find("checkpoints of the same names replace them"), std::string::npos)
      << third_err;
  EXPECT_NE(weights(third), first_weights);
  EXPECT_FALSE(std::filesystem::exists(dir.file("epoch=0-step=2-v2.safetensors")));
}

}  // namespace
}  // namespace mantissa::train
