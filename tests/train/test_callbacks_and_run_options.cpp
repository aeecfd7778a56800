// The Trainer's callbacks and run options: EarlyStopping, ReduceLROnPlateau stepped by the Trainer,
// fast_dev_run, overfit_batches, check_val_every_n_epoch, num_sanity_val_steps,
// ModelCheckpoint every_n_train_steps and "best"/"last" resume, LearningRateMonitor and the
// model summary.
#include <gtest/gtest.h>

#include <filesystem>

#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/early_stopping.h"
#include "mantissa/train/lr_monitor.h"
#include "mantissa/train/model_summary.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

namespace fs = std::filesystem;

// 32 examples in batches of 8: 4 training batches per epoch.
using Loaders = testing::TinyLoaders;

int64_t count(const std::vector<std::string>& events, const std::string& what) {
  return std::count(events.begin(), events.end(), what);
}

// A logger that keeps everything it receives.
class MemoryLogger : public Logger {
 public:
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override {
    for (const auto& [k, v] : metrics) rows.push_back({k, v, step});
  }
  void log_hyperparams(const nlohmann::json&) override {}
  std::string log_dir() const override { return ""; }
  struct Row {
    std::string name;
    double value;
    int64_t step;
  };
  std::vector<Row> rows;
};

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("mantissa_lightning_" + name);
  fs::remove_all(d);
  return d;
}

TEST(EarlyStopping, StopsAfterPatienceChecksWithoutImprovement) {
  // Every step skipped: the weights and so val_loss never change.
  TinyModule module(TinyOptions{.skip = [](int64_t) { return true; }});
  auto es =
      std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_loss", .patience = 2});
  TrainerOptions o = quiet_options();
  o.max_epochs = 10;
  o.callbacks = {es};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  // Epoch 0 sets the best, epochs 1 and 2 do not improve: stop after epoch 2.
  EXPECT_EQ(trainer.current_epoch(), 3);
  EXPECT_EQ(es->stopped_epoch(), 2);
  EXPECT_EQ(es->wait_count(), 2);
  EXPECT_NE(es->stopped_reason().find("did not improve"), std::string::npos);
}

// Validating inside an epoch (val_check_interval of 2 of its 4 batches), EarlyStopping judges
// every validation by default, as Lightning's: the second, at step 4, does not improve and
// patience 1 stops there. Checked at epoch ends only, it judged the epochs' last validations
// and stopped an epoch later, with the best of those. check_on_train_epoch_end = true keeps
// the epoch-end checks.
TEST(EarlyStopping, ChecksEveryValidationInsideAnEpochByDefault) {
  for (const std::optional<bool> at_epoch_end : {std::optional<bool>(), std::optional(true)}) {
    TinyModule module(TinyOptions{.skip = [](int64_t) { return true; }});
    auto es = std::make_shared<EarlyStopping>(EarlyStoppingOptions{
        .monitor = "val_loss", .patience = 1, .check_on_train_epoch_end = at_epoch_end});
    TrainerOptions o = quiet_options();
    o.max_epochs = 10;
    o.val_check_interval = BatchLimit::batches(2);
    o.callbacks = {es};
    Loaders l;
    Trainer trainer(o);
    trainer.fit(module, l.train, &l.val);
    EXPECT_EQ(es->checks_on_train_epoch_end(), at_epoch_end.has_value());
    EXPECT_EQ(trainer.global_step(), at_epoch_end ? 8 : 4);
    EXPECT_EQ(es->stopped_epoch(), at_epoch_end ? 1 : 0);
  }
}

