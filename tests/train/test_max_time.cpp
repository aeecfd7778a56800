// max_time and the Timer callback (Lightning's): training stops after the optimizer step that
// spends the budget, ending its epoch as an early stop does (validation, checkpoints,
// last.safetensors), or right after a validation that spends it, the budget counts a resumed
// checkpoint's time, and min_steps holds it off. The clock is the test's own: every training
// batch takes 10 "seconds" (and a validation what a test says).
#include <gtest/gtest.h>

#include <filesystem>

#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/timer.h"
#include "support/temp_dir.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
namespace fs = std::filesystem;

// 32 examples in batches of 8: 4 training batches per epoch.
using Loaders = testing::TinyLoaders;

// A clock that each training batch moves on by 10 seconds (and each validation by
// validation_seconds); records the steps validated at.
class TenSecondBatches : public Callback {
 public:
  std::shared_ptr<double> now = std::make_shared<double>(0.0);
  double validation_seconds = 0;
  std::vector<int64_t> validations;
  void on_train_batch_start(Trainer&, TrainModule&, const data::Example&, int64_t) override {
    *now += 10;
  }
  void on_validation_start(Trainer&, TrainModule&) override { *now += validation_seconds; }
  void on_validation_end(Trainer& trainer, TrainModule&) override {
    validations.push_back(trainer.global_step());
  }
  std::shared_ptr<Timer> timer(double seconds, const std::string& interval = "step") const {
    auto clock = now;
    return std::make_shared<Timer>(TimerOptions{.duration = std::chrono::duration<double>(seconds),
                                                .interval = interval,
                                                .clock = [clock] { return *clock; }});
  }
};

TrainerOptions two_epochs() {
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  o.seed = 11;
  return o;
}

TEST(MaxTime, StopsAfterTheStepThatSpendsItSavesLastAndResumesExactly) {
  mantissa::testing::TempDir dir;
  Loaders l;
  std::vector<float> straight;
  {
    Trainer trainer(two_epochs());
    TinyModule module;
    trainer.fit(module, l.train, &l.val);
    straight = testing::flat_params(module);
  }
  auto clock = std::make_shared<TenSecondBatches>();
  auto timer = clock->timer(25);
  ModelCheckpointOptions mc;
  mc.dirpath = dir.file("ckpt");
  mc.save_last = true;
  TrainerOptions o = two_epochs();
  o.callbacks = {clock, timer, std::make_shared<ModelCheckpoint>(mc)};
  Trainer trainer(o);
  TinyModule module;
  trainer.fit(module, l.train, &l.val);
  // 30 s after step 3: it stops there, validating the final weights, and the epoch's end
  // writes its checkpoint and last.safetensors.
  EXPECT_EQ(trainer.global_step(), 3);
  EXPECT_EQ(clock->validations, (std::vector<int64_t>{3}));
  EXPECT_DOUBLE_EQ(timer->time_elapsed(), 30.0);
  EXPECT_TRUE(fs::exists(dir.file("ckpt/epoch=0-step=3.safetensors")));
  ASSERT_TRUE(fs::exists(dir.file("ckpt/last.safetensors")));
  // last.safetensors continues the run bit for bit.
  Trainer again(two_epochs());
  TinyModule resumed;
  again.fit(resumed, l.train, &l.val, dir.file("ckpt/last.safetensors"));
  EXPECT_EQ(again.global_step(), 8);
  EXPECT_EQ(testing::flat_params(resumed), straight);
}

TEST(MaxTime, IntervalEpochChecksAtEpochEnds) {
  auto clock = std::make_shared<TenSecondBatches>();
  TrainerOptions o = two_epochs();
  o.callbacks = {clock, clock->timer(25, "epoch")};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  EXPECT_EQ(trainer.global_step(), 4);
}

