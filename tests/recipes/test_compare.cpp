// mantissa compare: the table and JSON from known metrics, input checks before any training,
// and one small real run whose step losses match the epoch means.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/data/fashion_mnist.h"
#include "mantissa/recipes/bench_run.h"
#include "mantissa/recipes/compare_run.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/train/report/html_report.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

TrainMetrics fake(const std::string& p, double sps, int64_t mem, double acc, double loss) {
  TrainMetrics m;
  m.precision = p;
  m.samples_per_second = sps;
  m.peak_training_memory_bytes = mem;
  m.peak_memory_bytes = mem + (100 << 20);
  m.test_accuracy = {0.5, acc};
  m.train_loss = {1.0, loss};
  m.step_losses = {2.0, 1.0, loss};
  return m;
}

// The --fp8-* settings read the same in the JSON reports of compare and bench as in a
// checkpoint's hyper_parameters: the flag's name and a typed value ("fp8-amax-history-len": 16).
// The reports wrote the settings map as given ("fp8_amax_history_len": "16", "fp8_format":
// "e4m3"), a second spelling of the same option.
TEST(Compare, ReportsSpellFp8SettingsAsCheckpointsDo) {
  const PrecisionSettings given = {{"fp8_format", "e4m3"},
                                   {"fp8_amax_history_len", "16"},
                                   {"fp8_amax_compute_algo", "MOST_RECENT"},
                                   {"fp8_margin", "2"},
                                   {"fp8_exclude", "net.2, net.0,net.2"}};
  const nlohmann::json expected = {{"fp8-format", "E4M3"},
                                   {"fp8-amax-history-len", 16},
                                   {"fp8-amax-compute-algo", "most_recent"},
                                   {"fp8-margin", 2},
                                   {"fp8-exclude", "net.0,net.2"}};
  // The checkpoint of a transformer-engine run with those flags.
  TrainOptions t;
  t.precision = "transformer-engine";
  t.precision_options = given;
  const nlohmann::json checkpoint = image_model_hparams(t);

  CompareOptions c;
  c.precisions = {"32-true", "transformer-engine"};
  c.precision_options = given;
  const auto compare = nlohmann::json::parse(
      compare_json(c, {fake("32-true", 2000, 8 << 20, 0.86, 0.40)}))["precision_options"];

  mantissa::testing::TempDir dir;
  BenchOptions b;
  b.precisions = c.precisions;
  b.precision_options = given;
  b.json = dir.file("bench.json");
  write_bench_json(b, {});
  std::ifstream bench_file(b.json);
  const auto bench = nlohmann::json::parse(bench_file)["precision_options"];

  EXPECT_EQ(compare, expected);
  EXPECT_EQ(bench, expected);
  for (const auto& [key, value] : expected.items()) EXPECT_EQ(checkpoint.at(key), value) << key;

  // Only the settings given are recorded, each in that spelling.
  c.precision_options = {{"fp8_margin", "1"}};
  EXPECT_EQ(nlohmann::json::parse(compare_json(c, {}))["precision_options"],
            (nlohmann::json{{"fp8-margin", 1}}));
}

TEST(Compare, TableAgainstBaseline) {
  std::vector<TrainMetrics> runs = {fake("bf16-mixed", 3000, 6 << 20, 0.85, 0.41),
                                    fake("32-true", 2000, 8 << 20, 0.86, 0.40)};
  runs[0].skipped_steps = 0;
  EXPECT_EQ(compare_baseline(runs), 1u);  // 32-true even when not first
  const std::string t = format_compare_table(runs);
  EXPECT_NE(
      t.find(
          "bf16-mixed      0.8500     0.4100       3000     1.50x        6.0     0.75x        0\n"),
      std::string::npos)
      << t;
  EXPECT_NE(
      t.find(
          "32-true         0.8600     0.4000       2000     1.00x        8.0     1.00x        -\n"),
      std::string::npos)
      << t;
  EXPECT_NE(t.find("relative to 32-true"), std::string::npos);
  // A name longer than the column widens it for every row: the columns stay aligned.
  runs.push_back(fake("transformer-engine-float16", 2500, 7 << 20, 0.85, 0.41));
  const std::string wide = format_compare_table(runs);
  EXPECT_NE(wide.find("transformer-engine-float16    0.8500"), std::string::npos) << wide;
  EXPECT_NE(wide.find("32-true                       0.8600"), std::string::npos) << wide;
  runs.pop_back();

  CompareOptions o;
  const auto j = nlohmann::json::parse(compare_json(o, runs));
  EXPECT_EQ(j["baseline"], "32-true");
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["runs"][0]["speedup"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["runs"][0]["memory_ratio"].get<double>(), 0.75);
  EXPECT_EQ(j["runs"][0]["skipped_steps"], 0);
  EXPECT_FALSE(j["runs"][1].contains("skipped_steps"));
  EXPECT_EQ(j["runs"][1]["step_losses"].size(), 3u);

  const std::string html = compare_html(o, runs);
  size_t polylines = 0;
  for (size_t p = html.find("<polyline"); p != std::string::npos; p = html.find("<polyline", p + 1))
    ++polylines;
  EXPECT_EQ(polylines, 2u);
}

