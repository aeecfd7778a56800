// The Trainer loop: Lightning's hook order, accumulation, limits, skipping, clipping, LR
// schedulers on skipped steps, fp16 loss scaling on the CPU, errors, and init_module memory.
#include <gtest/gtest.h>

#include "mantissa/core/cuda.h"

#include <algorithm>

#include <cmath>

#include "mantissa/core/default_dtype.h"
#include "mantissa/core/warning.h"
#include "mantissa/train/precisions/mixed_precision.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::LambdaCallback;
using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

using testing::flat_params;

using mantissa::testing::error_of;
using mantissa::testing::expect_error;

TEST(Trainer, HooksRunInLightningsOrderCallbacksFirst) {
  std::vector<std::string> events;
  TrainerOptions o = quiet_options();
  o.seed = 1;
  o.callbacks.push_back(std::make_shared<testing::RecordingCallback>(&events));
  Trainer trainer(o);
  TinyModule module(TinyOptions{.events = &events});
  data::DataLoader train(testing::tiny_dataset(16), 8);  // 2 batches
  data::DataLoader val(testing::tiny_dataset(8, 5), 8);  // 1 batch
  trainer.fit(module, train, &val);

  const std::vector<std::string> batch = {"callback:on_train_batch_start",
                                          "module:on_train_batch_start",
                                          "module:training_step",
                                          "callback:on_before_zero_grad",
                                          "module:on_before_zero_grad",
                                          "callback:on_before_backward",
                                          "module:on_before_backward",
                                          "callback:on_after_backward",
                                          "module:on_after_backward",
                                          "callback:on_before_optimizer_step",
                                          "module:on_before_optimizer_step",
                                          "callback:on_train_batch_end",
                                          "module:on_train_batch_end"};
  std::vector<std::string> want = {"module:configure_model",        "module:configure_optimizers",
                                   "callback:on_fit_start",         "module:on_fit_start",
                                   "callback:on_train_start",       "module:on_train_start",
                                   "callback:on_train_epoch_start", "module:on_train_epoch_start"};
  want.insert(want.end(), batch.begin(), batch.end());
  want.insert(want.end(), batch.begin(), batch.end());
  for (const char* h : {"on_validation_start", "on_validation_epoch_start"}) {
    want.push_back(std::string("callback:") + h);
    want.push_back(std::string("module:") + h);
  }
  want.push_back("module:validation_step");
  for (const char* h : {"on_validation_epoch_end", "on_validation_end", "on_train_epoch_end",
                        "on_train_end", "on_fit_end"}) {
    want.push_back(std::string("callback:") + h);
    want.push_back(std::string("module:") + h);
  }
  EXPECT_EQ(events, want);
  EXPECT_EQ(trainer.global_step(), 2);
  EXPECT_EQ(trainer.current_epoch(), 1);
  EXPECT_TRUE(trainer.callback_metrics().count("val_loss"));
}

// Gradients of 4 accumulated batches of 8 (mean losses) equal those of one batch of 32.
TEST(Trainer, AccumulatedGradientsMatchTheBigBatch) {
  auto grads_of_first_step = [](int64_t batch_size, int64_t accumulate) {
    TrainerOptions o = quiet_options();
    o.seed = 3;
    o.accumulate_grad_batches = accumulate;
    o.max_steps = 1;
    std::vector<std::vector<float>> grads;
    auto cb = std::make_shared<LambdaCallback>();
    cb->before_optimizer_step = [&](Trainer& t) {
      for (const auto& p : t.module()->parameters()) {
        grads.push_back(p.grad().contiguous().to_vector<float>());
      }
    };
    o.callbacks.push_back(cb);
    Trainer trainer(o);
    TinyModule module;
    data::DataLoader loader(testing::tiny_dataset(32), batch_size);
    trainer.fit(module, loader);
    EXPECT_EQ(trainer.global_step(), 1);
    EXPECT_EQ(trainer.step_losses().size(), 1u);
    return grads;
  };
  const auto big = grads_of_first_step(32, 1);
  const auto acc = grads_of_first_step(8, 4);
  ASSERT_EQ(big.size(), acc.size());
  for (size_t i = 0; i < big.size(); ++i) {
    ASSERT_EQ(big[i].size(), acc[i].size());
    for (size_t j = 0; j < big[i].size(); ++j) EXPECT_NEAR(big[i][j], acc[i][j], 2e-6);
  }
}

TEST(Trainer, AccumulationStepsOnWindowEndsAndTheLastBatch) {
  TrainerOptions o = quiet_options();
  o.accumulate_grad_batches = 3;
  o.max_epochs = 2;
  Trainer trainer(o);
  TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(32), 4);  // 8 batches: steps after 3, 6, 8
  trainer.fit(module, loader);
  EXPECT_EQ(trainer.global_step(), 6);
}

