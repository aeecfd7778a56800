// Trainer(detect_anomaly): a NaN in training stops fit with the op and layer named; under
// 16-mixed the loss scaler's skipped steps and scale changes are reported with their step
// number; off (the default) nothing is reported.
#include <gtest/gtest.h>

#include <limits>

#include "mantissa/autograd/anomaly_mode.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::tiny_dataset;
using testing::TinyModule;
using testing::TinyOptions;

TEST(TrainerAnomaly, ForwardNaNStopsFitNamingOpAndLayer) {
  TrainerOptions o = quiet_options();
  o.detect_anomaly = true;
  TinyModule module;
  // The second Linear ("net.2") is given a NaN weight after the first step, as a bad update
  // would; the next forward is where the NaN first shows.
  auto poison = std::make_shared<testing::LambdaCallback>();
  poison->batch_end = [&](Trainer&, int64_t b) {
    if (b == 0)
      module.net_->named_parameters()[2].second.detach().fill_(
          std::numeric_limits<double>::quiet_NaN());
  };
  o.callbacks.push_back(poison);
  Trainer t2(o);
  data::DataLoader loader(tiny_dataset(32), 8);
  const std::string msg = mantissa::testing::error_of([&] { t2.fit(module, loader); });
  for (const char* piece : {"forward op 'linear'", "layer 'net.2'", "NaN", "float32[8, 8]",
                            "float32[3, 8]", "input #1 already held 24 NaN"})
    EXPECT_NE(msg.find(piece), std::string::npos) << msg << "\nlacks: " << piece;
  EXPECT_EQ(t2.global_step(), 1);
  EXPECT_FALSE(autograd::is_anomaly_enabled()) << "fit must switch anomaly detection back off";
}

// What anomaly detection finds in a training step is the run diverging: fit throws the
// Trainer's TrainingDiverged (`mantissa train` then writes its metrics JSON and exits 4).
TEST(TrainerAnomaly, AnAnomalyInATrainingStepIsTheRunDiverging) {
  TrainerOptions o = quiet_options();
  o.detect_anomaly = true;
  TinyModule module;
  module.configure_model();  // the layers exist from here (fit would build them)
  module.net_->named_parameters()[2].second.detach().fill_(
      std::numeric_limits<double>::quiet_NaN());
  Trainer t(o);
  data::DataLoader loader(tiny_dataset(32), 8);
  try {
    t.fit(module, loader);
    ADD_FAILURE() << "fit did not throw";
  } catch (const TrainingDiverged& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[detect_anomaly] forward op 'linear'", 0), 0u)
        << e.what();
  }
  EXPECT_EQ(t.global_step(), 0);
}

// An update that overflows float16 is the first non-finite value of a diverging 16-true run:
// anomaly detection names that optimizer step and the parameter, as the Trainer does without
// it, not the next forward, whose input (the weight) is then already non-finite.
TEST(TrainerAnomaly, AnOverflowingUpdateIsBlamedOnTheOptimizerStep) {
  TinyOptions to;
  to.adamw = true;
  to.lr = 1e6;  // Adam's first step moves each weight by about lr: beyond float16's 65504
  TinyModule module(to);
  TrainerOptions o = quiet_options("16-true");
  o.detect_anomaly = true;
  Trainer trainer(o);
  data::DataLoader loader(tiny_dataset(32), 8);
  try {
    trainer.fit(module, loader);
    ADD_FAILURE() << "fit did not throw";
  } catch (const TrainingDiverged& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[detect_anomaly] optimizer step 1 (AdamW) made parameter "
                        "'net.0.weight' non-finite (",
                        0),
              0u)
        << msg;
    EXPECT_NE(msg.find(" of 32 elements) in 16-true"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("already"), std::string::npos) << msg;
  }
  EXPECT_EQ(trainer.global_step(), 1);
  EXPECT_FALSE(autograd::is_anomaly_enabled());
}

// The count the report gives is the tensor's: NaN, +inf and -inf apart, over its elements.
TEST(TrainerAnomaly, NonFiniteSummaryCountsEachKind) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor t = tensor_of({1.0, inf, -inf, std::numeric_limits<double>::quiet_NaN(), inf, 2.0},
                             {6}, kFloat16);
  EXPECT_EQ(autograd::non_finite_summary(t), "1 NaN, 2 +inf, 1 -inf of 6 elements");
  EXPECT_EQ(autograd::non_finite_summary(tensor_of({1.0, 2.0}, {2}, kFloat32)), "");
}

// A loss multiplied by 1e30 at step 1 makes the fp16 gradients overflow at any loss scale
// >= 1: the scaler skips that step and halves its scale, and both are reported as step 1.
TEST(TrainerAnomaly, SixteenMixedSkippedStepAndScaleChangeAreLoggedWithTheStep) {
  TinyOptions to;
  to.loss_multiplier = [](int64_t step) { return step == 1 ? 1e30 : 1.0; };
  TinyModule module(to);
  TrainerOptions o = quiet_options("16-mixed");
  o.detect_anomaly = true;
  o.max_steps = 3;
  Trainer trainer(o);
  data::DataLoader loader(tiny_dataset(32), 8);
  ::testing::internal::CaptureStderr();
  trainer.fit(module, loader);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const auto& events = trainer.anomaly_events();
  ASSERT_EQ(events.size(), 2u) << err;
  EXPECT_NE(events[0].find("step 1: optimizer step skipped, inf/NaN gradients at loss scale "
                           "65536"),
            std::string::npos)
      << events[0];
  EXPECT_NE(events[0].find("first: backward of op"), std::string::npos) << events[0];
  EXPECT_EQ(events[1], "step 1: loss scale 65536 -> 32768 (backoff after inf/NaN gradients)");
  EXPECT_NE(err.find("mantissa: anomaly: step 1: loss scale 65536 -> 32768"), std::string::npos)
      << err;
  EXPECT_EQ(trainer.precision_plugin().scaler()->skipped_steps(), 1);
}

TEST(TrainerAnomaly, OffByDefaultReportsNothing) {
  EXPECT_FALSE(TrainerOptions{}.detect_anomaly);
  TinyOptions to;
  to.loss_multiplier = [](int64_t step) { return step == 1 ? 1e30 : 1.0; };
  TinyModule module(to);
  TrainerOptions o = quiet_options("16-mixed");
  o.max_steps = 3;
  Trainer trainer(o);
  data::DataLoader loader(tiny_dataset(32), 8);
  ::testing::internal::CaptureStderr();
  trainer.fit(module, loader);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(trainer.anomaly_events().empty());
  EXPECT_EQ(err.find("anomaly"), std::string::npos) << err;
  EXPECT_EQ(trainer.precision_plugin().scaler()->skipped_steps(), 1);  // skipped all the same
}

}  // namespace
}  // namespace mantissa::train
