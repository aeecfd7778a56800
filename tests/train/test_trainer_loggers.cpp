// What the Trainer sends its loggers, as Lightning's logger connector does: every row carries
// the epoch it belongs to (metrics.csv's "epoch" column) and the module's hyperparameters go
// to hparams.yaml in the log directory.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <tuple>

#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/lr_monitor.h"
#include "mantissa/train/report/logger.h"
#include "support/temp_dir.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

TEST(TrainerLoggers, MetricsCsvHasAnEpochColumnAndHparamsYamlIsWritten) {
  mantissa::testing::TempDir dir;
  auto csv = std::make_shared<CSVLogger>(dir.str(), "logs");
  TrainerOptions o = testing::quiet_options();
  o.max_epochs = 2;
  o.log_every_n_steps = 1;
  o.loggers.push_back(csv);
  o.callbacks.push_back(std::make_shared<LearningRateMonitor>());
  Trainer trainer(o);
  testing::TinyModule module;
  module.save_hyperparameters({{"hidden", 8}, {"model", "tiny mlp"}, {"lr", 0.1}});
  data::DataLoader train(testing::tiny_dataset(16), 8);  // 2 steps per epoch
  data::DataLoader val(testing::tiny_dataset(8, 7), 8);
  trainer.fit(module, train, &val);

  std::istringstream csv_text(slurp(csv->metrics_path()));
  std::string header;
  std::getline(csv_text, header);
  EXPECT_EQ(header, "epoch,lr-SGD,train_loss,val_loss,step");
  // (epoch, step) of every row: the lr at each epoch start, the loss of each step, the
  // validation at each epoch end, at Lightning's steps (the first step's row is step 0).
  std::vector<std::pair<std::string, std::string>> rows;
  for (std::string line; std::getline(csv_text, line);) {
    const std::vector<std::string> cells = split(line);
    ASSERT_EQ(cells.size(), 5u) << line;
    rows.emplace_back(cells.front(), cells.back());
  }
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"0", "0"}, {"0", "0"}, {"0", "1"}, {"0", "1"},
      {"1", "2"}, {"1", "2"}, {"1", "3"}, {"1", "3"}};
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(slurp(csv->log_dir() + "/hparams.yaml"), "hidden: 8\nlr: 0.1\nmodel: \"tiny mlp\"\n");
}

// A logger that keeps every row it receives.
class RowLogger : public Logger {
 public:
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override {
    rows.push_back({metrics, step});
  }
  void log_hyperparams(const nlohmann::json&) override {}
  std::string log_dir() const override { return ""; }
  std::vector<std::pair<std::map<std::string, double>, int64_t>> rows;
};