// A window longer than the epoch: one step per epoch over all its batches, with a warning that
// the loss is still divided by the setting (the gradient shrinks); a window that fits says nothing.
TEST(Trainer, AccumulationBeyondTheEpochWarns) {
  auto run = [](int64_t accumulate) {
    TrainerOptions o = quiet_options();
    o.accumulate_grad_batches = accumulate;
    Trainer trainer(o);
    TinyModule module;
    data::DataLoader loader(testing::tiny_dataset(32), 4);  // 8 batches
    ::testing::internal::CaptureStderr();
    trainer.fit(module, loader);
    return std::make_pair(::testing::internal::GetCapturedStderr(), trainer.global_step());
  };
  const auto [quiet, steps8] = run(8);
  EXPECT_EQ(quiet.find("accumulate_grad_batches"), std::string::npos) << quiet;
  EXPECT_EQ(steps8, 1);
  const auto [warned, steps11] = run(11);
  EXPECT_NE(warned.find("accumulate_grad_batches 11 exceeds the 8 training batches of an epoch"),
            std::string::npos)
      << warned;
  EXPECT_EQ(steps11, 1);
}

TEST(Trainer, MaxStepsAndLimitTrainBatches) {
  data::DataLoader loader(testing::tiny_dataset(32), 4);  // 8 batches
  {
    TrainerOptions o = quiet_options();
    o.max_epochs = 2;
    o.limit_train_batches = BatchLimit::batches(3);
    Trainer trainer(o);
    TinyModule module;
    trainer.fit(module, loader);
    EXPECT_EQ(trainer.global_step(), 6);
    EXPECT_EQ(trainer.current_epoch(), 2);
  }
  {
    TrainerOptions o = quiet_options();
    o.max_epochs = 10;
    o.max_steps = 5;
    o.limit_train_batches = BatchLimit::fraction(0.5);  // 4 batches
    Trainer trainer(o);
    TinyModule module;
    trainer.fit(module, loader);
    EXPECT_EQ(trainer.global_step(), 5);
    EXPECT_EQ(trainer.current_epoch(), 2);  // stopped one batch into the second epoch
    EXPECT_EQ(trainer.step_losses().size(), 5u);
  }
  {
    // No batch per epoch and no epoch limit: fit returns having trained nothing (it looped over
    // empty epochs for ever, waiting for max_steps).
    TrainerOptions o = quiet_options();
    o.max_epochs = -1;
    o.max_steps = 5;
    o.limit_train_batches = BatchLimit::batches(0);
    Trainer trainer(o);
    TinyModule module;
    trainer.fit(module, loader);
    EXPECT_EQ(trainer.global_step(), 0);
    EXPECT_TRUE(trainer.step_losses().empty());
  }
  EXPECT_EQ(BatchLimit::fraction(0.25).resolve(10, "limit_train_batches", "train"), 2);
  EXPECT_EQ(BatchLimit::fraction(0.0).resolve(8, "limit_train_batches", "train"), 0);
  EXPECT_EQ(BatchLimit::fraction(0.5).resolve(0, "limit_train_batches", "train"), 0);  // empty
  EXPECT_EQ(BatchLimit::batches(20).resolve(8, "limit_train_batches", "train"), 8);
  EXPECT_EQ(BatchLimit::fraction(0.01).resolve_interval(8), 1);  // val_check_interval: >= 1
  EXPECT_THROW(BatchLimit::fraction(1.5), Error);
}