// The settings that change what the runs train are in both reports: with --lora-rank even
// 32-true trains only the adapters, so a report without it misreads as full training. The
// JSON also gives each run's parameter counts under the metrics JSON's names and meaning:
// "parameters" all of them, "trainable_parameters" those that train (all, unless some froze).
TEST(Compare, ReportsRecordLoraInitFromQuantAndFp8Settings) {
  std::vector<TrainMetrics> runs = {fake("32-true", 2000, 8 << 20, 0.86, 0.40),
                                    fake("nf4", 1500, 6 << 20, 0.85, 0.41)};
  runs[0].trainable_parameters = 10714;
  runs[0].parameters = 214000;
  runs[1].parameters = 203530;
  CompareOptions o;
  o.precisions = {"32-true", "nf4", "transformer-engine"};
  o.quant.lora_rank = 8;
  o.quant.lora_alpha = 16;
  o.quant.init_from = "ck/last.safetensors";
  o.quant.quant_dtype = "fp32";
  o.precision_options = {{"fp8_format", "E4M3"}};
  const auto j = nlohmann::json::parse(compare_json(o, runs));
  for (const char* key : {"lora", "init_from", "quant_dtype", "precision_options"})
    ASSERT_TRUE(j.contains(key)) << key;
  ASSERT_TRUE(j["runs"][0].contains("trainable_parameters"));
  EXPECT_EQ(j["lora"]["rank"], 8);
  EXPECT_DOUBLE_EQ(j["lora"]["alpha"].get<double>(), 16.0);
  EXPECT_EQ(j["init_from"], "ck/last.safetensors");
  EXPECT_EQ(j["quant_dtype"], "fp32");
  EXPECT_EQ(j["precision_options"]["fp8-format"], "E4M3");
  for (const char* key : {"parameters", "trainable_parameters"}) {
    ASSERT_TRUE(j["runs"][0].contains(key)) << key;
    ASSERT_TRUE(j["runs"][1].contains(key)) << key;
  }
  EXPECT_EQ(j["runs"][0]["trainable_parameters"], 10714);
  EXPECT_EQ(j["runs"][0]["parameters"], 214000);
  EXPECT_FALSE(j["runs"][0].contains("total_parameters"));
  EXPECT_EQ(j["runs"][1]["parameters"], 203530);
  EXPECT_EQ(j["runs"][1]["trainable_parameters"], 203530);
  const std::string html = compare_html(o, runs);
  EXPECT_NE(html.find("<dt>lora</dt><dd>rank 8, alpha 16, dropout 0"), std::string::npos) << html;
  EXPECT_NE(html.find("<dt>init from</dt><dd>ck/last.safetensors</dd>"), std::string::npos);
  EXPECT_NE(html.find("<dt>quantized layers</dt><dd>compute dtype fp32</dd>"), std::string::npos);
  EXPECT_NE(html.find("<dt>fp8-format</dt><dd>E4M3</dd>"), std::string::npos);
  // Without those flags neither report names them.
  CompareOptions plain;
  const auto jp = nlohmann::json::parse(compare_json(plain, runs));
  EXPECT_FALSE(jp.contains("lora"));
  EXPECT_FALSE(jp.contains("init_from"));
  EXPECT_FALSE(jp.contains("quant_dtype"));
  EXPECT_EQ(compare_html(plain, runs).find("<dt>lora</dt>"), std::string::npos);
}

