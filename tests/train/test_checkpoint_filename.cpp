// ModelCheckpoint's filename template (src/train/checkpoint_filename.h): Lightning's keys and
// format specs, and the errors for an unknown key (Lightning silently writes "key=0"), unpaired
// braces and specs that fit no value.
#include <gtest/gtest.h>

#include <filesystem>

#include "mantissa/train/model_checkpoint.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "tiny_module.h"
#include "train/checkpoint_filename.h"

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

}  // namespace
}  // namespace mantissa::train