// A fraction that leaves no batch is Lightning's error, naming the setting and the smallest
// fraction that works (not quietly raised to one batch: 0.01 of 8 batches running 1).
TEST(Trainer, AFractionThatLeavesNoBatchIsRefusedBeforeTraining) {
  expect_error([] { BatchLimit::fraction(0.01).resolve(8, "limit_train_batches", "train"); },
               {"You requested to check 0.01 of the train dataloader but 0.01 * 8 < 1",
                "Please increase the limit_train_batches argument",
                "Try at least limit_train_batches=0.125"});
  // 1/3 printed as 0.333333 would leave none: the suggestion rounds up, and works.
  expect_error([] { BatchLimit::fraction(0.2).resolve(3, "--limit-val-batches", "val"); },
               "Try at least --limit-val-batches=0.334");
  EXPECT_EQ(BatchLimit::fraction(0.334).resolve(3, "--limit-val-batches", "val"), 1);
  expect_error([] { BatchLimit::fraction(0.5).resolve(1, "limit_test_batches", "test"); },
               "Try at least limit_test_batches=1.0");
  for (int64_t total = 1; total <= 3000; ++total) {
    std::string suggested;
    try {
      BatchLimit::fraction(0.9 / static_cast<double>(total)).resolve(total, "x", "val");
      ADD_FAILURE() << total;
    } catch (const Error& e) {
      const std::string m = e.what();
      suggested = m.substr(m.find("x=") + 2, m.find(' ', m.find("x=")) - m.find("x=") - 2);
    }
    ASSERT_EQ(BatchLimit::fraction(std::stod(suggested)).resolve(total, "x", "val"), 1)
        << total << " " << suggested;
  }

  data::DataLoader train(testing::tiny_dataset(32), 4);   // 8 batches
  data::DataLoader val(testing::tiny_dataset(40, 5), 2);  // 20 batches
  for (const bool bad_val : {false, true}) {
    std::vector<std::string> events;
    TrainerOptions o = quiet_options();
    o.max_epochs = 1;
    (bad_val ? o.limit_val_batches : o.limit_train_batches) = BatchLimit::fraction(0.01);
    Trainer trainer(o);
    TinyModule module(TinyOptions{.events = &events});
    const std::string what = bad_val ? "0.01 of the val dataloader but 0.01 * 20 < 1"
                                     : "0.01 of the train dataloader but 0.01 * 8 < 1";
    const std::string fix = bad_val ? "limit_val_batches=0.05" : "limit_train_batches=0.125";
    expect_error([&] { trainer.fit(module, train, &val); }, {what, fix});
    EXPECT_EQ(trainer.global_step(), 0);
    EXPECT_TRUE(events.empty());  // refused before configure_model or any hook
  }
  {
    TrainerOptions o = quiet_options();
    o.limit_test_batches = BatchLimit::fraction(0.01);
    o.limit_val_batches = BatchLimit::fraction(0.04);
    Trainer trainer(o);
    TinyModule module;
    expect_error([&] { trainer.test(module, val); },
                 {"0.01 of the test dataloader", "limit_test_batches=0.05"});
    expect_error([&] { trainer.validate(module, val); },
                 {"0.04 of the val dataloader but 0.04 * 20 < 1", "limit_val_batches=0.05"});
  }
}

// max_steps ending an epoch early validates there, once, so the last validation metrics
// describe the final weights.
TEST(Trainer, MaxStepsEndingAnEpochEarlyValidates) {
  std::vector<std::string> events;
  TrainerOptions o = quiet_options();
  o.max_epochs = 3;
  o.max_steps = 3;
  o.callbacks.push_back(std::make_shared<testing::RecordingCallback>(&events));
  Trainer trainer(o);
  TinyModule module;
  data::DataLoader train(testing::tiny_dataset(32), 4);  // 8 batches
  data::DataLoader val(testing::tiny_dataset(8, 5), 8);
  trainer.fit(module, train, &val);
  EXPECT_EQ(trainer.global_step(), 3);
  EXPECT_EQ(std::count(events.begin(), events.end(), "callback:on_validation_end"), 1);
  // The validation came after the third step and before the epoch ended.
  const auto last_batch = std::find(events.rbegin(), events.rend(), "callback:on_train_batch_end");
  const auto validation = std::find(events.rbegin(), events.rend(), "callback:on_validation_end");
  EXPECT_LT(validation - events.rbegin(), last_batch - events.rbegin());
  EXPECT_TRUE(trainer.callback_metrics().count("val_loss"));
}

TEST(Trainer, UndefinedLossSkipsTheStep) {
  TrainerOptions o = quiet_options();
  o.seed = 4;
  std::vector<std::vector<float>> before, after;
  auto cb = std::make_shared<LambdaCallback>();
  int backward_calls = 0;
  cb->before_backward = [&](Trainer&, const Tensor&) { ++backward_calls; };
  o.callbacks.push_back(cb);
  Trainer trainer(o);
  TinyModule module(TinyOptions{.skip = [](int64_t step) { return step == 1; }});
  cb->batch_end = [&](Trainer& t, int64_t) { after.push_back(flat_params(*t.module())); };
  data::DataLoader loader(testing::tiny_dataset(24), 8);  // 3 batches
  trainer.fit(module, loader);
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(backward_calls, 2);
  EXPECT_EQ(after[1], after[0]);  // the skipped step left the weights alone
  EXPECT_NE(after[2], after[1]);
  ASSERT_EQ(trainer.step_losses().size(), 3u);
  EXPECT_TRUE(std::isnan(trainer.step_losses()[1]));
}

