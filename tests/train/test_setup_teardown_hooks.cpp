// Lightning's setup(stage) / teardown(stage) hooks on the module and the callbacks, and the
// callbacks' on_exception, in Lightning's order: setup before configure_model, teardown after
// on_fit_end (after the evaluation for validate / test / predict), on_exception instead of
// teardown when the stage throws, after which the exception propagates.
#include <gtest/gtest.h>

#include <algorithm>

#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

class StagedModule : public TinyModule {
 public:
  explicit StagedModule(std::vector<std::string>* events, int64_t fail_at_step = -1)
      : TinyModule(TinyOptions{.events = events}), events_(events), fail_at_step_(fail_at_step) {}
  void setup(const std::string& stage) override { events_->push_back("module:setup:" + stage); }
  void teardown(const std::string& stage) override {
    events_->push_back("module:teardown:" + stage);
  }
  Tensor training_step(const data::Example& batch, int64_t batch_idx) override {
    if (trainer().global_step() == fail_at_step_) throw Error("training_step failed on purpose");
    return TinyModule::training_step(batch, batch_idx);
  }
  Tensor predict_step(const data::Example& batch, int64_t) override {
    return net_->forward(batch.input);
  }

 private:
  std::vector<std::string>* events_;
  int64_t fail_at_step_;
};

class StagedCallback : public testing::RecordingCallback {
 public:
  explicit StagedCallback(std::vector<std::string>* events)
      : RecordingCallback(events), events_(events) {}
  void setup(Trainer& trainer, TrainModule&, const std::string& stage) override {
    events_->push_back("callback:setup:" + stage + ":" + trainer.stage());
  }
  void teardown(Trainer&, TrainModule&, const std::string& stage) override {
    events_->push_back("callback:teardown:" + stage);
  }
  void on_exception(Trainer& trainer, TrainModule&, const std::exception& e) override {
    events_->push_back(
        fmt::format("callback:on_exception:{}:step {}", e.what(), trainer.global_step()));
  }

 private:
  std::vector<std::string>* events_;
};

// The events from `first` on, up to (not including) the first that starts with `stop`.
std::vector<std::string> slice(const std::vector<std::string>& events, const std::string& first,
                               const std::string& stop) {
  auto begin = std::find(events.begin(), events.end(), first);
  auto end = std::find_if(begin, events.end(),
                          [&](const std::string& e) { return e.rfind(stop, 0) == 0; });
  return {begin, end};
}

TEST(SetupTeardownHooks, FitCallsThemAroundTheRunInLightningsOrder) {
  std::vector<std::string> events;
  StagedModule module(&events);
  TrainerOptions o = quiet_options();
  o.callbacks = {std::make_shared<StagedCallback>(&events)};
  Trainer trainer(o);
  data::DataLoader train(testing::tiny_dataset(16), 8);
  trainer.fit(module, train);
  // setup runs before any stage is entered (the trainer's stage() is still "").
  const std::vector<std::string> start(events.begin(), events.begin() + 6);
  EXPECT_EQ(start,
            (std::vector<std::string>{"callback:setup:fit:", "module:setup:fit",
                                      "module:configure_model", "module:configure_optimizers",
                                      "callback:on_fit_start", "module:on_fit_start"}));
  const std::vector<std::string> end(events.end() - 6, events.end());
  EXPECT_EQ(end, (std::vector<std::string>{"callback:on_train_end", "module:on_train_end",
                                           "callback:on_fit_end", "module:on_fit_end",
                                           "callback:teardown:fit", "module:teardown:fit"}));
}