TEST(EarlyStopping, ImprovingMetricRunsAllEpochsAndThresholdsStopEarly) {
  Loaders l;
  {
    // The best score is the lowest val_loss seen, and the wait counts the epochs since it.
    TinyModule module(TinyOptions{.lr = 0.5});
    auto es =
        std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_loss", .patience = 5});
    auto seen = std::make_shared<testing::LambdaCallback>();
    std::vector<double> losses;
    seen->epoch_end = [&](Trainer& t) { losses.push_back(t.callback_metrics().at("val_loss")); };
    TrainerOptions o = quiet_options();
    o.max_epochs = 4;
    o.callbacks = {seen, es};
    Trainer trainer(o);
    trainer.fit(module, l.train, &l.val);
    EXPECT_EQ(trainer.current_epoch(), 4);
    EXPECT_EQ(es->stopped_epoch(), 0);
    ASSERT_EQ(losses.size(), 4u);
    const auto best = std::min_element(losses.begin(), losses.end());
    ASSERT_TRUE(es->best_score().has_value());
    EXPECT_DOUBLE_EQ(*es->best_score(), *best);
    EXPECT_EQ(es->wait_count(), losses.end() - best - 1);
  }
  {
    // Any loss is below 100: the stopping threshold ends training after the first epoch.
    TinyModule module;
    auto es = std::make_shared<EarlyStopping>(
        EarlyStoppingOptions{.monitor = "val_loss", .patience = 5, .stopping_threshold = 100.0});
    TrainerOptions o = quiet_options();
    o.max_epochs = 5;
    o.callbacks = {es};
    Trainer trainer(o);
    trainer.fit(module, l.train, &l.val);
    EXPECT_EQ(trainer.current_epoch(), 1);
    EXPECT_NE(es->stopped_reason().find("Stopping threshold"), std::string::npos);
  }
}

// With check_finite = false a NaN is a value that does not improve, as in Lightning (whose
// best starts at inf): taken as the first best, nothing could beat it and the run stopped
// after `patience` epochs although the metric kept improving.
TEST(EarlyStopping, AFirstNanIsNoImprovementWithoutCheckFinite) {
  // val_loss: nan, then 3, 2, 1, 0.5, ...: it improves after the NaN.
  class NanThenFalling : public TinyModule {
   public:
    void validation_step(const data::Example&, int64_t) override {
      log("val_loss", n_ == 0 ? NAN : 4.0 / static_cast<double>(n_ + 1));
    }
    void on_validation_epoch_end() override { ++n_; }
    int64_t n_ = 0;
  } module;
  auto es = std::make_shared<EarlyStopping>(
      EarlyStoppingOptions{.monitor = "val_loss", .patience = 2, .check_finite = false});
  TrainerOptions o = quiet_options();
  o.max_epochs = 5;
  o.callbacks = {es};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  EXPECT_EQ(trainer.current_epoch(), 5);
  EXPECT_EQ(es->stopped_epoch(), 0);
  EXPECT_EQ(es->best_score(), 4.0 / 5.0);
  EXPECT_EQ(es->wait_count(), 0);
}

