// min_epochs and min_steps (Lightning's): should_stop, from EarlyStopping or any callback,
// cannot end training before them; it stays set and training stops at the first batch end
// where both are reached. Stopping for should_stop validates first, as Lightning does.
#include <gtest/gtest.h>

#include "mantissa/train/early_stopping.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;

// 32 examples in batches of 8: 4 training batches per epoch.
using Loaders = testing::TinyLoaders;

// Sets should_stop at the end of the first training batch; records the global step of every
// validation.
class StopAtOnce : public Callback {
 public:
  std::vector<int64_t> validations;
  void on_train_batch_end(Trainer& trainer, TrainModule&, const Tensor&, const data::Example&,
                          int64_t) override {
    trainer.should_stop = true;
  }
  void on_validation_end(Trainer& trainer, TrainModule&) override {
    validations.push_back(trainer.global_step());
  }
};

TEST(MinEpochsAndSteps, EarlyStoppingCannotEndTrainingBeforeMinEpochs) {
  // val_loss is far below the threshold: EarlyStopping asks to stop at its first check.
  auto es = std::make_shared<EarlyStopping>(
      EarlyStoppingOptions{.monitor = "val_loss", .stopping_threshold = 100.0});
  TrainerOptions o = quiet_options();
  o.max_epochs = 5;
  o.min_epochs = 3;
  o.callbacks = {es};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  // It asked after every epoch (the last time after epoch 2); only min_epochs kept it going.
  EXPECT_EQ(es->stopped_epoch(), 2);
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(trainer.global_step(), 12);
  EXPECT_TRUE(trainer.should_stop);
}

TEST(MinEpochsAndSteps, ShouldStopWaitsForMinStepsThenStopsMidEpochAfterAValidation) {
  auto stop = std::make_shared<StopAtOnce>();
  TrainerOptions o = quiet_options();
  o.max_epochs = 5;
  o.min_steps = 6;
  o.callbacks = {stop};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  // Step 6 is batch 2 of epoch 2: it stops there, after validating the final weights.
  EXPECT_EQ(trainer.global_step(), 6);
  EXPECT_EQ(stop->validations, (std::vector<int64_t>{4, 6}));
}

TEST(MinEpochsAndSteps, WithoutAMinimumShouldStopEndsAtTheBatchWithAValidation) {
  auto stop = std::make_shared<StopAtOnce>();
  TrainerOptions o = quiet_options();
  o.max_epochs = 5;
  o.callbacks = {stop};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  EXPECT_EQ(trainer.global_step(), 1);
  // Lightning validates when should_stop ends the epoch early (mantissa did not).
  EXPECT_EQ(stop->validations, (std::vector<int64_t>{1}));
}

TEST(MinEpochsAndSteps, NegativeMinimaAreRefusedNamingTheOption) {
  for (const char* name : {"min_epochs", "min_steps"}) {
    TrainerOptions o = quiet_options();
    (std::string(name) == "min_epochs" ? o.min_epochs : o.min_steps) = -1;
    try {
      Trainer trainer(o);
      ADD_FAILURE() << name << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name) + " must be 0 (no minimum)"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace mantissa::train
