// Fp8StatsMonitor: under "transformer-engine" the loggers get, every log_every_n_steps steps,
// each FP8 layer's scale and the fractions of values that saturated or flushed to zero in the
// interval, and the last interval is kept for the metrics JSON.
#include "mantissa/train/precisions/fp8_stats_monitor.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/tiny_module.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;

class MemoryLogger : public Logger {
 public:
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override {
    for (const auto& [k, v] : metrics) values[step][k] = v;
  }
  void log_hyperparams(const nlohmann::json&) override {}
  std::string log_dir() const override { return ""; }
  std::map<int64_t, std::map<std::string, double>> values;  // step -> name -> value
};

// Two batches of 4 examples x 4 features, all 0.5 except, in the first batch, one value far
// above E4M3's max (448) and one below half its smallest subnormal (2^-10).
std::shared_ptr<data::TensorDataset> outlier_dataset() {
  std::vector<float> x(8 * 4, 0.5f);
  x[0] = 1.0e4f;
  x[1] = 1.0e-4f;
  std::vector<int64_t> y = {0, 1, 2, 0, 1, 2, 0, 1};
  return std::make_shared<data::TensorDataset>(tensor(x, {8, 4}), tensor(y, {8}));
}

// Two optimizer steps of TinyModule under `precision`, logging every step.
struct MonitoredRun {
  std::shared_ptr<MemoryLogger> logger = std::make_shared<MemoryLogger>();
  std::shared_ptr<Fp8StatsMonitor> monitor = std::make_shared<Fp8StatsMonitor>();
  std::unique_ptr<TinyModule> module = std::make_unique<TinyModule>();  // the plugin points to it
  std::unique_ptr<Trainer> trainer;
};

MonitoredRun fit_two_steps(const std::string& precision, bool with_validation,
                           std::map<std::string, std::string> precision_options = {}) {
  MonitoredRun run;
  TrainerOptions o = quiet_options(precision);
  o.precision_options = std::move(precision_options);
  o.max_steps = 2;
  o.log_every_n_steps = 1;
  o.loggers = {run.logger};
  o.callbacks = {run.monitor};
  run.trainer = std::make_unique<Trainer>(o);
  data::DataLoader loader(outlier_dataset(), 4);
  data::DataLoader val_loader(outlier_dataset(), 8);
  run.trainer->fit(*run.module, loader, with_validation ? &val_loader : nullptr);
  return run;
}

TEST(Fp8StatsMonitor, LogsEachIntervalsScaleSaturationAndFlushes) {
  // Validation after the last step: its casts are not counted.
  MonitoredRun run = fit_two_steps("transformer-engine", /*with_validation=*/true);
  const auto& logger = run.logger;
  const auto& monitor = run.monitor;
  Trainer& trainer = *run.trainer;

  // The loggers number optimizer step k as k - 1, as Lightning's do.
  ASSERT_TRUE(logger->values.count(0));
  const auto& step1 = logger->values.at(0);
  // Step 1 casts its input with the initial scale 1: 1e4 saturates, 1e-4 flushes (1 of 16 each).
  EXPECT_DOUBLE_EQ(step1.at("fp8/net.0/input/saturated_fraction"), 1.0 / 16);
  EXPECT_DOUBLE_EQ(step1.at("fp8/net.0/input/flushed_fraction"), 1.0 / 16);
  EXPECT_TRUE(step1.count("fp8/net.0/weight/scale"));
  EXPECT_TRUE(step1.count("fp8/net.2/grad_output/scale"));
  // Step 2 (all 0.5) neither saturates nor flushes.
  const auto& step2 = logger->values.at(1);
  EXPECT_EQ(step2.at("fp8/net.0/input/saturated_fraction"), 0.0);
  EXPECT_EQ(step2.at("fp8/net.0/input/flushed_fraction"), 0.0);
  // The logged scale is the plugin's scale at the end of the interval (the checkpointed one).
  auto& te = dynamic_cast<TransformerEnginePrecision&>(trainer.precision_plugin());
  const nlohmann::json meta = te.state_dict()["fp8_meta"]["net.0"];
  EXPECT_FLOAT_EQ(static_cast<float>(step2.at("fp8/net.0/input/scale")),
                  meta["scale"][0].get<float>());
  // After the 1e4 step the delayed scaling brought the input scale below 1.
  EXPECT_LT(step2.at("fp8/net.0/input/scale"), 1.0);

  // The last interval (step 2, not the validation after it) is what the metrics JSON reports.
  ASSERT_TRUE(monitor->last().has_value());
  const Fp8RoleStats& input = monitor->last()->at("net.0").at("input");
  EXPECT_EQ(input.casts, 16);
  EXPECT_EQ(input.saturated_fraction, 0.0);
  const nlohmann::json j = *monitor->last_json();
  EXPECT_EQ(j["net.2"]["grad_output"]["casts"], 4 * 3);
  EXPECT_TRUE(j["net.0"]["weight"].contains("flushed_fraction"));
}