TEST(EarlyStopping, MissingMetricIsAnErrorNamingTheLoggedOnes) {
  TinyModule module;
  TrainerOptions o = quiet_options();
  o.callbacks = {std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_acc"})};
  Trainer trainer(o);
  Loaders l;
  try {
    trainer.fit(module, l.train, &l.val);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("val_acc"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("val_loss"), std::string::npos);
  }
  EXPECT_THROW(EarlyStopping(EarlyStoppingOptions{}), Error);  // no monitor
  EXPECT_THROW(EarlyStopping(EarlyStoppingOptions{.monitor = "x", .mode = "up"}), Error);
}

TEST(EarlyStopping, StateSurvivesACheckpoint) {
  auto es =
      std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_loss", .patience = 4});
  TinyModule module(TinyOptions{.skip = [](int64_t) { return true; }});
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  o.callbacks = {es};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  const nlohmann::json state = es->state_dict();
  EXPECT_EQ(state["wait_count"], 1);
  EarlyStopping copy(EarlyStoppingOptions{.monitor = "val_loss", .patience = 4});
  copy.load_state_dict(state);
  EXPECT_EQ(copy.wait_count(), 1);
  EXPECT_EQ(copy.best_score(), es->best_score());
  EXPECT_THROW(copy.load_state_dict(nlohmann::json{{"wait_count", "x"}}), Error);
}

TEST(TrainerSchedulers, ReduceLROnPlateauIsSteppedWithTheMonitoredMetric) {
  Loaders l;
  TinyModule module(TinyOptions{.skip = [](int64_t) { return true; },
                                .schedulers =
                                    [](optim::Optimizer& opt) {
                                      optim::ReduceLROnPlateau::Options p;
                                      p.mode = "max";  // a constant metric never improves
                                      p.patience = 0;
                                      p.factor = 0.5;
                                      LRSchedulerConfig c;
                                      c.scheduler =
                                          std::make_shared<optim::ReduceLROnPlateau>(opt, p);
                                      c.monitor = "val_loss";
                                      return std::vector<LRSchedulerConfig>{c};
                                    }});
  TrainerOptions o = quiet_options();
  o.max_epochs = 3;
  Trainer trainer(o);
  trainer.fit(module, l.train, &l.val);
  // Epoch 0 sets the best; epochs 1 and 2 halve the lr.
  EXPECT_DOUBLE_EQ(trainer.optimizer()->lr(), 0.1 * 0.5 * 0.5);
}

TEST(TrainerSchedulers, PlateauWithoutMonitorOrWithAnUnloggedOneIsAnError) {
  Loaders l;
  for (const std::string monitor : {"", "val_acc"}) {
    TinyModule module(TinyOptions{.schedulers = [monitor](optim::Optimizer& opt) {
      LRSchedulerConfig c;
      c.scheduler = std::make_shared<optim::ReduceLROnPlateau>(opt);
      c.monitor = monitor;
      return std::vector<LRSchedulerConfig>{c};
    }});
    Trainer trainer(quiet_options());
    EXPECT_THROW(trainer.fit(module, l.train, &l.val), Error) << "monitor '" << monitor << "'";
  }
}

TEST(TrainerFlags, FastDevRunRunsNBatchesWithoutCheckpointsOrLoggers) {
  std::vector<std::string> events;
  TinyModule module(TinyOptions{.events = &events});
  const fs::path dir = fresh_dir("fast_dev_run");
  TrainerOptions o = quiet_options();
  o.max_epochs = 5;
  o.fast_dev_run = 2;
  o.enable_checkpointing = true;
  o.default_root_dir = dir.string();
  auto logger = std::make_shared<MemoryLogger>();
  o.loggers = {logger};
  o.callbacks = {std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "nothing"})};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  EXPECT_EQ(trainer.global_step(), 2);
  EXPECT_EQ(count(events, "module:training_step"), 2);
  EXPECT_EQ(count(events, "module:validation_step"), 2);  // one validation of 2 batches
  EXPECT_TRUE(logger->rows.empty());
  EXPECT_FALSE(fs::exists(dir / "checkpoints"));
  EXPECT_THROW(Trainer([] {
                 TrainerOptions bad = quiet_options();
                 bad.fast_dev_run = -1;
                 return bad;
               }()),
               Error);
}

// Records the first feature of every training batch.
class FirstValues : public Callback {
 public:
  void on_train_batch_start(Trainer& t, TrainModule&, const data::Example& batch,
                            int64_t) override {
    seen[t.current_epoch()].push_back(batch.input.to_vector<float>()[0]);
  }
  std::map<int64_t, std::vector<float>> seen;
};

TEST(TrainerFlags, OverfitBatchesRepeatsTheFirstBatchesInOrder) {
  TinyModule module;
  auto first = std::make_shared<FirstValues>();
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  o.overfit_batches = BatchLimit::batches(2);
  o.callbacks = {first};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  const auto inputs = l.train.dataset().get(0).input.to_vector<float>();
  const auto third = l.train.dataset().get(8).input.to_vector<float>();
  ASSERT_EQ(first->seen[0].size(), 2u);
  EXPECT_EQ(first->seen[0], first->seen[1]);
  EXPECT_EQ(first->seen[0][0], inputs[0]);  // examples 0..7, then 8..15, unshuffled
  EXPECT_EQ(first->seen[0][1], third[0]);
  EXPECT_EQ(trainer.global_step(), 4);
}

TEST(TrainerFlags, CheckValEveryNEpochAndSanitySteps) {
  std::vector<std::string> events;
  TinyModule module(TinyOptions{.events = &events});
  auto logger = std::make_shared<MemoryLogger>();
  TrainerOptions o = quiet_options();
  o.max_epochs = 4;
  o.check_val_every_n_epoch = 2;
  o.num_sanity_val_steps = 1;
  o.loggers = {logger};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  // 1 sanity batch + validations after epochs 1 and 3 of 2 batches each.
  EXPECT_EQ(count(events, "module:validation_step"), 1 + 2 * 2);
  // The sanity batch comes before any training step.
  const auto first_val = std::find(events.begin(), events.end(), "module:validation_step");
  const auto first_train = std::find(events.begin(), events.end(), "module:training_step");
  EXPECT_LT(first_val, first_train);
  // Its metrics went nowhere: the first val_loss logged is after step 8 (end of epoch 1),
  // which the loggers number 7 as Lightning's do.
  for (const auto& r : logger->rows) {
    if (r.name == "val_loss") {
      EXPECT_EQ(r.step, 7);
      break;
    }
  }
  EXPECT_THROW(Trainer([] {
                 TrainerOptions bad = quiet_options();
                 bad.check_val_every_n_epoch = 0;
                 return bad;
               }()),
               Error);
}