// A quantized precision without adapters trained only its biases: the reports say so (the
// console warned when it ran; the JSON and HTML did not), and not once adapters were added.
TEST(Compare, ReportsWarnOfFrozenQuantizedRunsWithoutAdapters) {
  std::vector<TrainMetrics> runs = {fake("32-true", 2000, 8 << 20, 0.86, 0.40),
                                    fake("nf4", 1500, 6 << 20, 0.31, 1.9),
                                    fake("int8-training", 1500, 6 << 20, 0.85, 0.41)};
  runs[1].trainable_parameters = 42;
  runs[1].parameters = 25450;
  CompareOptions o;
  o.precisions = {"32-true", "nf4", "int8-training"};
  const auto j = nlohmann::json::parse(compare_json(o, runs));
  ASSERT_EQ(j["warnings"].size(), 1u) << j["warnings"];
  EXPECT_EQ(j["warnings"][0],
            "nf4 froze its quantized Linear weights and had no adapters (--lora-rank 0): 42 of its "
            "25450 parameters trained, so its accuracy is not that of full training; add "
            "--lora-rank 8 for QLoRA fine-tuning");
  EXPECT_NE(compare_html(o, runs).find("nf4 froze its quantized Linear weights"),
            std::string::npos);
  o.quant.lora_rank = 8;
  EXPECT_TRUE(nlohmann::json::parse(compare_json(o, runs))["warnings"].empty());
}

// The reports carry every warning printed for the run (an unreliable timing, an emulated
// precision), then their own, each once: they held only the bf16 one.
TEST(Compare, ReportsCarryThePrintedWarnings) {
  std::vector<TrainMetrics> runs = {fake("32-true", 2000, 8 << 20, 0.86, 0.40),
                                    fake("nf4", 1500, 6 << 20, 0.31, 1.9)};
  runs[1].trainable_parameters = 42;
  runs[1].parameters = 25450;
  CompareOptions o;
  o.precisions = {"32-true", "nf4"};
  const std::vector<std::string> printed = {
      "16-mixed: its timing rounds differ by 18.8x (1 to 19 samples/s): ...",
      "precision '16-mixed' is emulated on this CPU",
      "16-mixed: its timing rounds differ by 18.8x "
      "(1 to 19 samples/s): ..."};
  const auto j = nlohmann::json::parse(compare_json(o, runs, printed));
  ASSERT_EQ(j["warnings"].size(), 3u) << j["warnings"];
  EXPECT_EQ(j["warnings"][0], printed[0]);
  EXPECT_EQ(j["warnings"][1], printed[1]);
  EXPECT_EQ(j["warnings"][2].get<std::string>().rfind("nf4 froze its quantized Linear", 0), 0u);
  const std::string html = compare_html(o, runs, printed);
  EXPECT_NE(html.find("its timing rounds differ by 18.8x"), std::string::npos);
  EXPECT_NE(html.find("is emulated on this CPU"), std::string::npos);
}

TEST(Compare, BaselineIsFirstWithout32True) {
  std::vector<TrainMetrics> runs = {fake("bf16-true", 3000, 4 << 20, 0.8, 0.5),
                                    fake("bf16-mixed", 1500, 8 << 20, 0.8, 0.5)};
  EXPECT_EQ(compare_baseline(runs), 0u);
  EXPECT_NE(format_compare_table(runs).find("0.50x        8.0     2.00x"), std::string::npos);
}