// An interval's scale and amax are those of its last cast: a later part with no cast (taken after
// a validation, whose casts are dropped, beside the scale training left) keeps the earlier
// pair; a later part with casts brings its own.
TEST(Fp8StatsMonitor, MergingKeepsTheScaleAndAmaxOfTheLastPartThatCast) {
  Fp8Stats interval;
  interval["net.0"]["input"] = {.scale = 896.0f, .amax = 0.5f, .peak = 1.0, .casts = 16};
  Fp8Stats after_validation;
  after_validation["net.0"]["input"] = {.scale = 896.0f, .amax = 1.0e4f, .casts = 0};
  merge_fp8_stats(interval, after_validation);
  const Fp8RoleStats& kept = interval.at("net.0").at("input");
  EXPECT_EQ(kept.scale, 896.0f);
  EXPECT_EQ(kept.amax, 0.5f);
  EXPECT_EQ(kept.casts, 16);
  Fp8Stats next_step;
  next_step["net.0"]["input"] = {.scale = 448.0f, .amax = 1.0f, .peak = 0.5, .casts = 16};
  merge_fp8_stats(interval, next_step);
  const Fp8RoleStats& merged = interval.at("net.0").at("input");
  EXPECT_EQ(merged.scale, 448.0f);
  EXPECT_EQ(merged.amax, 1.0f);
  EXPECT_EQ(merged.casts, 32);
  EXPECT_EQ(merged.peak, 1.0);
}

// A role that casts nothing in the interval is left out: under rowwise-gw-hp the first layer
// makes no input gradient, so its grad_output is never cast; the last layer's is.
TEST(Fp8StatsMonitor, LeavesOutTheRolesThatCastNothing) {
  MonitoredRun run = fit_two_steps("transformer-engine", /*with_validation=*/false,
                                   {{"fp8_recipe", "rowwise-gw-hp"}});
  ASSERT_TRUE(run.monitor->last().has_value());
  const Fp8Stats& last = *run.monitor->last();
  EXPECT_TRUE(last.at("net.0").count("input"));
  EXPECT_FALSE(last.at("net.0").count("grad_output"));
  EXPECT_GT(last.at("net.2").at("grad_output").casts, 0);
  EXPECT_FALSE(run.logger->values.at(1).count("fp8/net.0/grad_output/scale"));
}

// A run that stops with an exception before its first full interval keeps the steps it made as
// its last interval (the metrics JSON of a diverged run reports them).
class ThrowAtStep : public Callback {
 public:
  explicit ThrowAtStep(int64_t step) : step_(step) {}
  void on_train_batch_end(Trainer& trainer, TrainModule&, const Tensor&, const data::Example&,
                          int64_t) override {
    if (trainer.global_step() == step_) throw std::runtime_error("stopped");
  }

 private:
  int64_t step_;
};

TEST(Fp8StatsMonitor, KeepsThePartIntervalOfARunThatStopsWithAnException) {
  auto monitor = std::make_shared<Fp8StatsMonitor>(5);
  TinyModule module;
  TrainerOptions o = quiet_options("transformer-engine");
  o.max_steps = 10;
  o.callbacks = {monitor, std::make_shared<ThrowAtStep>(2)};
  Trainer trainer(o);
  data::DataLoader loader(outlier_dataset(), 4);
  EXPECT_THROW(trainer.fit(module, loader, nullptr), std::runtime_error);
  ASSERT_TRUE(monitor->last().has_value());
  EXPECT_EQ(monitor->last()->at("net.0").at("input").casts, 2 * 16);  // both steps' inputs
}

