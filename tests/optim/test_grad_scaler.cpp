// GradScaler against docs/grad_scaler.md: the worked examples A, B and C step by step, inf/NaN
// skipping, the per-optimizer state machine and its errors, state_dict, the disabled scaler,
// fp16/bf16 gradients, unscale_ -> clip -> step ordering, gradient accumulation and the
// mantissa extensions (min/max scale, skipped_steps). The two kernels are tested directly too.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "kernels/cpu/amp/unscale_kernel.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/generator.h"
#include "mantissa/nn/clip_grad.h"
#include "mantissa/nn/linear.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/optim/adam.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/optim/sgd.h"
#include "support/test_util.h"

namespace mantissa::amp {
namespace {

using namespace mantissa::testing;

Tensor leaf(const std::vector<double>& v, DType dt = kFloat32) {
  Tensor t = tensor_of(v, {static_cast<int64_t>(v.size())}, dt);
  t.requires_grad_(true);
  return t;
}

// loss = sum(w * g): its gradient with respect to w is g itself (independent of w), so each
// iteration can choose finite or non-finite gradients.
Tensor linear_loss(const Tensor& w, const std::vector<double>& g) {
  return sum(mul(w, tensor_of(g, {static_cast<int64_t>(g.size())}, w.dtype())));
}

GradScalerOptions small_options() {
  GradScalerOptions o;
  o.init_scale = 8;
  o.growth_factor = 2;
  o.backoff_factor = 0.5;
  o.growth_interval = 3;
  return o;
}

// One iteration: zero_grad, scale(loss).backward(), step, update. Returns whether it stepped.
bool iterate(GradScaler& scaler, optim::Optimizer& opt, const Tensor& w,
             const std::vector<double>& g) {
  opt.zero_grad();
  scaler.scale(linear_loss(w, g)).backward();
  const bool stepped = scaler.step(opt);
  scaler.update();
  return stepped;
}

// ---- worked example A (docs/grad_scaler.md) ----

TEST(GradScaler, ExampleAIterationOneArithmetic) {
  GradScaler scaler(small_options());
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  // loss = 0.03 w + 0.47 = 0.5 at w = 1, true gradient 0.03.
  Tensor loss = add(mul(w, 0.03), 0.47);
  Tensor scaled = scaler.scale(loss);
  EXPECT_EQ(scaled.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(scaled.item(), 4.0);
  EXPECT_EQ(scaled.item(), loss.item() * 8);
  scaled.backward();
  EXPECT_EQ(w.grad().item<float>(), 0.03f * 8);  // 0.24 (scaling by 8 is exact)
  scaler.unscale_(opt);
  EXPECT_EQ(w.grad().item<float>(), 0.03f);  // fp32(1/8) = 0.125 exactly
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_EQ(w.item<float>(), 1.0f - 0.1f * 0.03f);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
}

TEST(GradScaler, ExampleATable) {
  GradScaler scaler(small_options());
  Tensor w = leaf({1.0, -2.0});
  optim::SGD opt({w}, 1.0);
  struct Row {
    double scale_used;
    bool finite;
    int64_t tracker_after;
    double scale_after;
  };
  const std::vector<Row> table = {{8, true, 1, 8},   {8, true, 2, 8}, {8, true, 0, 16},
                                  {16, false, 0, 8}, {8, true, 1, 8}, {8, false, 0, 4},
                                  {4, true, 1, 4},   {4, true, 2, 4}, {4, true, 0, 8}};
  int64_t skipped = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i + 1));
    const Row& r = table[i];
    const std::vector<double> g = {0.03, r.finite ? 0.5 : kInf};
    const std::vector<float> before = w.to_vector<float>();
    opt.zero_grad();
    Tensor loss = linear_loss(w, {0.03, 0.5});
    Tensor scaled = scaler.scale(r.finite ? loss : linear_loss(w, g));
    if (r.finite) EXPECT_EQ(scaled.item(), loss.item() * r.scale_used);
    scaled.backward();
    EXPECT_EQ(w.grad().to_vector<float>()[0], static_cast<float>(0.03f * r.scale_used));
    scaler.unscale_(opt);
    // Every grad is multiplied by 1/scale, also in the iteration that overflows.
    EXPECT_EQ(w.grad().to_vector<float>()[0], 0.03f);
    if (!r.finite) EXPECT_TRUE(std::isinf(w.grad().to_vector<float>()[1]));
    EXPECT_EQ(scaler.step(opt), r.finite);
    if (r.finite) {
      EXPECT_EQ(w.to_vector<float>()[0], before[0] - 0.03f);
    } else {
      ++skipped;
      EXPECT_EQ(w.to_vector<float>(), before);  // optimizer.step was not called
    }
    scaler.update();
    EXPECT_EQ(scaler.get_growth_tracker(), r.tracker_after);
    EXPECT_EQ(scaler.get_scale(), r.scale_after);
  }
  EXPECT_EQ(scaler.skipped_steps(), skipped);
  EXPECT_EQ(skipped, 2);
}

// ---- worked example B (PyTorch's own test of the update op) ----