// A validation of the training loop counts in the budget: one that spends it ends the run at
// once ("step"). Checked at the next step only, the run trained a step more and validated
// again past the budget.
TEST(MaxTime, AValidationInsideTheEpochThatSpendsTheBudgetEndsTheRunAtOnce) {
  mantissa::testing::TempDir dir;
  Loaders l;
  TrainerOptions every_two = two_epochs();
  every_two.val_check_interval = BatchLimit::batches(2);
  std::vector<float> straight;
  {
    Trainer trainer(every_two);
    TinyModule module;
    trainer.fit(module, l.train, &l.val);
    straight = testing::flat_params(module);
  }
  auto clock = std::make_shared<TenSecondBatches>();
  clock->validation_seconds = 100;
  auto timer = clock->timer(50);
  ModelCheckpointOptions mc;
  mc.dirpath = dir.file("ckpt");
  mc.save_last = true;
  TrainerOptions o = every_two;
  o.callbacks = {clock, timer, std::make_shared<ModelCheckpoint>(mc)};
  Trainer trainer(o);
  TinyModule module;
  trainer.fit(module, l.train, &l.val);
  // 20 s of batches, then the validation after step 2 takes 100: it stops there (it went on to
  // step 3 and a second validation, 230 s in).
  EXPECT_EQ(trainer.global_step(), 2);
  EXPECT_EQ(clock->validations, (std::vector<int64_t>{2}));
  EXPECT_DOUBLE_EQ(timer->time_elapsed(), 120.0);
  EXPECT_TRUE(fs::exists(dir.file("ckpt/epoch=0-step=2.safetensors")));
  // Its last.safetensors continues the run as if it had never stopped.
  Trainer again(every_two);
  TinyModule resumed;
  again.fit(resumed, l.train, &l.val, dir.file("ckpt/last.safetensors"));
  EXPECT_EQ(again.global_step(), 8);
  EXPECT_EQ(testing::flat_params(resumed), straight);
}

TEST(MaxTime, AValidationAtTheEpochsEndThatSpendsTheBudgetEndsTheRunThere) {
  auto clock = std::make_shared<TenSecondBatches>();
  clock->validation_seconds = 100;
  auto timer = clock->timer(45);
  TrainerOptions o = two_epochs();
  o.callbacks = {clock, timer};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  // 40 s at step 4, 140 after the epoch's validation: no step of epoch 2 (it took one and
  // validated it).
  EXPECT_EQ(trainer.global_step(), 4);
  EXPECT_EQ(trainer.current_epoch(), 1);
  EXPECT_EQ(clock->validations, (std::vector<int64_t>{4}));
  EXPECT_DOUBLE_EQ(timer->time_elapsed(), 140.0);
}

TEST(MaxTime, AValidationInsideAnAccumulationWindowWaitsForTheWindowsStep) {
  auto clock = std::make_shared<TenSecondBatches>();
  clock->validation_seconds = 100;
  TrainerOptions o = two_epochs();
  o.accumulate_grad_batches = 2;
  o.val_check_interval = BatchLimit::batches(1);  // after every batch, steps or not
  o.callbacks = {clock, clock->timer(50)};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  // The budget is spent in the validation after batch 1, inside the window: the run stops after
  // batch 2's step (and its validation), so its checkpoints hold whole steps.
  EXPECT_EQ(trainer.global_step(), 1);
  EXPECT_EQ(clock->validations, (std::vector<int64_t>{0, 1}));
}

TEST(MaxTime, IntervalEpochLetsAValidationInsideTheEpochGoOn) {
  auto clock = std::make_shared<TenSecondBatches>();
  clock->validation_seconds = 100;
  TrainerOptions o = two_epochs();
  o.val_check_interval = BatchLimit::batches(2);
  o.callbacks = {clock, clock->timer(50, "epoch")};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  EXPECT_EQ(trainer.global_step(), 4);
  EXPECT_EQ(clock->validations, (std::vector<int64_t>{2, 4}));
}