TEST(SetupTeardownHooks, ValidateTestAndPredictHaveTheirOwnStage) {
  std::vector<std::string> events;
  StagedModule module(&events);
  TrainerOptions o = quiet_options();
  o.callbacks = {std::make_shared<StagedCallback>(&events)};
  Trainer trainer(o);
  data::DataLoader val(testing::tiny_dataset(16), 8);
  trainer.validate(module, val);
  trainer.test(module, val);
  trainer.predict(module, val);
  EXPECT_EQ(
      slice(events, "callback:setup:validate:", "callback:setup:test"),
      (std::vector<std::string>{
          "callback:setup:validate:", "module:setup:validate", "module:configure_model",
          "callback:on_validation_start", "module:on_validation_start",
          "callback:on_validation_epoch_start", "module:on_validation_epoch_start",
          "module:validation_step", "module:validation_step", "callback:on_validation_epoch_end",
          "module:on_validation_epoch_end", "callback:on_validation_end",
          "module:on_validation_end", "callback:teardown:validate", "module:teardown:validate"}));
  const std::vector<std::string> test =
      slice(events, "callback:setup:test:", "callback:setup:predict");
  ASSERT_GE(test.size(), 4u);
  EXPECT_EQ(test[1], "module:setup:test");
  EXPECT_EQ(test[test.size() - 2], "callback:teardown:test");
  EXPECT_EQ(test.back(), "module:teardown:test");
  const std::vector<std::string> tail(events.end() - 4, events.end());
  EXPECT_EQ(tail,
            (std::vector<std::string>{"callback:setup:predict:", "module:setup:predict",
                                      "callback:teardown:predict", "module:teardown:predict"}));
}

TEST(SetupTeardownHooks, OnExceptionRunsWhenTrainingThrowsAndTheErrorPropagates) {
  std::vector<std::string> events;
  StagedModule module(&events, /*fail_at_step=*/1);
  TrainerOptions o = quiet_options();
  o.callbacks = {std::make_shared<StagedCallback>(&events)};
  Trainer trainer(o);
  data::DataLoader train(testing::tiny_dataset(16), 8);
  try {
    trainer.fit(module, train);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training_step failed on purpose"), std::string::npos);
  }
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "callback:on_exception:training_step failed on purpose:step 1");
  for (const std::string& e : events) {
    EXPECT_EQ(e.find("teardown"), std::string::npos) << e;
    EXPECT_NE(e, "callback:on_fit_end");
  }
}

// A callback whose on_exception throws does not replace the stage's error, and the callbacks
// after it still run.
TEST(SetupTeardownHooks, AFailingOnExceptionDoesNotHideTheError) {
  class Throwing : public Callback {
   public:
    std::string state_key() const override { return "Throwing"; }
    void on_exception(Trainer&, TrainModule&, const std::exception&) override {
      throw Error("on_exception broke");
    }
  };
  std::vector<std::string> events;
  StagedModule module(&events, /*fail_at_step=*/0);
  TrainerOptions o = quiet_options();
  o.callbacks = {std::make_shared<Throwing>(), std::make_shared<StagedCallback>(&events)};
  Trainer trainer(o);
  data::DataLoader train(testing::tiny_dataset(16), 8);
  ::testing::internal::CaptureStderr();
  try {
    trainer.fit(module, train);
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training_step failed on purpose"), std::string::npos);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Throwing.on_exception failed"), std::string::npos) << err;
  EXPECT_EQ(events.back(), "callback:on_exception:training_step failed on purpose:step 0");
}

// An error in validate() reaches the callbacks too (Lightning wraps every stage).
TEST(SetupTeardownHooks, OnExceptionAlsoCoversValidate) {
  class FailingValidation : public TinyModule {
   public:
    void validation_step(const data::Example&, int64_t) override {
      throw Error("validation_step failed on purpose");
    }
  } module;
  std::vector<std::string> events;
  TrainerOptions o = quiet_options();
  o.callbacks = {std::make_shared<StagedCallback>(&events)};
  Trainer trainer(o);
  data::DataLoader val(testing::tiny_dataset(16), 8);
  EXPECT_THROW(trainer.validate(module, val), Error);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "callback:on_exception:validation_step failed on purpose:step 0");
}

}  // namespace
}  // namespace mantissa::train