// log(name, v, prog_bar, on_step = true, on_epoch = true), Lightning's forked metric: the
// loggers get <name>_step at the steps and <name>_epoch at the epoch's end (they got one
// column mixing the step values with the epoch mean), callback_metrics both and <name>. A
// validation value logged on_step went into the next training step's row under that step's
// number; it now stays out of the training rows.
TEST(TrainerLoggers, StepAndEpochMetricIsLoggedAsStepAndEpochColumns) {
  class Forked : public testing::TinyModule {
   public:
    Tensor training_step(const data::Example& batch, int64_t) override {
      Tensor loss = cross_entropy(net_->forward(batch.input), batch.target);
      log("loss", loss.item(), false, /*on_step=*/true, /*on_epoch=*/true);
      return loss;
    }
    void validation_step(const data::Example& batch, int64_t) override {
      log("vl", cross_entropy(net_->forward(batch.input), batch.target).item(), false,
          /*on_step=*/true, /*on_epoch=*/true);
    }
  } module;
  auto logger = std::make_shared<RowLogger>();
  TrainerOptions o = testing::quiet_options();
  o.max_epochs = 2;
  o.log_every_n_steps = 1;
  o.loggers.push_back(logger);
  Trainer trainer(o);
  data::DataLoader train(testing::tiny_dataset(16), 8);  // 2 steps per epoch
  data::DataLoader val(testing::tiny_dataset(8, 7), 8);
  trainer.fit(module, train, &val);

  std::vector<std::pair<std::vector<std::string>, int64_t>> got;
  std::vector<double> step_losses;
  for (const auto& [row, step] : logger->rows) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : row) keys.push_back(k);
    got.emplace_back(keys, step);
    if (row.count("loss_step")) step_losses.push_back(row.at("loss_step"));
  }
  using Keys = std::vector<std::string>;
  const std::vector<std::pair<Keys, int64_t>> expected = {
      {{"epoch", "loss_step"}, 0},  {{"epoch", "loss_step"}, 1}, {{"epoch", "vl_epoch"}, 1},
      {{"epoch", "loss_epoch"}, 1}, {{"epoch", "loss_step"}, 2}, {{"epoch", "loss_step"}, 3},
      {{"epoch", "vl_epoch"}, 3},   {{"epoch", "loss_epoch"}, 3}};
  EXPECT_EQ(got, expected);
  EXPECT_EQ(step_losses, trainer.step_losses());
  const auto& m = trainer.callback_metrics();
  EXPECT_EQ(m.at("loss_epoch"), (step_losses[2] + step_losses[3]) / 2);
  EXPECT_EQ(m.at("loss"), m.at("loss_epoch"));  // the latest: the epoch's mean
  EXPECT_EQ(m.at("loss_step"), step_losses[3]);
  EXPECT_EQ(m.at("vl"), m.at("vl_epoch"));
  EXPECT_TRUE(m.count("vl_step"));
}

// A value logged in on_train_epoch_end is the epoch's (Lightning's defaults there: on_epoch):
// it reaches the loggers in a row of that epoch, and the monitoring callbacks that run after
// the module see it. It was a step value: sent with the next logging step's row, in the next
// epoch, and the last epoch's never.
TEST(TrainerLoggers, WhatOnTrainEpochEndLogsIsTheEpochs) {
  class EpochEnd : public testing::TinyModule {
   public:
    void on_train_epoch_end() override { log("epoch_metric", 100.0 + static_cast<double>(n_++)); }

   private:
    int64_t n_ = 0;
  } module;
  auto logger = std::make_shared<RowLogger>();
  mantissa::testing::TempDir dir;
  ModelCheckpointOptions mc;
  mc.dirpath = dir.file("ckpt");
  mc.monitor = "epoch_metric";
  mc.save_top_k = 1;
  auto ckpt = std::make_shared<ModelCheckpoint>(mc);
  TrainerOptions o = testing::quiet_options();
  o.max_epochs = 3;
  o.log_every_n_steps = 3;
  o.loggers.push_back(logger);
  o.callbacks = {ckpt};
  Trainer trainer(o);
  data::DataLoader train(testing::tiny_dataset(16), 8);  // 2 steps per epoch
  trainer.fit(module, train);

  std::vector<std::tuple<double, double, int64_t>> got;  // (value, epoch, step)
  for (const auto& [row, step] : logger->rows) {
    if (row.count("epoch_metric")) got.emplace_back(row.at("epoch_metric"), row.at("epoch"), step);
  }
  const std::vector<std::tuple<double, double, int64_t>> expected = {
      {100, 0, 1}, {101, 1, 3}, {102, 2, 5}};
  EXPECT_EQ(got, expected);
  EXPECT_EQ(ckpt->best_model_score(), 100.0);  // min: the first epoch's
  EXPECT_EQ(trainer.callback_metrics().at("epoch_metric"), 102.0);
}

TEST(TrainerLoggers, NoHparamsNoHparamsYaml) {
  mantissa::testing::TempDir dir;
  auto csv = std::make_shared<CSVLogger>(dir.str(), "logs");
  TrainerOptions o = testing::quiet_options();
  o.loggers.push_back(csv);
  Trainer trainer(o);
  testing::TinyModule module;
  data::DataLoader train(testing::tiny_dataset(16), 8);
  trainer.fit(module, train);
  EXPECT_FALSE(std::filesystem::exists(csv->log_dir() + "/hparams.yaml"));
}

}  // namespace
}  // namespace mantissa::train
