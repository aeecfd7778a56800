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

// --early-stopping-monitor checks where Lightning's EarlyStopping does by default: at epoch
// ends when an epoch validates once, after every validation when it validates more often (the
// GPT, whose runs are mostly shorter than an epoch, was checked at epoch ends only: once).
TEST(EarlyStoppingFlags, CheckAfterEveryValidationWhenAnEpochValidatesMoreThanOnce) {
  auto check_at_epoch_end = [](TrainOptions o) {
    o.quiet = true;
    o.early_stopping_monitor = "val_loss";
    for (const auto& cb : make_trainer_options(o).callbacks) {
      if (auto* es = dynamic_cast<train::EarlyStopping*>(cb.get()))
        return es->options().check_on_train_epoch_end;
    }
    ADD_FAILURE() << "no EarlyStopping";
    return false;
  };
  TrainOptions o;
  EXPECT_TRUE(check_at_epoch_end(o));
  o.val_check_interval = "0.5";
  EXPECT_FALSE(check_at_epoch_end(o));
  o.val_check_interval = "10";
  EXPECT_FALSE(check_at_epoch_end(o));
  TrainOptions gpt;
  gpt.model = "gpt";
  EXPECT_FALSE(check_at_epoch_end(gpt));
}

}  // namespace
}  // namespace mantissa::recipes