TEST(MaxTime, AResumedRunCountsTheCheckpointsTrainingTime) {
  mantissa::testing::TempDir dir;
  Loaders l;
  {
    auto clock = std::make_shared<TenSecondBatches>();
    TrainerOptions o = two_epochs();
    o.callbacks = {clock, clock->timer(25)};
    Trainer trainer(o);
    TinyModule module;
    trainer.fit(module, l.train, &l.val);
    trainer.save_checkpoint(dir.file("timed.safetensors"));  // 30 s spent, at step 3
  }
  // A budget of 25 s is spent already: the resumed fit takes no step.
  {
    auto clock = std::make_shared<TenSecondBatches>();
    TrainerOptions o = two_epochs();
    o.callbacks = {clock, clock->timer(25)};
    Trainer trainer(o);
    TinyModule module;
    trainer.fit(module, l.train, &l.val, dir.file("timed.safetensors"));
    EXPECT_EQ(trainer.global_step(), 3);
  }
  // 45 s: 15 s are left, spent by the second step after the resume.
  auto clock = std::make_shared<TenSecondBatches>();
  auto timer = clock->timer(45);
  TrainerOptions o = two_epochs();
  o.callbacks = {clock, timer};
  Trainer trainer(o);
  TinyModule module;
  trainer.fit(module, l.train, &l.val, dir.file("timed.safetensors"));
  EXPECT_EQ(trainer.global_step(), 5);
  EXPECT_DOUBLE_EQ(timer->time_elapsed(), 50.0);
}

TEST(MaxTime, TheOptionAddsATimerThatMinStepsHoldsOff) {
  Loaders l;
  TrainerOptions o = two_epochs();
  o.max_time = std::chrono::seconds(0);  // spent before the first batch
  {
    Trainer trainer(o);
    TinyModule module;
    trainer.fit(module, l.train, &l.val);
    EXPECT_EQ(trainer.global_step(), 0);
    const auto timers = std::count_if(trainer.callbacks().begin(), trainer.callbacks().end(),
                                      [](auto& c) { return dynamic_cast<Timer*>(c.get()); });
    EXPECT_EQ(timers, 1);
  }
  o.min_steps = 2;
  Trainer trainer(o);
  TinyModule module;
  trainer.fit(module, l.train, &l.val);
  EXPECT_EQ(trainer.global_step(), 2);
  // A Timer of the user's wins over max_time, as in Lightning.
  auto clock = std::make_shared<TenSecondBatches>();
  TrainerOptions with_timer = two_epochs();
  with_timer.max_time = std::chrono::seconds(0);
  with_timer.callbacks = {clock, clock->timer(25)};
  Trainer timed(with_timer);
  TinyModule other;
  timed.fit(other, l.train, &l.val);
  EXPECT_EQ(timed.global_step(), 3);
}

TEST(MaxTime, ParsesLightningsDurationStringsAndRefusesOthers) {
  EXPECT_EQ(parse_max_time("00:12:00:00", "--max-time"), std::chrono::hours(12));
  EXPECT_EQ(parse_max_time("1:00:00:30", "--max-time"), std::chrono::seconds(86400 + 30));
  EXPECT_EQ(parse_max_time("10:23:59:59", "--max-time").count(),
            ((10 * 24 + 23) * 60 + 59) * 60 + 59);
  for (const char* bad : {"1:99", "", "00:12:00", "00:24:00:00", "00:00:60:00", "00:00:00:1",
                          "-1:00:00:00", "00:1a:00:00", "00:12:00:00:00", "1234567:00:00:00"}) {
    try {
      parse_max_time(bad, "--max-time");
      ADD_FAILURE() << bad << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--max-time must be DD:HH:MM:SS"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(Timer(TimerOptions{.duration = std::chrono::seconds(-1)}), Error);
  EXPECT_THROW(Timer(TimerOptions{.interval = "batch"}), Error);
  Timer timer(TimerOptions{});
  EXPECT_THROW(timer.load_state_dict({{"time_elapsed", -3}}), Error);
  EXPECT_THROW(timer.load_state_dict({{"time_elapsed", "x"}}), Error);
  timer.load_state_dict({{"time_elapsed", 12.5}});
  EXPECT_EQ(timer.time_elapsed(), 12.5);
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(2 * 86400 + 30), "2 days, 0:00:30");
}

}  // namespace
}  // namespace mantissa::train