// A precision that diverged is a row saying so; the others are compared against the first run
// that finished (32-true, when it diverged, is no baseline); the JSON and HTML name it too.
TEST(Compare, ADivergedPrecisionIsReportedAndTheOthersCompared) {
  TrainMetrics diverged;
  diverged.precision = "32-true";
  diverged.diverged = "[Trainer] the loss became NaN in optimizer step 2";
  std::vector<TrainMetrics> runs = {diverged, fake("bf16-mixed", 3000, 6 << 20, 0.85, 0.41),
                                    fake("16-mixed", 1500, 6 << 20, 0.84, 0.42)};
  EXPECT_EQ(compare_baseline(runs), 1u);
  const std::string t = format_compare_table(runs);
  EXPECT_NE(t.find("32-true      diverged: [Trainer] the loss became NaN in optimizer step 2\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("16-mixed        0.8400     0.4200       1500     0.50x"), std::string::npos)
      << t;
  EXPECT_NE(t.find("relative to bf16-mixed"), std::string::npos) << t;
  CompareOptions o;
  const auto j = nlohmann::json::parse(compare_json(o, runs));
  EXPECT_EQ(j["baseline"], "bf16-mixed");
  EXPECT_EQ(j["runs"][0]["diverged"], diverged.diverged);
  EXPECT_FALSE(j["runs"][0].contains("samples_per_second"));
  EXPECT_DOUBLE_EQ(j["runs"][2]["speedup"].get<double>(), 0.5);
  const std::string html = compare_html(o, runs);
  EXPECT_NE(html.find("32-true diverged"), std::string::npos);
}

// Every precision diverged: the footer says that none converged (not "relative to nf4", a
// diverged run as the baseline of ratios no row has), and the JSON's baseline is null.
TEST(Compare, NoBaselineWhenEveryPrecisionDiverged) {
  TrainMetrics nf4, fp16;
  nf4.precision = "nf4";
  nf4.diverged = "[Trainer] the loss became NaN in optimizer step 2";
  fp16.precision = "16-true";
  fp16.diverged = "[Trainer] the loss became inf in optimizer step 1";
  const std::vector<TrainMetrics> runs = {nf4, fp16};
  const std::string t = format_compare_table(runs);
  EXPECT_EQ(t.find("relative to"), std::string::npos) << t;
  EXPECT_NE(t.find("no precision converged, so there is no baseline and no speed-up or memory "
                   "ratio"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("nf4          diverged: [Trainer] the loss became NaN"), std::string::npos) << t;
  CompareOptions o;
  const auto j = nlohmann::json::parse(compare_json(o, runs));
  EXPECT_TRUE(j["baseline"].is_null());
  EXPECT_EQ(j["runs"][1]["diverged"], fp16.diverged);
  EXPECT_EQ(compare_html(o, runs).find("class=\"baseline\""), std::string::npos);
}

TEST(Compare, RejectsBadPrecisionListsBeforeTraining) {
  CompareOptions o;
  o.data_dir = "/nonexistent";  // never reached: names are checked first
  o.precisions = {"32-true", "fp7"};
  mantissa::testing::expect_error([&] { run_compare(o); }, {"fp7", "valid values are"});
  o.precisions = {"bf16-mixed", "bf16"};  // the legacy alias names the same precision
  mantissa::testing::expect_error(
      [&] { run_compare(o); },
      {"compare", "precision 'bf16-mixed' is listed twice: 'bf16-mixed' and 'bf16'"});
  // Either order names both spellings as typed (the alias first named the canonical one twice).
  o.precisions = {"bf16", "bf16-mixed"};
  mantissa::testing::expect_error(
      [&] { run_compare(o); },
      {"compare", "precision 'bf16-mixed' is listed twice: 'bf16' and 'bf16-mixed'"});
  o.precisions = {"32-true", "16-mixed", "32-true"};
  mantissa::testing::expect_error([&] { run_compare(o); },
                                  {"compare", "precision '32-true' is listed twice"});
  o.precisions = {};
  mantissa::testing::expect_error([&] { run_compare(o); }, {"at least one precision"});
}

TEST(Compare, Median) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
}

// compare --model gpt is refused naming the models compare supports (not gpt among them).
TEST(Compare, RefusesGptNamingTheModelsItSupports) {
  CompareOptions o;
  o.model = "gpt";
  o.data_dir = "/nonexistent";
  mantissa::testing::expect_error(
      [&] { run_compare(o); },
      {"compare does not support model 'gpt'; it supports mlp, cnn, vit", "mantissa bench"});
  o.model = "mlp";
  o.timing_rounds = 0;
  mantissa::testing::expect_error([&] { run_compare(o); }, "--rounds must be at least 1");
  o.timing_rounds = 1;
  o.timed_steps = 0;
  mantissa::testing::expect_error([&] { run_compare(o); }, "--timed-steps must be at least 1");
}

// The reports are written after all runs: a bad path must fail before the first.
TEST(Compare, ChecksOutputsBeforeTraining) {
  CompareOptions o;
  o.data_dir = "/nonexistent";
  o.html = std::filesystem::temp_directory_path().string();
  mantissa::testing::expect_error([&] { run_compare(o); }, {"--html", "is a directory"});
  o.html.clear();
  o.json = "/proc/results.json";
  mantissa::testing::expect_error([&] { run_compare(o); }, {"--json", "is not writable"});
}

// A bf16 run on a CPU that emulates bf16: the table, the HTML and the JSON say so.
TEST(Compare, Bf16EmulationWarningInEveryReport) {
  std::vector<TrainMetrics> runs = {fake("32-true", 2000, 8 << 20, 0.86, 0.40),
                                    fake("bf16-mixed", 900, 6 << 20, 0.85, 0.41)};
  EXPECT_EQ(format_compare_table(runs).find("warning:"), std::string::npos);
  runs[1].bf16_emulated = true;
  const std::string table = format_compare_table(runs);
  EXPECT_NE(table.find("warning: "), std::string::npos) << table;
  EXPECT_NE(table.find("emulated"), std::string::npos) << table;
  CompareOptions o;
  const std::string html = compare_html(o, runs);
  EXPECT_NE(html.find("<p class=\"warning\">Warning: "), std::string::npos);
  EXPECT_NE(html.find("median of 3 rounds"), std::string::npos);
  const auto j = nlohmann::json::parse(compare_json(o, runs));
  ASSERT_EQ(j["warnings"].size(), 1u);
  EXPECT_NE(j["warnings"][0].get<std::string>().find("emulated"), std::string::npos);
}

TEST(Compare, SmallRunRecordsStepLosses) {
  if (!std::filesystem::exists(data::FashionMNIST::default_root() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  CompareOptions o;
  o.precisions = {"32-true", "bf16-true"};
  o.epochs = 1;
  o.train_subset = 512;
  o.batch_size = 128;
  o.hidden = "32";
  o.quiet = true;
  o.untimed_steps = 1;  // 3 timing rounds of 1 + 3 steps each: quick
  o.timed_steps = 3;
  const auto runs = run_compare(o);
  ASSERT_EQ(runs.size(), 2u);
  for (const TrainMetrics& m : runs) {
    ASSERT_EQ(m.step_losses.size(), 4u) << m.precision;  // 512 / 128 steps
    // Equal batches: the epoch's mean loss is the mean of the step losses.
    double mean = 0;
    for (double l : m.step_losses) mean += l / 4;
    EXPECT_NEAR(m.train_loss[0], mean, 1e-9) << m.precision;
    EXPECT_NEAR(m.step_losses[0], std::log(10.0), 0.3) << m.precision;  // untrained: ~ln 10
  }
  // Same seed and data: the first step's loss differs only by bf16 rounding.
  EXPECT_NEAR(runs[0].step_losses[0], runs[1].step_losses[0], 0.05);
  EXPECT_EQ(runs[0].precision, "32-true");
  EXPECT_EQ(runs[1].precision, "bf16-true");
  // Throughput: the median of the interleaved timing rounds, not the training run's rate.
  for (const TrainMetrics& m : runs) {
    ASSERT_EQ(m.timed_samples_per_second.size(), 3u) << m.precision;
    EXPECT_EQ(m.samples_per_second, median(m.timed_samples_per_second));
    EXPECT_GT(m.samples_per_second, 0);
    ASSERT_TRUE(m.final_test_accuracy.has_value());
  }
  EXPECT_NE(format_compare_table(runs).find("median of 3 interleaved timing rounds"),
            std::string::npos);
}

// A speed-up from timing rounds far apart is marked in its row (the warning alone sat below a
// table that showed 0.05x without a mark); a baseline far apart marks every row.
TEST(CompareTiming, RowsWithUnreliableSpeedUpsAreMarked) {
  std::vector<TrainMetrics> runs = {fake("32-true", 2000, 8 << 20, 0.86, 0.40),
                                    fake("bf16-mixed", 1000, 6 << 20, 0.85, 0.41),
                                    fake("nf4", 1500, 4 << 20, 0.84, 0.42)};
  for (TrainMetrics& m : runs)
    m.timed_samples_per_second = {m.samples_per_second, m.samples_per_second};
  EXPECT_EQ(format_compare_table(runs).find("x?"), std::string::npos);
  runs[1].timed_samples_per_second = {1000, 50};  // 20x apart
  std::string t = format_compare_table(runs);
  EXPECT_NE(t.find("0.50x?"), std::string::npos) << t;
  EXPECT_NE(t.find("0.75x "), std::string::npos) << t;
  EXPECT_NE(t.find("?: its timing rounds, or 32-true's, differ by more than 1.5x"),
            std::string::npos)
      << t;
  runs[1].timed_samples_per_second = {1000, 1000};
  runs[0].timed_samples_per_second = {2000, 100};
  t = format_compare_table(runs);
  EXPECT_NE(t.find("1.00x?"), std::string::npos) << t;
  EXPECT_NE(t.find("0.50x?"), std::string::npos) << t;
  EXPECT_NE(t.find("0.75x?"), std::string::npos) << t;
}

// The HTML table marks the speed-ups the console table marks, with the same explanation; both
// reports name the CPU and the SIMD level the kernels ran at.
TEST(CompareTiming, HtmlMarksTheSpeedUpsTheTableMarks) {
  std::vector<TrainMetrics> runs = {fake("32-true", 2000, 8 << 20, 0.86, 0.40),
                                    fake("bf16-mixed", 1000, 6 << 20, 0.85, 0.41),
                                    fake("nf4", 1500, 4 << 20, 0.84, 0.42)};
  for (TrainMetrics& m : runs)
    m.timed_samples_per_second = {m.samples_per_second, m.samples_per_second};
  runs[1].timed_samples_per_second = {1000, 50};  // 20x apart
  CompareOptions o;
  o.precisions = {"32-true", "bf16-mixed", "nf4"};
  o.quant.lora_rank = 4;
  const std::string t = format_compare_table(runs);
  ASSERT_NE(t.find("0.50x?"), std::string::npos) << t;
  const std::string html = compare_html(o, runs);
  EXPECT_NE(html.find("<td>1.00x</td>"), std::string::npos);
  EXPECT_NE(html.find(">0.50x?</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>0.75x</td>"), std::string::npos);
  EXPECT_EQ(html.find("1.00x?"), std::string::npos);
  EXPECT_NE(html.find("?: its timing rounds, or 32-true&#39;s, differ by more than 1.5x: that "
                      "speed-up is unreliable"),
            std::string::npos);
  // The CPU: its brand and identity, and the SIMD level, in the settings and the machine text.
  EXPECT_NE(html.find("<dt>CPU</dt><dd>" + train::html_escape(describe_cpu()) + "; SIMD level " +
                      simd_level_name(simd_level())),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("SIMD level: " + std::string(simd_level_name(simd_level()))),
            std::string::npos);
  const auto j = nlohmann::json::parse(compare_json(o, runs));
  EXPECT_EQ(j["cpu"], describe_cpu());
  EXPECT_EQ(j["simd_level"], simd_level_name(simd_level()));
}

// Timing rounds of one precision far apart (a neighbour's load in some of them) are warned about.
TEST(CompareTiming, RoundsFarApartAreWarned) {
  TrainMetrics m;
  m.precision = "bf16-true";
  m.timed_samples_per_second = {62673, 1730, 79970};
  const std::optional<std::string> w = timing_spread_warning(m);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("bf16-true: its timing rounds differ by 46.2x (1730 to 79970 samples/s)"),
            std::string::npos)
      << *w;
  m.timed_samples_per_second = {100000, 120000, 110000};
  EXPECT_FALSE(timing_spread_warning(m).has_value());
  m.timed_samples_per_second = {100000};
  EXPECT_FALSE(timing_spread_warning(m).has_value());
}

}  // namespace
}  // namespace mantissa::recipes
