// --detect-anomaly reaches the Trainer for every model: make_trainer_options (shared by the
// image models and the GPT loop) copies it into TrainerOptions.
#include <gtest/gtest.h>

#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/trainer_setup.h"
#include "mantissa/train/early_stopping.h"

namespace mantissa::recipes {
namespace {

TEST(DetectAnomalyFlag, ReachesTrainerOptions) {
  TrainOptions o;
  o.quiet = true;
  EXPECT_FALSE(make_trainer_options(o).detect_anomaly);
  o.detect_anomaly = true;
  EXPECT_TRUE(make_trainer_options(o).detect_anomaly);
}

// --early-stopping-monitor leaves where it checks to the callback's setup, which sees the
// Trainer's final val_check_interval: the GPT and finetune set theirs from --eval-interval
// after make_trainer_options, so a choice made here (from --val-check-interval) checked a
// fine-tune at epoch ends only, missing the validations inside an epoch.
TEST(EarlyStoppingFlags, WhereItChecksIsDecidedAtSetup) {
  for (const std::string model : {"mlp", "gpt"}) {
    TrainOptions o;
    o.model = model;
    o.quiet = true;
    o.early_stopping_monitor = "val_loss";
    bool found = false;
    for (const auto& cb : make_trainer_options(o).callbacks) {
      if (auto* es = dynamic_cast<train::EarlyStopping*>(cb.get())) {
        found = true;
        EXPECT_FALSE(es->options().check_on_train_epoch_end.has_value()) << model;
      }
    }
    EXPECT_TRUE(found) << model;
  }
}

}  // namespace
}  // namespace mantissa::recipes