TEST(GradScaler, ExampleBUpdateOp) {
  Tensor scale = scalar_tensor(4.0, kFloat32);
  Tensor tracker = scalar_tensor(0, kInt32);
  Tensor found_inf = scalar_tensor(0.0, kFloat32);
  update_scale_(scale, tracker, found_inf, 2.0, 0.25, 2);
  EXPECT_EQ(tracker.item(), 1);
  EXPECT_EQ(scale.item(), 4.0);
  update_scale_(scale, tracker, found_inf, 2.0, 0.25, 2);
  EXPECT_EQ(tracker.item(), 0);
  EXPECT_EQ(scale.item(), 8.0);
  found_inf.fill_(1.0);
  update_scale_(scale, tracker, found_inf, 2.0, 0.25, 2);
  EXPECT_EQ(tracker.item(), 0);
  EXPECT_EQ(scale.item(), 2.0);
}

TEST(GradScaler, ExampleBThroughTheScaler) {
  GradScalerOptions o;
  o.init_scale = 4;
  o.growth_factor = 2;
  o.backoff_factor = 0.25;
  o.growth_interval = 2;
  GradScaler scaler(o);
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  EXPECT_TRUE(iterate(scaler, opt, w, {0.5}));
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_TRUE(iterate(scaler, opt, w, {0.5}));
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_FALSE(iterate(scaler, opt, w, {kInf}));
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
  EXPECT_EQ(scaler.get_scale(), 2.0);
}

// ---- worked example C (defaults) ----

TEST(GradScaler, ExampleCDefaults) {
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.get_growth_factor(), 2.0);
  EXPECT_EQ(scaler.get_backoff_factor(), 0.5);
  EXPECT_EQ(scaler.get_growth_interval(), 2000);
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 1e-6);
  const double expected_first[] = {32768, 16384, 8192};
  for (int it = 1; it <= 3; ++it) {
    EXPECT_FALSE(iterate(scaler, opt, w, {kInf}));
    EXPECT_EQ(scaler.get_scale(), expected_first[it - 1]);
  }
  for (int it = 4; it <= 2003; ++it) {
    ASSERT_TRUE(iterate(scaler, opt, w, {0.25}));
    if (it == 2002) {
      EXPECT_EQ(scaler.get_growth_tracker(), 1999);
      EXPECT_EQ(scaler.get_scale(), 8192.0);
    }
  }
  EXPECT_EQ(scaler.get_scale(), 16384.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
  for (int it = 2004; it <= 2499; ++it) ASSERT_TRUE(iterate(scaler, opt, w, {0.25}));
  EXPECT_EQ(scaler.get_growth_tracker(), 496);
  EXPECT_FALSE(iterate(scaler, opt, w, {kNaN}));  // iteration 2500
  EXPECT_EQ(scaler.get_scale(), 8192.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);  // the 496 clean steps are lost
  EXPECT_EQ(scaler.skipped_steps(), 4);
}

TEST(GradScaler, GrowthIntervalOneGivesInitTimesGrowthPowUTimesBackoffPowS) {
  GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 1;
  GradScaler scaler(o);
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.01);
  const std::vector<bool> finite = {true, false, true,  true, false, false, true,
                                    true, true,  false, true, false, true,  true};
  int u = 0, s = 0;
  for (bool f : finite) {
    iterate(scaler, opt, w, {f ? 0.5 : kInf});
    f ? ++u : ++s;
  }
  EXPECT_EQ(scaler.get_scale(), 1024.0 * std::pow(2.0, u) * std::pow(0.5, s));
}

// ---- inf / NaN injection ----

TEST(GradScaler, InfAndNaNGradientsSkipStepsAndBackOff) {
  GradScaler scaler(small_options());
  Tensor a = leaf({0.5, -1.5, 2.0});
  Tensor b = leaf({3.0});
  optim::Adam opt({a, b}, 0.01);
  auto run = [&](double ga, double gb) {
    opt.zero_grad();
    Tensor loss = add(linear_loss(a, {0.1, ga, -0.2}), linear_loss(b, {gb}));
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    return stepped;
  };
  EXPECT_TRUE(run(0.3, 0.4));
  ASSERT_EQ(opt.state(a)->step, 1);
  const auto a1 = a.to_vector<float>(), b1 = b.to_vector<float>();
  const auto m1 = opt.state(a)->buffers.at("exp_avg").to_vector<float>();

  EXPECT_FALSE(run(kInf, 0.4));  // scale 8 -> 4
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_FALSE(run(0.3, kNaN));  // scale 4 -> 2
  EXPECT_EQ(scaler.get_scale(), 2.0);
  EXPECT_FALSE(run(-kInf, kNaN));  // scale 2 -> 1
  EXPECT_EQ(scaler.get_scale(), 1.0);
  // Nothing moved: parameters, Adam's step count and moments.
  EXPECT_EQ(a.to_vector<float>(), a1);
  EXPECT_EQ(b.to_vector<float>(), b1);
  EXPECT_EQ(opt.state(a)->step, 1);
  EXPECT_EQ(opt.state(a)->buffers.at("exp_avg").to_vector<float>(), m1);
  EXPECT_EQ(scaler.skipped_steps(), 3);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);

  EXPECT_TRUE(run(0.3, 0.4));
  EXPECT_EQ(opt.state(a)->step, 2);
  EXPECT_NE(a.to_vector<float>(), a1);
}