// With check_val_every_n_epoch = 2 the odd epochs have no validation: EarlyStopping and a
// monitored ModelCheckpoint judge the epochs that validated only, as Lightning's do (they
// threw "val_loss ... not available" at the end of the first epoch, and would have counted or
// ranked the previous validation's value again in the others).
TEST(TrainerFlags, CheckValEveryNEpochWithEarlyStoppingAndMonitoredCheckpoint) {
  const fs::path dir = fresh_dir("val_every_2");
  // Every step skipped: val_loss never changes, so the second validation does not improve.
  TinyModule module(TinyOptions{.skip = [](int64_t) { return true; }});
  auto es =
      std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_loss", .patience = 1});
  ModelCheckpointOptions mc;
  mc.dirpath = dir.string();
  mc.monitor = "val_loss";
  mc.save_top_k = -1;
  mc.save_last = true;
  auto ckpt = std::make_shared<ModelCheckpoint>(mc);
  TrainerOptions o = quiet_options();
  o.max_epochs = 6;
  o.check_val_every_n_epoch = 2;
  o.callbacks = {es, ckpt};
  Trainer trainer(o);
  Loaders l;
  ASSERT_NO_THROW(trainer.fit(module, l.train, &l.val));
  // Validations after epochs 1 and 3: the second does not improve, patience 1 stops there.
  EXPECT_EQ(es->stopped_epoch(), 3);
  EXPECT_EQ(es->wait_count(), 1);
  EXPECT_EQ(trainer.current_epoch(), 4);
  // Ranked checkpoints of the validated epochs only; last.safetensors every epoch.
  std::vector<std::string> kept;
  for (const auto& [path, score] : ckpt->best_k_models())
    kept.push_back(fs::path(path).filename().string());
  EXPECT_EQ(kept, (std::vector<std::string>{"epoch=1-step=8.safetensors",
                                            "epoch=3-step=16.safetensors"}));
  EXPECT_TRUE(fs::exists(dir / "last.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "epoch=0-step=4.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "epoch=2-step=12.safetensors"));
}

// limit_val_batches = 0 turns validation off, as in Lightning: no validation hook runs (they
// ran on zero batches, and EarlyStopping checking after validation failed on a val_loss
// that was never logged).
TEST(TrainerFlags, LimitValBatchesZeroTurnsValidationOff) {
  std::vector<std::string> events;
  TinyModule module(TinyOptions{.events = &events});
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  o.limit_val_batches = BatchLimit::batches(0);
  o.num_sanity_val_steps = 2;
  o.callbacks = {std::make_shared<EarlyStopping>(
      EarlyStoppingOptions{.monitor = "val_loss", .check_on_train_epoch_end = false})};
  Trainer trainer(o);
  Loaders l;
  ASSERT_NO_THROW(trainer.fit(module, l.train, &l.val));
  EXPECT_EQ(count(events, "module:on_validation_start"), 0);
  EXPECT_EQ(count(events, "module:validation_step"), 0);
  EXPECT_EQ(trainer.global_step(), 8);
  EXPECT_FALSE(trainer.has_validated());
}

TEST(ModelCheckpointSteps, SavesEveryNTrainStepsAndResumesMidEpoch) {
  const fs::path dir = fresh_dir("every_n_steps");
  Loaders l;
  std::vector<float> straight;
  {
    TinyModule module;
    TrainerOptions o = quiet_options();
    o.max_epochs = 2;
    o.seed = 11;
    Trainer trainer(o);
    trainer.fit(module, l.train, &l.val);
    straight = testing::flat_params(module);
  }
  {
    TinyModule module;
    TrainerOptions o = quiet_options();
    o.max_epochs = 2;
    o.seed = 11;
    ModelCheckpointOptions mc;
    mc.dirpath = dir.string();
    mc.filename = "{step}";
    mc.save_top_k = -1;
    mc.every_n_train_steps = 3;
    o.callbacks = {std::make_shared<ModelCheckpoint>(mc)};
    Trainer trainer(o);
    trainer.fit(module, l.train, &l.val);
  }
  EXPECT_TRUE(fs::exists(dir / "step=3.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "step=6.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "step=4.safetensors"));
  // Step 3 is the last batch but one of epoch 0: the resumed run finishes bit for bit.
  TinyModule module;
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  Trainer trainer(o);
  trainer.fit(module, l.train, &l.val, (dir / "step=3.safetensors").string());
  EXPECT_EQ(testing::flat_params(module), straight);
}