// An interval of its own: every 2 optimizer steps while the Trainer logs every step, so the
// statistics reach the loggers at steps 2 and 4 only (logged as 1 and 3), each over its 2 steps.
TEST(Fp8StatsMonitor, TakesTheStatisticsEveryNStepsOfItsOwn) {
  auto logger = std::make_shared<MemoryLogger>();
  auto monitor = std::make_shared<Fp8StatsMonitor>(2);
  TinyModule module;
  TrainerOptions o = quiet_options("transformer-engine");
  o.max_epochs = 2;  // 2 batches an epoch
  o.max_steps = 4;
  o.log_every_n_steps = 1;
  o.loggers = {logger};
  o.callbacks = {monitor};
  Trainer trainer(o);
  data::DataLoader loader(outlier_dataset(), 4);
  trainer.fit(module, loader);
  for (int64_t logged = 0; logged < 4; ++logged) {
    ASSERT_TRUE(logger->values.count(logged)) << logged;  // the loss, every step
    EXPECT_EQ(logger->values.at(logged).count("fp8/net.0/input/scale"), logged % 2 == 1 ? 1u : 0u)
        << "logged step " << logged;
  }
  // Steps 1-2 cast the 1e4 batch once: 1 of the interval's 32 inputs saturated.
  EXPECT_DOUBLE_EQ(logger->values.at(1).at("fp8/net.0/input/saturated_fraction"), 1.0 / 32);
  EXPECT_EQ(monitor->last()->at("net.0").at("input").casts, 32);
}

TEST(Fp8StatsMonitor, RefusesANegativeInterval) {
  try {
    Fp8StatsMonitor monitor(-1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--fp8-stats-every"), std::string::npos) << e.what();
  }
}

TEST(Fp8StatsMonitor, DoesNothingWithoutFp8Layers) {
  MonitoredRun run = fit_two_steps("bf16-mixed", /*with_validation=*/false);
  const auto& logger = run.logger;
  const auto& monitor = run.monitor;
  EXPECT_FALSE(monitor->last().has_value());
  for (const auto& [step, row] : logger->values)
    for (const auto& [name, v] : row) EXPECT_EQ(name.rfind("fp8/", 0), std::string::npos) << name;
}

// The statistics of one layer's weight and input, as fp8_stats_json writes them.
nlohmann::json two_roles(double weight_peak, double input_peak,
                         double weight_saturated = 1.0 / 4096) {
  const auto role = [](double peak, double saturated) {
    return nlohmann::json{{"scale", 1037.9}, {"amax", 0.431641},
                          {"peak", peak},    {"saturated_fraction", saturated},
                          {"casts", 4096},   {"flushed_fraction", 0.0}};
  };
  return {{"model.layers.1.self_attn.o_proj",
           {{"weight", role(weight_peak, weight_saturated)}, {"input", role(input_peak, 0.0)}}}};
}

TEST(Fp8StatsMonitor, SummaryCallsNothingSaturatedWhenThePeakIsTheScalesRounding) {
  // Current scaling's amax element, a hair above 448 after the fp32 scale's rounding, is
  // counted saturated though 448 is its correctly rounded value: nothing was clipped.
  const std::string line = fp8_summary_line(two_roles(1.0000000441712993, 0.9));
  EXPECT_EQ(line,
            "FP8: no tensor saturated beyond the scales' rounding; largest peak "
            "model.layers.1.self_attn.o_proj weight: 1.000 of the format's max, 0.0244% of values "
            "a rounding above it (cast to the max); scale 1037.9, amax 0.431641");
  // Nothing above the max: no fraction to give.
  EXPECT_EQ(fp8_summary_line(two_roles(0.9, 0.5, 0.0)),
            "FP8: no tensor saturated beyond the scales' rounding; largest peak "
            "model.layers.1.self_attn.o_proj weight: 0.900 of the format's max; scale 1037.9, "
            "amax 0.431641");
  // A peak an E4M3 step below 464 / 448 clipped nothing either, but only the scales' rounding
  // is let through: above it the peak is the amax growing past the scale (delayed scaling).
  EXPECT_EQ(fp8_summary_line(two_roles(1.0001, 0.9)).rfind("FP8: worst-saturating tensor", 0), 0U);
}

TEST(Fp8StatsMonitor, SummaryNamesTheWorstSaturatingTensorBeyondTheRounding) {
  const std::string line = fp8_summary_line(two_roles(0.9, 1.032));
  EXPECT_EQ(line,
            "FP8: worst-saturating tensor model.layers.1.self_attn.o_proj input: peak 1.032 of the "
            "format's max, 0.0000% of values saturated; scale 1037.9, amax 0.431641");
}

}  // namespace
}  // namespace mantissa::train