TEST(GradScaler, OverflowInOneOptimizerSkipsOnlyItsStepAndBacksOffOnce) {
  GradScaler scaler(small_options());
  Tensor w1 = leaf({1.0}), w2 = leaf({1.0});
  optim::SGD opt1({w1}, 1.0), opt2({w2}, 1.0);
  auto run = [&](double g1, double g2, bool expect1, bool expect2) {
    opt1.zero_grad();
    opt2.zero_grad();
    scaler.scale(add(linear_loss(w1, {g1}), linear_loss(w2, {g2}))).backward();
    EXPECT_EQ(scaler.step(opt1), expect1);
    EXPECT_EQ(scaler.step(opt2), expect2);
    scaler.update();
  };
  run(0.5, kInf, true, false);
  EXPECT_EQ(w1.item(), 0.5);
  EXPECT_EQ(w2.item(), 1.0);
  EXPECT_EQ(scaler.get_scale(), 4.0);
  // Both overflow: found_inf sums to 2, still a single backoff.
  run(kNaN, kInf, false, false);
  EXPECT_EQ(scaler.get_scale(), 2.0);
  run(0.25, 0.25, true, true);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
  EXPECT_EQ(scaler.skipped_steps(), 3);
}

// ---- state machine ----

TEST(GradScaler, StageMachineAndErrors) {
  GradScaler scaler(small_options());
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  const std::string none_tail =
      "but _scale is None.  This may indicate your script did not use scaler.scale(loss or "
      "outputs) earlier in the iteration.";
  expect_error([&] { scaler.unscale_(opt); }, "[GradScaler] Attempted unscale_ " + none_tail);
  expect_error([&] { scaler.step(opt); }, "Attempted step " + none_tail);
  expect_error([&] { scaler.update(); }, "Attempted update " + none_tail);
  expect_error([&] { scaler.update(2.0); }, "Attempted update " + none_tail);

  Tensor scaled = scaler.scale(linear_loss(w, {0.5}));
  // No gradient yet: unscale_ finds nothing to check, so step cannot decide.
  expect_error([&] { scaler.step(opt); }, "No inf checks were recorded for this optimizer.");
  scaler.update(8.0);  // an explicit scale resets every optimizer to READY
  EXPECT_EQ(scaler.stage(opt), OptState::kReady);
  expect_error([&] { scaler.update(); }, "No inf checks were recorded prior to update.");

  scaled.backward();
  EXPECT_EQ(scaler.stage(opt), OptState::kReady);
  scaler.unscale_(opt);
  EXPECT_EQ(scaler.stage(opt), OptState::kUnscaled);
  expect_error([&] { scaler.unscale_(opt); },
               "unscale_() has already been called on this optimizer since the last update().");
  EXPECT_EQ(w.grad().item(), 0.5);  // the failed second call did not unscale again
  EXPECT_TRUE(scaler.step(opt));    // does not unscale again
  EXPECT_EQ(w.item<float>(), 1.0f - 0.1f * 0.5f);
  EXPECT_EQ(scaler.stage(opt), OptState::kStepped);
  expect_error([&] { scaler.unscale_(opt); }, "unscale_() is being called after step().");
  expect_error([&] { scaler.step(opt); },
               "step() has already been called since the last update().");
  scaler.update();
  EXPECT_EQ(scaler.stage(opt), OptState::kReady);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
}

TEST(GradScaler, UnscaleOnlyThenUpdateCountsTheCheck) {
  // unscale_ without step still records found_inf; update() uses it.
  GradScaler scaler(small_options());
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  scaler.scale(linear_loss(w, {kInf})).backward();
  scaler.unscale_(opt);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_EQ(w.item(), 1.0);
}

TEST(GradScaler, UpdateWithNewScaleKeepsTracker) {
  GradScaler scaler(small_options());
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  iterate(scaler, opt, w, {0.5});
  iterate(scaler, opt, w, {0.5});
  ASSERT_EQ(scaler.get_growth_tracker(), 2);
  scaler.update(3.3);
  EXPECT_EQ(scaler.get_scale(), static_cast<double>(3.3f));  // kept as float32
  EXPECT_EQ(scaler.get_growth_tracker(), 2);
  scaler.update(scalar_tensor(64.0, kFloat64));
  EXPECT_EQ(scaler.get_scale(), 64.0);
  expect_error([&] { scaler.update(leaf({1.0, 2.0})); }, "new_scale");
  expect_error([&] { scaler.update(leaf({4.0})); }, "requires_grad");
}

TEST(GradScaler, ScaleUsesSnapshotAndPromotesLikePyTorch) {
  GradScaler scaler(small_options());
  EXPECT_EQ(scaler.scale(scalar_tensor(0.5, kFloat16)).dtype(), kFloat32);  // 0-dim x 0-dim
  EXPECT_EQ(scaler.scale(scalar_tensor(0.5, kBFloat16)).dtype(), kFloat32);
  EXPECT_EQ(scaler.scale(scalar_tensor(0.5, kFloat64)).dtype(), kFloat64);
  Tensor h = scaler.scale(tensor_of({1.5, -2.0}, {2}, kFloat16));
  EXPECT_EQ(h.dtype(), kFloat16);  // a 0-dim scale does not promote a dimensioned tensor
  EXPECT_EQ(h.to_vector<double>(), (std::vector<double>{12.0, -16.0}));
  auto many = scaler.scale(std::vector<Tensor>{scalar_tensor(1.0), scalar_tensor(2.0)});
  EXPECT_EQ(many[1].item(), 16.0);
  expect_error([&] { scaler.scale(Tensor()); },
               "outputs must be a Tensor or an iterable of Tensors");
  // The graph keeps the scale it was built with even if the scale changes before backward.
  Tensor w = leaf({1.0});
  Tensor scaled = scaler.scale(sum(w));
  scaler.update(2.0);
  scaled.backward();
  EXPECT_EQ(w.grad().item(), 8.0);
}