// SGD that counts how the Trainer asked for each step.
class CountingSgd : public optim::SGD {
 public:
  using optim::SGD::SGD;
  void step() override {
    ++plain;
    optim::SGD::step();
  }
  void step_with_finite_grads() override {
    ++known_finite;
    optim::SGD::step();
  }
  int plain = 0, known_finite = 0;
};

// Clipping by norm computes the norm of every gradient: finite, it proves them all finite, so
// the step is asked for as step_with_finite_grads (the 8-bit optimizers then skip their own
// scan); clipping by value, or none, proves nothing.
TEST(Trainer, AFiniteClippingNormSparesTheStepItsScan) {
  for (const char* algo : {"norm", "value", ""}) {
    TrainerOptions o = quiet_options();
    o.max_steps = 3;
    if (*algo != 0) {
      o.gradient_clip_val = 1.0;
      o.gradient_clip_algorithm = algo;
    }
    std::shared_ptr<CountingSgd> sgd;
    TinyOptions t;
    t.optimizer = [&](std::vector<Tensor> params) {
      sgd = std::make_shared<CountingSgd>(std::move(params), 0.1);
      return sgd;
    };
    Trainer trainer(o);
    TinyModule module(t);
    data::DataLoader loader(testing::tiny_dataset(48), 16);
    trainer.fit(module, loader);
    ASSERT_NE(sgd, nullptr);
    EXPECT_EQ(sgd->known_finite, std::string(algo) == "norm" ? 3 : 0) << algo;
    EXPECT_EQ(sgd->plain, std::string(algo) == "norm" ? 0 : 3) << algo;
  }
}

// A NaN gradient under norm clipping makes the norm NaN: the 8-bit step still scans, refuses
// and the run stops naming the step.
TEST(Trainer, ANonFiniteClippingNormLeavesTheScanToTheStep) {
  TrainerOptions o = quiet_options();
  o.max_steps = 3;
  o.gradient_clip_val = 1.0;
  Trainer trainer(o);
  TinyModule module(
      TinyOptions{.adamw8bit = true, .nan_gradient = [](int64_t s) { return s == 1; }});
  data::DataLoader loader(testing::tiny_dataset(48), 16);
  mantissa::testing::expect_error([&] { trainer.fit(module, loader); }, "gradient");
  EXPECT_EQ(trainer.global_step(), 1);
}

// With SGD(lr=1) the update is minus the clipped gradient.
TEST(Trainer, ClipsGradientsByNormAndByValue) {
  for (const char* algo : {"norm", "value"}) {
    TrainerOptions o = quiet_options();
    o.seed = 5;
    o.max_steps = 1;
    o.gradient_clip_val = 0.01;
    o.gradient_clip_algorithm = algo;
    std::vector<float> start;
    auto cb = std::make_shared<LambdaCallback>();
    cb->before_optimizer_step = [&](Trainer& t) { start = flat_params(*t.module()); };
    o.callbacks.push_back(cb);
    Trainer trainer(o);
    TinyModule module(TinyOptions{.lr = 1.0});
    data::DataLoader loader(testing::tiny_dataset(16), 16);
    trainer.fit(module, loader);
    const std::vector<float> end = flat_params(module);
    double norm2 = 0, max_abs = 0;
    for (size_t i = 0; i < end.size(); ++i) {
      const double d = static_cast<double>(start[i]) - end[i];
      norm2 += d * d;
      max_abs = std::max(max_abs, std::abs(d));
    }
    if (std::string(algo) == "norm") {
      EXPECT_NEAR(std::sqrt(norm2), 0.01, 1e-5);
    } else {
      EXPECT_NEAR(max_abs, 0.01, 1e-6);
      EXPECT_GT(std::sqrt(norm2), 0.011);  // several elements sit at the bound
    }
  }
}