// Step checkpoints ranked by a validation metric: the steps before the first validation have
// no value yet. As in Lightning they are not ranked (with a warning) instead of failing the
// run; from the first validation on they are.
TEST(ModelCheckpointSteps, MonitoredStepCheckpointsBeforeTheFirstValidationAreNotRanked) {
  const fs::path dir = fresh_dir("steps_monitor");
  TinyModule module;
  ModelCheckpointOptions mc;
  mc.dirpath = dir.string();
  mc.filename = "{step}";
  mc.monitor = "val_loss";
  mc.save_top_k = -1;
  mc.save_last = true;
  mc.every_n_train_steps = 2;
  auto ckpt = std::make_shared<ModelCheckpoint>(mc);
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  o.callbacks = {ckpt};
  Trainer trainer(o);
  Loaders l;
  ASSERT_NO_THROW(trainer.fit(module, l.train, &l.val));
  // Steps 2 and 4 come before the first validation (after step 4's batch); 6 and 8 after it.
  std::vector<std::string> kept;
  for (const auto& [path, score] : ckpt->best_k_models())
    kept.push_back(fs::path(path).filename().string());
  EXPECT_EQ(kept, (std::vector<std::string>{"step=6.safetensors", "step=8.safetensors"}));
  EXPECT_TRUE(fs::exists(dir / "last.safetensors"));
  // A monitor that is never logged is still an error once a validation has run.
  TinyModule other;
  mc.monitor = "val_acc";
  mc.dirpath = fresh_dir("steps_monitor_typo").string();
  TrainerOptions o2 = quiet_options();
  o2.max_epochs = 2;
  o2.callbacks = {std::make_shared<ModelCheckpoint>(mc)};
  Trainer trainer2(o2);
  EXPECT_THROW(trainer2.fit(other, l.train, &l.val), Error);
}

// A module whose val_loss is NaN at the first validation, then 2, 3, 4, ...: a diverged
// forward on the validation data (16-mixed overflow), then finite values.
class NanThenRising : public TinyModule {
 public:
  void validation_step(const data::Example&, int64_t) override {
    log("val_loss", validations_ == 0 ? NAN : 1.0 + static_cast<double>(validations_));
  }
  void on_validation_epoch_end() override { ++validations_; }

 private:
  int64_t validations_ = 0;
};

// A NaN monitored value ranks last, as in Lightning: compared as NaN it would stay the best
// checkpoint for the rest of the run (no value compares better) and never leave the top k.
TEST(ModelCheckpointSteps, ANanScoreRanksLast) {
  const fs::path dir = fresh_dir("nan_score");
  NanThenRising module;
  ModelCheckpointOptions mc;
  mc.dirpath = dir.string();
  mc.monitor = "val_loss";
  mc.save_top_k = 2;
  auto ckpt = std::make_shared<ModelCheckpoint>(mc);
  TrainerOptions o = quiet_options();
  o.max_epochs = 4;
  o.callbacks = {ckpt};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  // val_loss: nan, 2, 3, 4. The best is 2; the top 2 are 2 and 3.
  EXPECT_EQ(fs::path(ckpt->best_model_path()).filename(), "epoch=1-step=8.safetensors");
  EXPECT_EQ(ckpt->best_model_score(), 2.0);
  std::vector<std::string> kept;
  for (const auto& [path, score] : ckpt->best_k_models())
    kept.push_back(fs::path(path).filename().string());
  EXPECT_EQ(kept, (std::vector<std::string>{"epoch=1-step=8.safetensors",
                                            "epoch=2-step=12.safetensors"}));
  EXPECT_FALSE(fs::exists(dir / "epoch=0-step=4.safetensors"));
}