// ---- fp16 / bf16 gradients ----

TEST(GradScaler, Fp16GradientsRaiseBeforeAnythingIsModified) {
  GradScaler scaler(small_options());
  Tensor w32 = leaf({1.0});
  Tensor w16 = leaf({1.0, 2.0}, kFloat16);
  optim::SGD opt({w32, w16}, 0.1);
  scaler.scale(add(linear_loss(w32, {0.5}), linear_loss(w16, {0.25, 0.5}).to(kFloat32))).backward();
  ASSERT_EQ(w16.grad().dtype(), kFloat16);
  expect_error([&] { scaler.unscale_(opt); }, "Attempting to unscale FP16 gradients.");
  EXPECT_EQ(w32.grad().item(), 4.0);  // not unscaled: the error came first
  EXPECT_EQ(scaler.stage(opt), OptState::kReady);
  expect_error([&] { scaler.step(opt); }, "Attempting to unscale FP16 gradients.");
  EXPECT_EQ(w32.item(), 1.0);
}

TEST(GradScaler, Bf16GradientsAreUnscaledAndChecked) {
  GradScaler scaler(small_options());
  Tensor w = leaf({1.0, -1.0}, kBFloat16);
  optim::SGD opt({w}, 1.0);
  scaler.scale(linear_loss(w, {0.375, -3.0})).backward();
  ASSERT_EQ(w.grad().dtype(), kBFloat16);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3.0, -24.0}));
  scaler.unscale_(opt);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{0.375, -3.0}));
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_FALSE(iterate(scaler, opt, w, {kInf, 1.0}));
  EXPECT_EQ(scaler.get_scale(), 4.0);
}

// ---- disabled scaler ----

TEST(GradScaler, DisabledScalerIsTransparent) {
  GradScalerOptions o;
  o.enabled = false;
  o.growth_factor = 0.5;  // not validated when disabled
  GradScaler scaler(o);
  EXPECT_FALSE(scaler.is_enabled());
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.5);
  scaler.unscale_(opt);  // no-op, even before scale()
  scaler.update();
  Tensor loss = linear_loss(w, {kInf});
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
  EXPECT_TRUE(scaler.state_dict().empty());
  scaler.load_state_dict(nlohmann::json::object());  // no-op
  opt.zero_grad();
  linear_loss(w, {0.5}).backward();
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_EQ(w.item(), 0.75);
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

// ---- options, state dict, extensions ----

TEST(GradScaler, ConstructorValidation) {
  auto make = [](auto edit) {
    GradScalerOptions o;
    edit(o);
    GradScaler s(o);
  };
  expect_error([&] { make([](auto& o) { o.growth_factor = 1.0; }); },
               "[GradScaler] The growth factor must be > 1.0.");
  expect_error([&] { make([](auto& o) { o.backoff_factor = 1.0; }); },
               "The backoff factor must be < 1.0.");
  expect_error([&] { make([](auto& o) { o.min_scale = 0.0; }); }, "min_scale");
  expect_error([&] { make([](auto& o) { o.max_scale = kInf; }); }, "max_scale");
  expect_error([&] { make([](auto& o) { o.min_scale = 8.0, o.max_scale = 4.0; }); },
               "must not exceed");
  // A growth interval <= 0 is accepted, as in PyTorch (the scale never grows).
  make([](auto& o) { o.growth_interval = 0; });
  make([](auto& o) { o.growth_interval = -5; });
  // Disabled: nothing is checked (the values are never used).
  make([](auto& o) { o.enabled = false, o.init_scale = 0.0, o.backoff_factor = 0.0; });
}

