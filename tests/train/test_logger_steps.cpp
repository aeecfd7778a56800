// The step the Trainer gives its loggers' rows (metrics.csv's "step" column), as Lightning's:
// the number of training batches that ended with an optimizer step before the batch in
// progress, so the first step's row is step 0 and a validation is logged with the row of the
// step before it. mantissa's rows were one higher (the first at step 1).
#include <gtest/gtest.h>

#include <filesystem>

#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/lr_monitor.h"
#include "support/temp_dir.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;

// Every row a logger receives, in order.
class RowLogger : public Logger {
 public:
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override {
    rows.emplace_back(metrics, step);
  }
  void log_hyperparams(const nlohmann::json&) override {}
  std::string log_dir() const override { return ""; }
  std::vector<std::pair<std::map<std::string, double>, int64_t>> rows;

  // (the row's metric other than "epoch", its step) of every row.
  std::vector<std::pair<std::string, int64_t>> names_and_steps() const {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto& [row, step] : rows) {
      for (const auto& [name, value] : row)
        if (name != "epoch") out.emplace_back(name, step);
    }
    return out;
  }
};

// 32 examples in batches of 8: 4 training batches per epoch.
using Loaders = testing::TinyLoaders;

TEST(LoggerSteps, RowsCarryLightningsStepCount) {
  auto logger = std::make_shared<RowLogger>();
  TrainerOptions o = quiet_options();
  o.max_epochs = 2;
  o.log_every_n_steps = 2;
  o.val_check_interval = BatchLimit::batches(2);
  o.loggers = {logger};
  o.callbacks = {std::make_shared<LearningRateMonitor>("step")};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train, &l.val);
  trainer.test(module, l.val);
  // Steps 2, 4, 6, 8 are logged (every second one) as 1, 3, 5, 7, with the learning rate
  // before them and the validation after them; test() after the fit's 8 steps is at 8.
  using Row = std::pair<std::string, int64_t>;
  const std::vector<Row> expected = {
      {"lr-SGD", 1},     {"train_loss", 1}, {"val_loss", 1},   {"lr-SGD", 3},   {"train_loss", 3},
      {"val_loss", 3},   {"lr-SGD", 5},     {"train_loss", 5}, {"val_loss", 5}, {"lr-SGD", 7},
      {"train_loss", 7}, {"val_loss", 7},   {"test_loss", 8}};
  EXPECT_EQ(logger->names_and_steps(), expected);
}

TEST(LoggerSteps, TheFirstStepIsLoggedAsStepZero) {
  auto logger = std::make_shared<RowLogger>();
  TrainerOptions o = quiet_options();
  o.log_every_n_steps = 1;
  o.max_steps = 1;
  o.loggers = {logger};
  Trainer trainer(o);
  TinyModule module;
  Loaders l;
  trainer.fit(module, l.train);
  ASSERT_EQ(logger->rows.size(), 1u);
  EXPECT_EQ(logger->rows[0].second, 0);
  EXPECT_EQ(logger->rows[0].first.at("train_loss"), trainer.step_losses()[0]);
}

// A step checkpoint written before its batch's validation: the resumed run runs that
// validation first and logs it at the step the unbroken run did, then goes on with the same
// rows.
TEST(LoggerSteps, AResumedPendingValidationIsLoggedAtTheUnbrokenRunsStep) {
  mantissa::testing::TempDir dir;
  auto options = [](std::shared_ptr<Logger> logger) {
    TrainerOptions o = quiet_options();
    o.seed = 11;
    o.log_every_n_steps = 1;
    o.val_check_interval = BatchLimit::batches(2);
    o.loggers = {std::move(logger)};
    return o;
  };
  Loaders l;
  auto straight = std::make_shared<RowLogger>();
  {
    TrainerOptions o = options(straight);
    ModelCheckpointOptions mc;
    mc.dirpath = dir.file("ckpt");
    mc.filename = "{step}";
    mc.save_top_k = -1;
    mc.every_n_train_steps = 2;
    o.callbacks = {std::make_shared<ModelCheckpoint>(mc)};
    Trainer trainer(o);
    TinyModule module;
    trainer.fit(module, l.train, &l.val);
  }
  auto resumed = std::make_shared<RowLogger>();
  Trainer trainer(options(resumed));
  TinyModule module;
  trainer.fit(module, l.train, &l.val, dir.file("ckpt/step=2.safetensors"));
  // The straight run: train_loss at 0 and 1, val_loss at 1, ...; the resumed one from the
  // validation after step 2 (logged at 1) on.
  ASSERT_EQ(straight->rows.size(), 6u);
  const decltype(straight->rows) rest(straight->rows.begin() + 2, straight->rows.end());
  EXPECT_EQ(resumed->rows, rest);
  EXPECT_EQ(resumed->rows.front().second, 1);
}

}  // namespace
}  // namespace mantissa::train