// The checkpoint's ModelCheckpoint state holds the scores of the kept checkpoints; an infinite
// one (or a NaN, ranked as one) is written so that it reads back (JSON has no inf: null would
// fail the resume with "corrupt callback state in checkpoint").
TEST(ModelCheckpointSteps, ANonFiniteScoreSurvivesAResume) {
  const fs::path dir = fresh_dir("nan_score_resume");
  ModelCheckpointOptions mc;
  mc.dirpath = dir.string();
  mc.monitor = "val_loss";
  mc.save_top_k = 2;
  mc.save_last = true;
  Loaders l;
  {
    NanThenRising module;
    TrainerOptions o = quiet_options();
    o.max_epochs = 1;  // keeps only the NaN-scored epoch 0
    o.callbacks = {std::make_shared<ModelCheckpoint>(mc)};
    Trainer trainer(o);
    trainer.fit(module, l.train, &l.val);
  }
  NanThenRising module;
  auto ckpt = std::make_shared<ModelCheckpoint>(mc);
  TrainerOptions o = quiet_options();
  o.max_epochs = 3;
  o.callbacks = {ckpt};
  Trainer trainer(o);
  ASSERT_NO_THROW(trainer.fit(module, l.train, &l.val, (dir / "last.safetensors").string()));
  // The resumed module validates NaN first again (its own count): epochs 1, 2 score nan, 2.
  EXPECT_EQ(fs::path(ckpt->best_model_path()).filename(), "epoch=2-step=12.safetensors");
  EXPECT_EQ(ckpt->best_k_models().size(), 2u);
  // A file of an earlier version holds null there: read as the worst score.
  nlohmann::json state = ckpt->state_dict();
  const std::string kept = state["best_k_models"].begin().key();
  state["best_k_models"][kept] = nullptr;
  ModelCheckpoint other(mc);
  other.load_state_dict(state);
  EXPECT_EQ(other.best_k_models().at(kept), INFINITY);
}

// trainer.test(module, loader, "best" | "last"), as Lightning's ckpt_path="best": the
// ModelCheckpoint's files (it read them as file names: "checkpoint file 'best' does not exist").
TEST(ModelCheckpointSteps, TestAndValidateTakeBestAndLast) {
  const fs::path dir = fresh_dir("eval_best_last");
  ModelCheckpointOptions mc;
  mc.dirpath = dir.string();
  mc.monitor = "val_loss";
  mc.save_last = true;
  auto ckpt = std::make_shared<ModelCheckpoint>(mc);
  TinyModule module;
  TrainerOptions o = quiet_options();
  o.max_epochs = 3;
  o.callbacks = {ckpt};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  ASSERT_FALSE(ckpt->best_model_path().empty());
  const auto best = trainer.test(module, l.val, "best");
  EXPECT_EQ(best, trainer.test(module, l.val, ckpt->best_model_path()));
  const auto last = trainer.validate(module, l.val, "last");
  EXPECT_EQ(last, trainer.validate(module, l.val, (dir / "last.safetensors").string()));
  // Without a ModelCheckpoint there is nothing to name: an error saying so.
  TrainerOptions plain = quiet_options();
  Trainer other(plain);
  TinyModule fresh;
  try {
    other.test(fresh, l.val, "best");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has none"), std::string::npos) << e.what();
  }
}

// Records the global step of every validation pass.
class ValidationSteps : public Callback {
 public:
  std::vector<int64_t> steps;
  void on_validation_end(Trainer& trainer, TrainModule&) override {
    steps.push_back(trainer.global_step());
  }
};

// A step checkpoint falls between its batch and that batch's validation. The resumed run runs
// that validation first, so it validates at the same steps, with the same weights, as the run
// that was never stopped (skipping it would leave a hole in the curve).
TEST(ModelCheckpointSteps, ACheckpointAtAValidationBoundaryValidatesOnResume) {
  const fs::path dir = fresh_dir("val_boundary");
  Loaders l;
  auto options = [](std::shared_ptr<Callback> recorder) {
    TrainerOptions o = quiet_options();
    o.max_epochs = 1;
    o.seed = 11;
    o.val_check_interval = BatchLimit::batches(2);
    o.callbacks = {std::move(recorder)};
    return o;
  };
  auto straight = std::make_shared<ValidationSteps>();
  std::map<std::string, double> straight_metrics;
  {
    TinyModule module;
    TrainerOptions o = options(straight);
    ModelCheckpointOptions mc;
    mc.dirpath = dir.string();
    mc.filename = "{step}";
    mc.save_top_k = -1;
    mc.every_n_train_steps = 2;
    o.callbacks.push_back(std::make_shared<ModelCheckpoint>(mc));
    Trainer trainer(o);
    trainer.fit(module, l.train, &l.val);
    straight_metrics = trainer.callback_metrics();
  }
  ASSERT_GE(straight->steps.size(), 2u);
  EXPECT_EQ(straight->steps[0], 2);
  auto resumed = std::make_shared<ValidationSteps>();
  TinyModule module;
  Trainer trainer(options(resumed));
  trainer.fit(module, l.train, &l.val, (dir / "step=2.safetensors").string());
  EXPECT_EQ(resumed->steps, straight->steps);
  EXPECT_EQ(trainer.callback_metrics().at("val_loss"), straight_metrics.at("val_loss"));
}