// fp16 on the CPU: overflowing steps are skipped by the scaler, the scale backs off, the hooks
// see the scaled loss and unscaled gradients, and step-interval schedulers keep stepping.
TEST(Trainer, Fp16MixedSkipsOverflowAndSchedulersStillStep) {
  TrainerOptions o = quiet_options("16-mixed");
  o.seed = 6;
  o.max_epochs = 1;
  std::vector<double> backward_losses;
  std::vector<amp::OptState> stages;
  auto cb = std::make_shared<LambdaCallback>();
  cb->before_backward = [&](Trainer&, const Tensor& l) { backward_losses.push_back(l.item()); };
  cb->before_optimizer_step = [&](Trainer& t) {
    stages.push_back(t.precision_plugin().scaler()->stage(*t.optimizer()));
  };
  std::vector<std::vector<float>> after;
  cb->batch_end = [&](Trainer& t, int64_t) { after.push_back(flat_params(*t.module())); };
  o.callbacks.push_back(cb);
  Trainer trainer(o);
  TinyOptions to;
  to.loss_multiplier = [](int64_t step) { return step < 2 ? 1e6 : 1.0; };
  to.schedulers = [](optim::Optimizer& opt) {
    return std::vector<LRSchedulerConfig>{
        {std::make_shared<optim::StepLR>(opt, 1, 0.5), "step", 1}};
  };
  TinyModule module(to);
  const std::vector<float> initial = [&] {
    module.configure_model();
    return flat_params(module);
  }();
  data::DataLoader loader(testing::tiny_dataset(32), 8);  // 4 steps
  trainer.fit(module, loader);
  amp::GradScaler* scaler = trainer.precision_plugin().scaler();
  ASSERT_NE(scaler, nullptr);
  EXPECT_EQ(scaler->skipped_steps(), 2);
  EXPECT_EQ(scaler->get_scale(), 16384.0);  // 65536 backed off twice
  EXPECT_EQ(after[0], initial);
  EXPECT_EQ(after[1], initial);
  EXPECT_NE(after[2], initial);
  EXPECT_DOUBLE_EQ(trainer.optimizer()->lr(), 0.1 * std::pow(0.5, 4));  // 4 steps, 2 skipped
  ASSERT_EQ(backward_losses.size(), 4u);
  EXPECT_NEAR(backward_losses[3] / 16384.0, trainer.step_losses()[3], 1e-3);  // scaled loss
  for (auto s : stages) EXPECT_EQ(s, amp::OptState::kUnscaled);  // unscaled before the hook
}

// Lightning's MixedPrecision (docs/trainer.md): update() runs once per optimizer step, never on a
// skipped training_step, and accumulated batches only scale and backward.
TEST(Trainer, Fp16MixedUpdatesTheScalerOncePerRealStep) {
  auto growth_after = [](int64_t accumulate, std::function<bool(int64_t)> skip) {
    TrainerOptions o = quiet_options("16-mixed");
    o.seed = 9;
    o.accumulate_grad_batches = accumulate;
    Trainer trainer(o);
    TinyModule module(TinyOptions{.skip = std::move(skip)});
    data::DataLoader loader(testing::tiny_dataset(32), 4);  // 8 batches
    trainer.fit(module, loader);
    return trainer.precision_plugin().scaler()->get_growth_tracker();
  };
  EXPECT_EQ(growth_after(1, nullptr), 8);
  EXPECT_EQ(growth_after(1, [](int64_t step) { return step == 3 || step == 5; }), 6);
  EXPECT_EQ(growth_after(2, nullptr), 4);
  EXPECT_EQ(growth_after(4, nullptr), 2);
}