// A scale of 0 (or negative, NaN, inf, or one float32 cannot hold) makes every gradient 0 or
// NaN, so no step would ever run; PyTorch takes it, and so did the constructor, which then saved
// a state its own load_state_dict refused ("'scale' must be a finite number > 0"). The factors
// load_state_dict refuses (an infinite growth factor, a backoff <= 0) are refused up front too.
TEST(GradScaler, ConstructorRefusesWhatLoadStateDictRefuses) {
  auto make = [](auto edit) {
    GradScalerOptions o;
    edit(o);
    GradScaler s(o);
  };
  for (const double bad : {0.0, -1.0, kNaN, kInf, 1e39, 1e-50}) {
    expect_error([&] { make([&](auto& o) { o.init_scale = bad; }); },
                 {"[GradScaler] init_scale must be a finite number > 0", "the default is 65536"});
  }
  expect_error([&] { make([](auto& o) { o.growth_factor = kInf; }); },
               {"The growth factor must be > 1.0. It must also be finite", "got inf"});
  expect_error([&] { make([](auto& o) { o.backoff_factor = 0.0; }); },
               {"The backoff factor must be < 1.0. It must also be > 0", "got 0,"});
  expect_error([&] { make([](auto& o) { o.backoff_factor = -0.5; }); }, "> 0");
  GradScaler scaler;
  expect_error([&] { scaler.set_growth_factor(1.0); }, "The growth factor must be > 1.0");
  expect_error([&] { scaler.set_backoff_factor(0.0); }, "The backoff factor");
  EXPECT_EQ(scaler.get_growth_factor(), 2.0);  // a refused value changes nothing
  EXPECT_EQ(scaler.get_backoff_factor(), 0.5);

  // Every constructible scaler saves a state that loads back into a default one, before and
  // after its scale tensor exists.
  for (const double init : {1.0, 1e-30, 3e38, 65536.0}) {
    GradScalerOptions o;
    o.init_scale = init;
    o.growth_factor = 1.0000001;
    o.backoff_factor = 1e-9;
    o.growth_interval = -3;
    GradScaler saved(o);
    GradScaler loaded;
    EXPECT_NO_THROW(loaded.load_state_dict(saved.state_dict()));
    EXPECT_EQ(loaded.state_dict(), saved.state_dict());
    Tensor w = leaf({1.0});
    optim::SGD opt({w}, 0.1);
    iterate(saved, opt, w, {0.5});
    EXPECT_NO_THROW(loaded.load_state_dict(saved.state_dict()));
    EXPECT_EQ(loaded.get_scale(), saved.get_scale());
  }
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  iterate(scaler, opt, w, {0.5});
  expect_error([&] { scaler.update(0.0); }, "new_scale must be a finite number > 0");
  expect_error([&] { scaler.update(scalar_tensor(kNaN, kFloat32)); }, "new_scale");
  EXPECT_EQ(scaler.get_scale(), 65536.0);
}

TEST(GradScaler, GrowthIntervalZeroNeverGrows) {
  GradScalerOptions o;
  o.init_scale = 8;
  o.growth_interval = 0;
  GradScaler scaler(o);
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  for (int i = 0; i < 5; ++i) iterate(scaler, opt, w, {0.5});
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 5);
  // Lowering the interval below the tracker: equality never matches again until an overflow.
  scaler.set_growth_interval(3);
  for (int i = 0; i < 5; ++i) iterate(scaler, opt, w, {0.5});
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 10);
}

// What state_dict() writes for a scaler that never grows (growth_interval <= 0, or a tracker
// past a lowered interval) loads back, as in PyTorch; the check refused it ("'growth_interval'
// must be an integer >= 1, got 0"), so a run with such a scaler could not be resumed.
TEST(GradScaler, StateDictOfANeverGrowingScalerLoadsBack) {
  for (const int64_t interval : {int64_t{0}, int64_t{-1}}) {
    GradScalerOptions o;
    o.init_scale = 8;
    o.growth_interval = interval;
    GradScaler scaler(o);
    Tensor w = leaf({1.0});
    optim::SGD opt({w}, 0.1);
    for (int i = 0; i < 3; ++i) iterate(scaler, opt, w, {0.5});
    const nlohmann::json sd = scaler.state_dict();
    EXPECT_EQ(sd, (nlohmann::json{{"scale", 8.0},
                                  {"growth_factor", 2.0},
                                  {"backoff_factor", 0.5},
                                  {"growth_interval", interval},
                                  {"_growth_tracker", 3}}));
    GradScaler resumed;
    resumed.load_state_dict(nlohmann::json::parse(sd.dump()));
    EXPECT_EQ(resumed.state_dict(), sd);
    Tensor w2 = leaf({1.0});
    optim::SGD opt2({w2}, 0.1);
    iterate(resumed, opt2, w2, {0.5});
    EXPECT_EQ(resumed.get_scale(), 8.0);  // still never grows
    EXPECT_EQ(resumed.get_growth_tracker(), 4);
  }
  // A tracker past a lowered interval.
  GradScaler lowered(small_options());
  nlohmann::json sd = lowered.state_dict();
  sd["_growth_tracker"] = 10;
  lowered.load_state_dict(sd);
  EXPECT_EQ(lowered.get_growth_tracker(), 10);
  // The tracker is int32: a value it cannot hold, or a negative one, is refused, naming it.
  GradScaler other(small_options());
  sd["growth_interval"] = int64_t{1} << 40;
  sd["_growth_tracker"] = int64_t{3000000000};
  expect_error([&] { other.load_state_dict(sd); },
               "state dict key '_growth_tracker' must be an integer in [0, 2147483647], got "
               "3000000000");
  sd["_growth_tracker"] = -1;
  expect_error([&] { other.load_state_dict(sd); },
               "state dict key '_growth_tracker' must be an integer in [0, 2147483647], got -1");
  EXPECT_EQ(other.state_dict(), GradScaler(small_options()).state_dict());  // unchanged
}