TEST(ModelCheckpointSteps, ResolvesLastAndBest) {
  const fs::path dir = fresh_dir("resolve");
  EXPECT_EQ(resolve_checkpoint_path("some/file.safetensors", dir.string()),
            "some/file.safetensors");
  EXPECT_THROW(resolve_checkpoint_path("last", dir.string()), Error);  // nothing saved yet
  EXPECT_THROW(resolve_checkpoint_path("best", ""), Error);
  Loaders l;
  TinyModule module(TinyOptions{.lr = 0.5});
  TrainerOptions o = quiet_options();
  o.max_epochs = 3;
  ModelCheckpointOptions mc;
  mc.dirpath = dir.string();
  mc.monitor = "val_loss";
  mc.save_top_k = 1;
  mc.save_last = true;
  auto ckpt = std::make_shared<ModelCheckpoint>(mc);
  o.callbacks = {ckpt};
  Trainer trainer(o);
  trainer.fit(module, l.train, &l.val);
  EXPECT_EQ(resolve_checkpoint_path("last", dir.string()), (dir / "last.safetensors").string());
  EXPECT_EQ(resolve_checkpoint_path("best", dir.string()), ckpt->best_model_path());
  fs::remove(ckpt->best_model_path());
  EXPECT_THROW(resolve_checkpoint_path("best", dir.string()), Error);
}

TEST(LearningRateMonitor, RecordsAndLogsTheLrOfEveryEpoch) {
  TinyModule module(TinyOptions{.schedulers = [](optim::Optimizer& opt) {
    return std::vector<LRSchedulerConfig>{
        {std::make_shared<optim::StepLR>(opt, 1, 0.5), "epoch", 1}};
  }});
  auto monitor = std::make_shared<LearningRateMonitor>();
  auto logger = std::make_shared<MemoryLogger>();
  TrainerOptions o = quiet_options();
  o.max_epochs = 3;
  o.callbacks = {monitor};
  o.loggers = {logger};
  Trainer trainer(o);
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  const std::vector<double> expected = {0.1, 0.05, 0.025};
  EXPECT_EQ(monitor->lrs().at("lr-SGD"), expected);
  int logged = 0;
  for (const auto& r : logger->rows) logged += r.name == "lr-SGD";
  EXPECT_EQ(logged, 3);
  EXPECT_THROW(LearningRateMonitor("batch"), Error);
}

TEST(ModelSummary, CountsParametersDtypesAndBytesPerLayer) {
  TinyModule module;
  module.configure_model();
  const auto rows = summarize_layers(module, 2);
  ASSERT_EQ(rows.size(), 4u);  // net, net.0, net.1, net.2
  EXPECT_EQ(rows[0].name, "net");
  EXPECT_EQ(rows[1].name, "net.0");
  EXPECT_EQ(rows[1].type, "Linear");
  EXPECT_EQ(rows[1].parameters, 4 * 8 + 8);
  EXPECT_EQ(rows[1].dtypes, "float32");
  EXPECT_EQ(rows[1].state_bytes, (4 * 8 + 8) * 4);
  EXPECT_EQ(rows[2].parameters, 0);  // ReLU
  module.child("net")->get_submodule("0").named_parameters()[0].second.requires_grad_(false);
  const ModelSummaryTotals t = summarize_totals(module);
  EXPECT_EQ(t.parameters, 67);
  EXPECT_EQ(t.trainable_parameters, 67 - 32);
  EXPECT_EQ(t.state_bytes, 67 * 4);
  const std::string table = model_summary(module, 2);
  EXPECT_NE(table.find("net.2"), std::string::npos);
  EXPECT_NE(table.find("Total params"), std::string::npos);
  EXPECT_THROW(summarize_layers(module, 0), Error);
}

}  // namespace
}  // namespace mantissa::train