TEST(Trainer, NonFiniteLossWithoutScalerIsAClearError) {
  TrainerOptions o = quiet_options("32-true");
  Trainer trainer(o);
  TinyModule module(TinyOptions{.loss_multiplier = [](int64_t s) { return s == 2 ? NAN : 1.0; }});
  data::DataLoader loader(testing::tiny_dataset(32), 8);
  const std::string msg = error_of([&] { trainer.fit(module, loader); });
  // The third optimizer step (two done), 1-based throughout.
  EXPECT_NE(msg.find("the loss became NaN in optimizer step 3 (epoch 1, batch 3 of the epoch)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("lower the learning rate"), std::string::npos) << msg;
}

// Under 16-true, AdamW keeps its moments in float16 (torch's default), which is what turns such
// runs NaN within a few steps; the message names the setting that helps instead of only
// "lower the learning rate".
TEST(Trainer, NonFiniteLossUnderFloat16AdamStateNamesFp32State) {
  for (bool fp32_state : {false, true}) {
    TrainerOptions o = quiet_options("16-true");
    Trainer trainer(o);
    TinyModule module(TinyOptions{
        .loss_multiplier = [](int64_t s) { return s == 2 ? NAN : 1.0; },
        .optimizer = [fp32_state](std::vector<Tensor> params) -> std::shared_ptr<optim::Optimizer> {
          optim::AdamOptions a = optim::adamw_defaults();
          a.fp32_state = fp32_state;
          return std::make_shared<optim::AdamW>(std::move(params), a);
        }});
    data::DataLoader loader(testing::tiny_dataset(32), 8);
    const std::string msg = error_of([&] { trainer.fit(module, loader); });
    EXPECT_NE(msg.find("the loss became NaN in optimizer step 3"), std::string::npos) << msg;
    const std::string hint =
        "AdamW keeps its state (exp_avg) in float16, as the parameters: float16 cannot hold "
        "Adam's small second moments nor eps 1e-8, so updates divide by zero; keep the state in "
        "float32 (AdamOptions::fp32_state or master_weights";
    EXPECT_EQ(msg.find(hint) != std::string::npos, !fp32_state) << msg;
  }
}

// The same state without a NaN to report: the loss may jump to hundreds and stay finite while
// nothing is learned, so the Trainer warns after the first step that float16 cannot hold the
// second moments (a user's own AdamW under 16-true trained to a loss of ~280 in silence).
TEST(Trainer, Float16AdamStateIsNamedInAWarningAfterTheFirstStep) {
  for (bool fp32_state : {false, true}) {
    forget_warnings_said_once();
    WarningRecorder recorder;
    TrainerOptions o = quiet_options("16-true");
    o.max_steps = 2;
    Trainer trainer(o);
    TinyModule module(TinyOptions{
        .optimizer = [fp32_state](std::vector<Tensor> params) -> std::shared_ptr<optim::Optimizer> {
          optim::AdamOptions a = optim::adamw_defaults();
          a.fp32_state = fp32_state;
          return std::make_shared<optim::AdamW>(std::move(params), a);
        }});
    data::DataLoader loader(testing::tiny_dataset(32), 8);
    trainer.fit(module, loader);
    size_t found = 0;
    for (const std::string& m : recorder.messages()) {
      found += m.rfind(
                   "AdamW keeps its second moments (exp_avg_sq) in float16, as its float16 "
                   "parameters",
                   0) == 0 &&
               m.find("AdamOptions::fp32_state = true (or master_weights)") != std::string::npos;
    }
    EXPECT_EQ(found, fp32_state ? 0u : 1u) << "fp32_state " << fp32_state;
  }
  // Float32 parameters hold float32 state: nothing to say.
  forget_warnings_said_once();
  WarningRecorder recorder;
  TrainerOptions o = quiet_options("32-true");
  o.max_steps = 1;
  Trainer trainer(o);
  TinyModule module(TinyOptions{.adamw = true});
  data::DataLoader loader(testing::tiny_dataset(32), 8);
  trainer.fit(module, loader);
  for (const std::string& m : recorder.messages())
    EXPECT_EQ(m.find("in float16"), std::string::npos) << m;
}

// A NaN gradient under a finite loss. AdamW takes it into the weights, and the next step's NaN
// loss blames the step that made them non-finite, naming the parameter; AdamW8bit refuses the
// step, which the Trainer reports as a divergence naming the parameter, the step and the batch.
TEST(Trainer, NonFiniteGradientIsBlamedOnItsStepAndParameter) {
  for (bool eight : {false, true}) {
    TrainerOptions o = quiet_options("32-true");
    Trainer trainer(o);
    TinyModule module(TinyOptions{
        .adamw = !eight, .adamw8bit = eight, .nan_gradient = [](int64_t s) { return s == 2; }});
    data::DataLoader loader(testing::tiny_dataset(32), 8);  // 4 steps
    bool diverged = false;
    std::string msg;
    try {
      trainer.fit(module, loader);
    } catch (const TrainingDiverged& e) {
      diverged = true;
      msg = e.what();
    }
    ASSERT_TRUE(diverged) << (eight ? "AdamW8bit" : "AdamW");
    if (eight) {
      EXPECT_NE(msg.find("the gradient of 'net.0.weight' became non-finite in optimizer step 3 "
                         "(epoch 1, batch 3 of the epoch)"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("changed nothing"), std::string::npos) << msg;
      EXPECT_EQ(trainer.global_step(), 2);
    } else {
      EXPECT_NE(msg.find("the weights became non-finite in optimizer step 3 (net.0.weight holds"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("the loss of step 4 (epoch 1, batch 4 of the epoch) is then NaN"),
                std::string::npos)
          << msg;
    }
  }
}

// Under a loss scaler a NaN loss skips its step while the weights can still recover, and stops
// the run, naming the parameter, once they are non-finite or beyond float16's range (every
// later step would be skipped and the run would end cleanly with unusable weights).
TEST(Trainer, Fp16MixedStopsOnceTheWeightsDiverged) {
  auto run = [](std::function<void(nn::Module&)> damage) {
    TrainerOptions o = quiet_options("16-mixed");
    auto cb = std::make_shared<LambdaCallback>();
    cb->batch_end = [damage](Trainer& t, int64_t b) {
      if (b == 0 && damage) damage(*t.module());
    };
    o.callbacks.push_back(cb);
    Trainer with_cb(o);
    TinyModule module(TinyOptions{.loss_multiplier = [](int64_t s) { return s == 1 ? NAN : 1.0; }});
    data::DataLoader loader(testing::tiny_dataset(32), 8);  // 4 steps, the second one NaN
    std::string msg = error_of([&] { with_cb.fit(module, loader); });
    return std::make_pair(msg, with_cb.precision_plugin().scaler()->skipped_steps());
  };
  auto set_first = [](double v) {
    return [v](nn::Module& m) {
      NoGradGuard no_grad;
      Tensor w = m.named_parameters().front().second;
      w.fill_(v);
    };
  };
  const auto [healthy, skipped] = run(nullptr);
  EXPECT_EQ(healthy, "") << "a NaN loss with sound weights only skips its step";
  EXPECT_EQ(skipped, 1);
  const auto [huge, unused1] = run(set_first(1e6));
  EXPECT_NE(huge.find("NaN in optimizer step 2 (epoch 1) in 16-mixed and the weights have diverged "
                      "(|net.0.weight| reaches 1e+06, beyond float16's 65504)"),
            std::string::npos)
      << huge;
  const auto [nan_w, unused2] = run(set_first(NAN));
  EXPECT_NE(nan_w.find("the weights are no longer finite (net.0.weight holds nan)"),
            std::string::npos)
      << nan_w;
}

TEST(Trainer, OptionErrors) {
  auto make = [](auto edit) {
    return error_of([&] {
      TrainerOptions o = quiet_options();
      edit(o);
      Trainer t(o);
    });
  };
  if (!cuda::is_available()) {
    EXPECT_NE(make([](TrainerOptions& o) {
                o.accelerator = "gpu";
              }).find("cannot run on accelerator 'gpu'"),
              std::string::npos);
  }
  EXPECT_NE(make([](TrainerOptions& o) { o.precision = "fp8"; }).find("valid values are"),
            std::string::npos);
  EXPECT_NE(make([](TrainerOptions& o) {
              o.accumulate_grad_batches = 0;
            }).find("accumulate_grad_batches"),
            std::string::npos);
  EXPECT_NE(
      make([](TrainerOptions& o) { o.gradient_clip_algorithm = "l2"; }).find("'value', 'norm'"),
      std::string::npos);
  EXPECT_NE(make([](TrainerOptions& o) {
              o.precision = "bf16-mixed";
              o.plugin = std::make_shared<Precision>();
            }).find("Received both `precision=bf16-mixed` and `plugins=Precision`"),
            std::string::npos);
  // An empty precision with a plugin is precision left unset, as Lightning's None: accepted.
  {
    TrainerOptions o = quiet_options();
    o.precision = "";
    o.plugin = std::make_shared<BitsandbytesPrecision>("nf4");
    Trainer trainer(o);
    EXPECT_EQ(trainer.precision_plugin().precision(), "nf4");
  }
  TinyModule loose;
  EXPECT_THROW(loose.trainer(), Error);
}

TEST(Trainer, ValidateAndTestReturnEpochMeans) {
  TrainerOptions o = quiet_options();
  o.seed = 8;
  Trainer trainer(o);
  TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(16), 8);
  const auto val = trainer.validate(module, loader);
  ASSERT_TRUE(val.count("val_loss"));
  const auto test = trainer.test(module, loader);
  ASSERT_TRUE(test.count("test_loss"));
  // Both see the same batches with the same weights: the same mean loss.
  EXPECT_DOUBLE_EQ(val.at("val_loss"), test.at("test_loss"));
  EXPECT_GT(val.at("val_loss"), 0.5);  // untrained, 3 classes: about ln 3
}

// Lightning's predict: predict_step (by default forward) over every batch, in order, without
// gradients; reduced-precision outputs come back as float32.
class ForwardingModule : public TinyModule {
 public:
  Tensor forward(const Tensor& input) override { return child("net")->forward(input); }
};

TEST(Trainer, PredictReturnsForwardOfEveryBatchInOrder) {
  const auto dataset = testing::tiny_dataset(20);
  const data::DataLoader loader(dataset, 8);  // 8, 8, 4
  for (const char* precision : {"32-true", "bf16-true"}) {
    SCOPED_TRACE(precision);
    Trainer trainer(quiet_options(precision));
    ForwardingModule module;
    const std::vector<Tensor> out = trainer.predict(module, loader);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[2].shape(), (Shape{4, 3}));
    NoGradGuard no_grad;
    for (int64_t b = 0; b < 3; ++b) {
      EXPECT_EQ(out[b].dtype(), kFloat32);
      EXPECT_FALSE(out[b].requires_grad());
      const data::Example batch =
          trainer.precision_plugin().convert_input(loader.batch(loader.indices(0), b));
      const Tensor expected = module.forward(batch.input).to(kFloat32);
      EXPECT_EQ(out[b].to_vector<float>(), expected.to_vector<float>()) << "batch " << b;
    }
  }
  // A module without forward (or predict_step) says what to define.
  Trainer trainer(quiet_options());
  TinyModule no_forward;
  mantissa::testing::expect_error([&] { trainer.predict(no_forward, loader); },
                                  "TinyModule does not implement forward");
}

// limit_predict_batches (Lightning's): the first batches only, a count or a fraction;
// fast_dev_run sets it too.
TEST(Trainer, LimitPredictBatchesPredictsTheFirstBatches) {
  const data::DataLoader loader(testing::tiny_dataset(44), 4);  // 11 batches
  const auto predicted = [&](TrainerOptions o) {
    Trainer trainer(o);
    ForwardingModule module;
    return trainer.predict(module, loader);
  };
  TrainerOptions o = quiet_options();
  o.seed = 5;  // the same weights in every trainer
  const std::vector<Tensor> all = predicted(o);
  EXPECT_EQ(all.size(), 11u);
  o.limit_predict_batches = BatchLimit::batches(2);
  const std::vector<Tensor> two = predicted(o);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].to_vector<float>(), all[1].to_vector<float>());
  o.limit_predict_batches = BatchLimit::fraction(0.5);
  EXPECT_EQ(predicted(o).size(), 5u);                    // int(11 * 0.5)
  o.limit_predict_batches = BatchLimit::fraction(0.05);  // int(11 * 0.05) = 0: Lightning's error
  mantissa::testing::expect_error([&] { predicted(o); },
                                  "You requested to check 0.05 of the predict dataloader");
  o = quiet_options();
  o.fast_dev_run = 3;
  EXPECT_EQ(predicted(o).size(), 3u);
}