TEST(GradScaler, GrowthRefusedWhenNotFiniteAndNoFloor) {
  GradScalerOptions o;
  o.init_scale = std::ldexp(1.0, 127);
  o.growth_interval = 1;
  GradScaler big(o);
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  iterate(big, opt, w, {std::ldexp(1.0, -200)});
  EXPECT_EQ(big.get_scale(), std::ldexp(1.0, 127));  // 2^128 is +inf in float32
  EXPECT_EQ(big.get_growth_tracker(), 0);            // reset although growth was refused

  o.init_scale = std::ldexp(1.0, -148);  // two steps above the smallest fp32 subnormal
  GradScaler tiny(o);
  iterate(tiny, opt, w, {kInf});
  EXPECT_EQ(tiny.get_scale(), std::ldexp(1.0, -149));
  iterate(tiny, opt, w, {kInf});
  EXPECT_EQ(tiny.get_scale(), 0.0);  // 2^-150 rounds to even: zero, no floor
}

TEST(GradScaler, MinAndMaxScaleExtension) {
  GradScalerOptions o = small_options();
  o.growth_interval = 1;
  o.min_scale = 2.0;
  o.max_scale = 32.0;
  GradScaler scaler(o);
  EXPECT_EQ(scaler.min_scale(), 2.0);
  EXPECT_EQ(scaler.max_scale(), 32.0);
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  const std::vector<std::pair<double, double>> steps = {{kInf, 4}, {kInf, 2}, {kInf, 2}, {0.5, 4},
                                                        {0.5, 8},  {0.5, 16}, {0.5, 32}, {0.5, 32}};
  for (const auto& [g, expected] : steps) {
    iterate(scaler, opt, w, {g});
    EXPECT_EQ(scaler.get_scale(), expected);
  }
  scaler.update(1000.0);  // an explicit scale is not clamped
  EXPECT_EQ(scaler.get_scale(), 1000.0);
  EXPECT_EQ(scaler.skipped_steps(), 3);
}

TEST(GradScaler, StateDictRoundTrip) {
  GradScaler scaler(small_options());
  Tensor w = leaf({1.0});
  optim::SGD opt({w}, 0.1);
  // Before the first scale(): the init values.
  EXPECT_EQ(scaler.state_dict(), (nlohmann::json{{"scale", 8.0},
                                                 {"growth_factor", 2.0},
                                                 {"backoff_factor", 0.5},
                                                 {"growth_interval", 3},
                                                 {"_growth_tracker", 0}}));
  iterate(scaler, opt, w, {0.5});
  iterate(scaler, opt, w, {kInf});
  iterate(scaler, opt, w, {0.5});
  iterate(scaler, opt, w, {0.5});
  const nlohmann::json sd = scaler.state_dict();
  ASSERT_EQ(sd.size(), 5u);
  EXPECT_EQ(sd["scale"].get<double>(), 4.0);
  EXPECT_EQ(sd["_growth_tracker"].get<int64_t>(), 2);
  EXPECT_TRUE(sd["growth_interval"].is_number_integer());

  // Through text, into a scaler with other settings, before and after its first scale().
  const nlohmann::json parsed = nlohmann::json::parse(sd.dump());
  GradScaler lazy, eager;
  lazy.load_state_dict(parsed);
  EXPECT_EQ(lazy.state_dict(), sd);
  eager.scale(scalar_tensor(1.0));
  eager.load_state_dict(parsed);
  EXPECT_EQ(eager.state_dict(), sd);
  // Both continue exactly like the original: the next clean step grows 4 -> 8.
  Tensor w2 = leaf({1.0}), w3 = leaf({1.0});
  optim::SGD opt2({w2}, 0.1), opt3({w3}, 0.1);
  iterate(scaler, opt, w, {0.5});
  iterate(lazy, opt2, w2, {0.5});
  iterate(eager, opt3, w3, {0.5});
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(lazy.state_dict(), scaler.state_dict());
  EXPECT_EQ(eager.state_dict(), scaler.state_dict());

  expect_error([&] { lazy.load_state_dict(nlohmann::json::object()); },
               "The source state dict is empty, possibly because it was saved from a disabled "
               "instance of GradScaler.");
  nlohmann::json missing = sd;
  missing.erase("_growth_tracker");
  expect_error([&] { lazy.load_state_dict(missing); }, "_growth_tracker");
  nlohmann::json bad = sd;
  bad["scale"] = "big";
  expect_error([&] { lazy.load_state_dict(bad); }, "scale");
  EXPECT_EQ(lazy.state_dict(), scaler.state_dict());  // unchanged by the failed loads
}

// ---- clipping order (docs/grad_scaler.md) ----

// A Linear(4, 3) with fixed weights and an MSE loss on fixed data.
struct Problem {
  std::shared_ptr<nn::Linear> model;
  Tensor x, y;
  explicit Problem(DType dt) {
    Generator g(7);
    model = std::make_shared<nn::Linear>(4, 3, true, dt, &g);
    x = uniform({8, 4}, -2.0, 2.0, dt, &g);
    y = uniform({8, 3}, -1.0, 1.0, dt, &g);
  }
  Tensor loss(int64_t begin, int64_t end) const {
    return mse_loss(model->forward(x.slice(0, begin, end)), y.slice(0, begin, end));
  }
};

