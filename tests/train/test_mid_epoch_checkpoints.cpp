// Checkpoints written inside an epoch: resuming from one continues the unbroken run exactly,
// including the epoch's means of what was logged on_epoch.
#include <gtest/gtest.h>

#include <filesystem>

#include "mantissa/train/checkpoint.h"
#include "mantissa/train/model_checkpoint.h"
#include "support/temp_dir.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
namespace fs = std::filesystem;

// 32 examples in batches of 8: 4 training batches per epoch.
struct Loaders {
  data::DataLoader train{testing::tiny_dataset(), 8, /*shuffle=*/true, 5};
  data::DataLoader val{testing::tiny_dataset(16, 77), 8};
};

// The training loss logged per step and per epoch (train_loss_epoch, the epoch's mean).
class EpochMeanLoss : public TinyModule {
 public:
  Tensor training_step(const data::Example& batch, int64_t) override {
    Tensor loss = cross_entropy(net_->forward(batch.input), batch.target);
    log("train_loss", loss.item(), false, /*on_step=*/true, /*on_epoch=*/true);
    return loss;
  }
};

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

}  // namespace
}  // namespace mantissa::train
