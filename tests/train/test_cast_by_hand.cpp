// Casting by hand inside a step whose precision plugin manages dtypes
// (mantissa/core/managed_precision.h): an autocast region, a parameter cast and a Module::to
// each warn once, naming the place and the plugin; the plugins' own casts and plain 32-true
// never warn.
#include <gtest/gtest.h>

#include <functional>

#include "mantissa/core/managed_precision.h"
#include "mantissa/mantissa.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::tiny_dataset;

class HandCastModule : public testing::TinyModule {
 public:
  explicit HandCastModule(std::function<void(HandCastModule&)> in_step)
      : in_step_(std::move(in_step)) {}
  Tensor training_step(const data::Example& batch, int64_t batch_idx) override {
    if (in_step_) in_step_(*this);
    return TinyModule::training_step(batch, batch_idx);
  }

 private:
  std::function<void(HandCastModule&)> in_step_;
};

// stderr of a 3-step fit.
std::string fit_stderr(const std::string& precision, std::function<void(HandCastModule&)> in_step) {
  reset_cast_by_hand_warnings();
  TrainerOptions o = quiet_options(precision);
  o.max_steps = 3;
  o.seed = 5;
  Trainer trainer(o);
  HandCastModule module(std::move(in_step));
  const data::DataLoader loader(tiny_dataset(), 8);
  ::testing::internal::CaptureStderr();
  trainer.fit(module, loader);
  return ::testing::internal::GetCapturedStderr();
}

size_t count(const std::string& s, const std::string& piece) {
  size_t n = 0;
  for (size_t at = s.find(piece); at != std::string::npos; at = s.find(piece, at + 1)) ++n;
  return n;
}

TEST(CastByHand, AnAutocastRegionInsideAMixedStepWarnsOnce) {
  const std::string err = fit_stderr(
      "16-mixed", [](HandCastModule&) { amp::autocast region(DeviceType::kCPU, kBFloat16); });
  EXPECT_EQ(count(err, "mantissa: warning:"), 1u) << err;
  EXPECT_NE(err.find("an autocast region (bfloat16) was opened by hand inside "
                     "TinyModule.training_step, whose precision plugin MixedPrecision (16-mixed) "
                     "already manages"),
            std::string::npos)
      << err;
}

TEST(CastByHand, AParameterCastWarnsNamingItsShape) {
  const std::string err = fit_stderr("bf16-mixed", [](HandCastModule& m) {
    const Tensor w = m.parameters()[0];
    const Tensor half = w.to(kFloat16);  // the .half() the seeds warn about
  });
  EXPECT_EQ(count(err, "mantissa: warning:"), 1u) << err;
  EXPECT_NE(err.find("a parameter of shape [8, 4] was cast from float32 to float16 by hand inside "
                     "TinyModule.training_step"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("MixedPrecision (bf16-mixed)"), std::string::npos) << err;
}

TEST(CastByHand, ModuleToInsideATrueHalfStepWarns) {
  const std::string err = fit_stderr("bf16-true", [](HandCastModule& m) {
    m.to(kBFloat16);  // a no-op in value, still a cast by hand
  });
  EXPECT_NE(err.find("Module::to(bfloat16) of TinyModule was called by hand inside "
                     "TinyModule.training_step, whose precision plugin HalfPrecision (bf16-true)"),
            std::string::npos)
      << err;
}

TEST(CastByHand, PluginsOwnCastsAndPlainFp32NeverWarn) {
  for (const char* p : {"16-mixed", "bf16-mixed", "bf16-true", "64-true"}) {
    const std::string err = fit_stderr(p, nullptr);
    EXPECT_EQ(err.find("by hand"), std::string::npos) << p << ": " << err;
  }
  const std::string fp32 = fit_stderr("32-true", [](HandCastModule& m) {
    amp::autocast region(DeviceType::kCPU, kBFloat16);  // manual mixed precision: allowed
    const Tensor half = m.parameters()[0].to(kBFloat16);
  });
  EXPECT_EQ(fp32.find("by hand"), std::string::npos) << fp32;
  // A disabled region (an fp32 island inside a mixed step) is not a cast by hand either.
  const std::string island = fit_stderr("bf16-mixed", [](HandCastModule&) {
    amp::autocast off(DeviceType::kCPU, std::nullopt, /*enabled=*/false);
  });
  EXPECT_EQ(island.find("by hand"), std::string::npos) << island;
}

// Manual optimisation: training_step holds the backward and the optimizer step itself.
class ManualHandCastModule : public testing::TinyModule {
 public:
  explicit ManualHandCastModule(bool cast_by_hand) : cast_by_hand_(cast_by_hand) {
    automatic_optimization = false;
  }
  Tensor training_step(const data::Example& batch, int64_t) override {
    if (cast_by_hand_) (void)parameters()[0].to(kFloat16);  // the .half() by hand
    const Tensor loss = cross_entropy(child("net")->forward(batch.input), batch.target);
    optimizers()[0]->zero_grad();
    manual_backward(loss);
    clip_gradients(*optimizers()[0], 1.0, "norm");
    manual_step(*optimizers()[0]);
    return loss;
  }

 private:
  bool cast_by_hand_;
};

std::string manual_fit_stderr(const std::string& precision, bool cast_by_hand) {
  reset_cast_by_hand_warnings();
  TrainerOptions o = quiet_options(precision);
  o.max_steps = 3;
  Trainer trainer(o);
  ManualHandCastModule module(cast_by_hand);
  const data::DataLoader loader(tiny_dataset(), 8);
  ::testing::internal::CaptureStderr();
  trainer.fit(module, loader);
  return ::testing::internal::GetCapturedStderr();
}

TEST(CastByHand, ManualOptimisationStepsAreWatchedToo) {
  const std::string err = manual_fit_stderr("16-mixed", /*cast_by_hand=*/true);
  EXPECT_EQ(count(err, "mantissa: warning:"), 1u) << err;
  EXPECT_NE(err.find("cast from float32 to float16 by hand inside TinyModule.training_step, "
                     "whose precision plugin MixedPrecision (16-mixed)"),
            std::string::npos)
      << err;
  // The backward, unscale, clipping and step the Trainer makes for it are not by hand.
  for (const char* p : {"16-mixed", "bf16-mixed", "bf16-true"}) {
    const std::string clean = manual_fit_stderr(p, /*cast_by_hand=*/false);
    EXPECT_EQ(clean.find("by hand"), std::string::npos) << p << ": " << clean;
  }
}

TEST(CastByHand, OutsideAStepNothingIsManaged) {
  EXPECT_EQ(managed_precision(), nullptr);
  {
    ManagedPrecisionScope outer("A (x)", "M.training_step");
    {
      ManagedPrecisionScope inner("B (y)", "M.validation_step");
      EXPECT_EQ(managed_precision()->plugin, "B (y)");
    }
    EXPECT_EQ(managed_precision()->place, "M.training_step");
    InternalCastScope internal;
    EXPECT_FALSE(warn_if_cast_by_hand("test", "x"));
  }
  EXPECT_EQ(managed_precision(), nullptr);
}

}  // namespace
}  // namespace mantissa::train