TEST(GradScaler, UnscaleClipStepMatchesClippingTrueGradients) {
  Problem plain(kFloat32), scaled(kFloat32);
  optim::SGD opt_plain(plain.model->parameters(), 0.1);
  optim::SGD opt_scaled(scaled.model->parameters(), 0.1);
  GradScalerOptions o;
  o.init_scale = 1024;
  o.growth_interval = 2;
  GradScaler scaler(o);
  for (int it = 0; it < 4; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    opt_plain.zero_grad();
    plain.loss(0, 8).backward();
    Tensor n_plain = nn::utils::clip_grad_norm_(opt_plain.parameters(), 0.05);
    opt_plain.step();

    opt_scaled.zero_grad();
    scaler.scale(scaled.loss(0, 8)).backward();
    scaler.unscale_(opt_scaled);
    Tensor n_scaled = nn::utils::clip_grad_norm_(opt_scaled.parameters(), 0.05);
    EXPECT_TRUE(scaler.step(opt_scaled));
    scaler.update();

    // Scaling by a power of two commutes with every rounding: bit-identical.
    EXPECT_EQ(n_scaled.item(), n_plain.item());
    EXPECT_GT(n_plain.item(), 0.05);  // the clip was active
    const auto pp = opt_plain.parameters(), ps = opt_scaled.parameters();
    for (size_t i = 0; i < pp.size(); ++i)
      EXPECT_EQ(ps[i].to_vector<float>(), pp[i].to_vector<float>()) << "parameter " << i;
  }
  EXPECT_EQ(scaler.get_scale(), 4096.0);  // grew twice in four clean steps
}

TEST(GradScaler, ClippingWithoutUnscaleClipsTheScaledGradients) {
  // The mistake docs/grad_scaler.md warns about: clipping scaled grads gives a different update.
  Problem plain(kFloat32), scaled(kFloat32);
  optim::SGD opt_plain(plain.model->parameters(), 0.1);
  optim::SGD opt_scaled(scaled.model->parameters(), 0.1);
  GradScaler scaler;
  plain.loss(0, 8).backward();
  nn::utils::clip_grad_norm_(opt_plain.parameters(), 0.05);
  opt_plain.step();
  scaler.scale(scaled.loss(0, 8)).backward();
  nn::utils::clip_grad_norm_(opt_scaled.parameters(), 0.05);  // too early
  scaler.step(opt_scaled);
  scaler.update();
  EXPECT_NE(opt_scaled.parameters()[0].to_vector<float>(),
            opt_plain.parameters()[0].to_vector<float>());
}

// ---- gradient accumulation (docs/grad_scaler.md) ----

void accumulation_matches_big_batch(DType dt, double tol) {
  constexpr int kMicro = 4;
  Problem big(dt), acc(dt);
  optim::SGD opt_big(big.model->parameters(), 0.2);
  optim::SGD opt_acc(acc.model->parameters(), 0.2);
  GradScaler scaler;  // defaults: scale 65536
  for (int it = 0; it < 3; ++it) {
    opt_big.zero_grad();
    big.loss(0, 8).backward();
    opt_big.step();

    opt_acc.zero_grad();
    for (int m = 0; m < kMicro; ++m) {
      Tensor loss = div(acc.loss(2 * m, 2 * m + 2), static_cast<double>(kMicro));
      Tensor s = scaler.scale(loss);
      EXPECT_EQ(s.item(), loss.item() * 65536.0);  // the same scale for every micro-batch
      s.backward();
    }
    EXPECT_TRUE(scaler.step(opt_acc));
    scaler.update();
  }
  EXPECT_EQ(scaler.get_growth_tracker(), 3);  // one update per optimizer step
  const auto pb = opt_big.parameters(), pa = opt_acc.parameters();
  for (size_t i = 0; i < pb.size(); ++i) {
    const auto vb = pb[i].to_vector<double>(), va = pa[i].to_vector<double>();
    for (size_t j = 0; j < vb.size(); ++j) EXPECT_NEAR(va[j], vb[j], tol) << i << "," << j;
  }
}

TEST(GradScaler, AccumulationOverMicroBatchesMatchesOneBigBatchF64) {
  accumulation_matches_big_batch(kFloat64, 1e-13);
}

TEST(GradScaler, AccumulationOverMicroBatchesMatchesOneBigBatchF32) {
  accumulation_matches_big_batch(kFloat32, 2e-6);
}

TEST(GradScaler, OverflowInOneMicroBatchSkipsTheWholeStep) {
  GradScaler scaler(small_options());
  Tensor w = leaf({1.0, 2.0});
  optim::SGD opt({w}, 1.0);
  scaler.scale(linear_loss(w, {0.5, 0.5})).backward();
  scaler.scale(linear_loss(w, {kInf, 0.5})).backward();
  scaler.scale(linear_loss(w, {0.5, 0.5})).backward();
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(scaler.get_scale(), 4.0);
}

// ---- the unscale kernel ----

TEST(AmpUnscaleKernel, EveryDtypeMultipliesOnceAndRoundsOnce) {
  const std::vector<double> vals = {3.0, -0.7, 1e-3, 65504.0, -2.5e-5, 0.0, 1234.5678};
  const float inv = static_cast<float>(1.0 / 3.0);  // inexact: exercises the rounding
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    Tensor g = tensor_of(vals, {7}, dt);
    const auto in = g.to_vector<double>();
    Tensor found = scalar_tensor(0.0, kFloat32);
    foreach_non_finite_check_and_unscale_({g}, found, scalar_tensor(inv, kFloat32));
    EXPECT_EQ(found.item(), 0.0);
    const auto out = g.to_vector<double>();
    for (size_t i = 0; i < in.size(); ++i) {
      // The product in the arithmetic type (double for f64, float otherwise), rounded once.
      const double prod = dt == kFloat64 ? in[i] * static_cast<double>(inv)
                                         : static_cast<double>(static_cast<float>(in[i]) * inv);
      const double expected = tensor_of({prod}, {1}, dt).item();
      EXPECT_EQ(out[i], expected) << i;
    }
  }
}