// bf16-true: parameters built in init_module() are born bf16; no fp32 weight is ever allocated.
TEST(Trainer, InitModuleBuildsBf16WeightsWithoutAnFp32Copy) {
  TrainerOptions o = quiet_options("bf16-true");
  Trainer trainer(o);
  const int64_t base = memory_allocated();
  reset_peak_memory_stats();
  std::shared_ptr<nn::Linear> layer;
  {
    ScopePtr scope = trainer.init_module();
    layer = std::make_shared<nn::Linear>(512, 256);
  }
  EXPECT_EQ(layer->weight.dtype(), kBFloat16);
  EXPECT_EQ(layer->bias.dtype(), kBFloat16);
  const int64_t bf16_bytes = (512 * 256 + 256) * 2;
  EXPECT_EQ(memory_allocated() - base, bf16_bytes);
  // An fp32 copy of the weight alone would be 512 KiB on top.
  EXPECT_LT(max_memory_allocated() - base, bf16_bytes + 512 * 256 * 4);
  EXPECT_EQ(get_default_dtype(), kFloat32);  // the scope ended
  // configure_model runs inside the same scope.
  TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(16), 8);
  trainer.fit(module, loader);
  for (const auto& p : module.parameters()) EXPECT_EQ(p.dtype(), kBFloat16);
}

}  // namespace
}  // namespace mantissa::train

