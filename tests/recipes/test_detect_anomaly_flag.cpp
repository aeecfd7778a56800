// --detect-anomaly reaches the Trainer for every model: make_trainer_options (shared by the
// image models and the GPT loop) copies it into TrainerOptions.
#include <gtest/gtest.h>

#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/trainer_setup.h"

namespace mantissa::recipes {
namespace {

TEST(DetectAnomalyFlag, ReachesTrainerOptions) {
  TrainOptions o;
  o.quiet = true;
  EXPECT_FALSE(make_trainer_options(o).detect_anomaly);
  o.detect_anomaly = true;
  EXPECT_TRUE(make_trainer_options(o).detect_anomaly);
}

}  // namespace
}  // namespace mantissa::recipes