TEST(AmpUnscaleKernel, NonFiniteValuesAreFlaggedAndStillMultiplied) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    Tensor g = tensor_of({2.0, kInf, -kInf, kNaN, -4.0}, {5}, dt);
    Tensor found = scalar_tensor(0.0, kFloat32);
    foreach_non_finite_check_and_unscale_({g}, found, scalar_tensor(0.5, kFloat32));
    EXPECT_EQ(found.item(), 1.0);
    const auto v = g.to_vector<double>();
    EXPECT_EQ(v[0], 1.0);
    EXPECT_EQ(v[1], kInf);
    EXPECT_EQ(v[2], -kInf);
    EXPECT_TRUE(std::isnan(v[3]));
    EXPECT_EQ(v[4], -2.0);
  }
}

TEST(AmpUnscaleKernel, LargeTensorsParallelPathAndFlagNeverCleared) {
  const int64_t n = 200003;  // several chunks, not a multiple of the block size
  Tensor g = full({n}, 6.0, kFloat32);
  Tensor h = full({n}, 6.0, kBFloat16);
  g.data<float>()[n - 2] = std::numeric_limits<float>::infinity();
  Tensor found = scalar_tensor(0.0, kFloat32);
  foreach_non_finite_check_and_unscale_({g}, found, scalar_tensor(0.25, kFloat32));
  EXPECT_EQ(found.item(), 1.0);
  const auto v = g.to_vector<float>();
  for (int64_t i = 0; i < n; ++i)
    if (i != n - 2) ASSERT_EQ(v[i], 1.5f) << i;
  // A clean list leaves a raised flag raised (the caller zeroes it).
  foreach_non_finite_check_and_unscale_({h}, found, scalar_tensor(0.25, kFloat32));
  EXPECT_EQ(found.item(), 1.0);
  EXPECT_EQ(h.to_vector<float>()[n - 1], 1.5f);
  // A clean list from zero stays zero.
  Tensor found2 = scalar_tensor(0.0, kFloat32);
  foreach_non_finite_check_and_unscale_({h}, found2, scalar_tensor(2.0, kFloat32));
  EXPECT_EQ(found2.item(), 0.0);
  EXPECT_EQ(h.to_vector<float>()[12345], 3.0f);
}

TEST(AmpUnscaleKernel, InvScaleOneOnlyChecksAndStridedGradsWork) {
  Tensor g = tensor_of({1.0, 2.0, 3.0, 4.0, 5.0, kNaN}, {2, 3}, kFloat32);
  Tensor found = scalar_tensor(0.0, kFloat32);
  foreach_non_finite_check_and_unscale_({g}, found, scalar_tensor(1.0, kFloat32));
  EXPECT_EQ(found.item(), 1.0);
  EXPECT_EQ(g.to_vector<float>()[4], 5.0f);

  // A transposed view of a larger buffer: only the view's elements change.
  Tensor base = tensor_of({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, kBFloat16);
  Tensor view = base.slice(1, 0, 4, 2).t();  // shape (2, 2), strides (2, 4)
  ASSERT_FALSE(view.is_contiguous());
  Tensor f2 = scalar_tensor(0.0, kFloat32);
  foreach_non_finite_check_and_unscale_({view}, f2, scalar_tensor(0.5, kFloat32));
  EXPECT_EQ(f2.item(), 0.0);
  EXPECT_EQ(base.to_vector<double>(), (std::vector<double>{0.5, 2, 1.5, 4, 2.5, 6, 3.5, 8}));
}

TEST(AmpUnscaleKernel, PreconditionsAreChecked) {
  Tensor f32 = tensor_of({1.0}, {1}, kFloat32);
  Tensor f64 = tensor_of({1.0}, {1}, kFloat64);
  Tensor found = scalar_tensor(0.0, kFloat32);
  Tensor inv = scalar_tensor(0.5, kFloat32);
  foreach_non_finite_check_and_unscale_({}, found, inv);  // empty list: no-op
  expect_error(
      [&] {
        foreach_non_finite_check_and_unscale_({f32, f64}, found, inv);
      },
      "share one dtype");
  expect_error(
      [&] { foreach_non_finite_check_and_unscale_({f32}, scalar_tensor(0.0, kFloat64), inv); },
      "found_inf must be a 1-element float32");
  expect_error([&] { foreach_non_finite_check_and_unscale_({f32}, found, full({2}, 0.5)); },
               "inv_scale");
  expect_error([&] { foreach_non_finite_check_and_unscale_({f32.expand({3})}, found, inv); },
               "overlapping");
  expect_error(
      [&] { foreach_non_finite_check_and_unscale_({tensor_of({1}, {1}, kInt32)}, found, inv); },
      "floating");
}

}  // namespace
}  // namespace mantissa::amp