namespace mantissa::train {
namespace {

// A NaN in the data makes the loss NaN in every precision: the Trainer names the batch's input as
// the cause (with the count and the first position) instead of advising a lower learning rate, in
// 32-true and under 16-mixed's loss scaler alike.
TEST(Trainer, NonFiniteInputDataIsNamedAsTheCause) {
  for (const char* precision : {"32-true", "16-mixed"}) {
    Generator gen(123);
    Tensor x = randn({32, 4}, kFloat32, &gen);
    x.data<float>()[2 * 4 + 1] = std::nanf("");  // example 2, in the first batch (no shuffle)
    x.data<float>()[3 * 4 + 0] = INFINITY;
    auto set = std::make_shared<data::TensorDataset>(x, randint(0, 3, {32}, kInt64, &gen));
    data::DataLoader loader(set, 8);
    Trainer trainer(testing::quiet_options(precision));
    testing::TinyModule module;
    std::string msg;
    try {
      trainer.fit(module, loader);
    } catch (const TrainingDiverged& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("the loss became NaN in optimizer step 1 (epoch 1, batch 1 of the epoch) "
                       "because the batch's input holds 2 NaN / inf value(s) of 32 (the first at "
                       "flat index 9): the data, not the training, is at fault"),
              std::string::npos)
        << precision << ": " << msg;
    EXPECT_EQ(trainer.global_step(), 0);
  }
}

}  // namespace
}  // namespace mantissa::train
