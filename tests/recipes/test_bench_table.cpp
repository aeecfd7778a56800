// `mantissa bench`'s table: samples/s whole, but with one decimal below 100, where whole
// numbers hid the difference the ratio column shows (the GPT at batch 1: "1" and "1" beside
// a ratio of 0.82).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "mantissa/recipes/bench_run.h"

namespace mantissa::recipes {
namespace {

BenchResult result(const std::string& precision, double samples_per_second) {
  BenchResult r;
  r.precision = precision;
  r.metrics.samples_per_second = samples_per_second;
  r.metrics.peak_training_memory_bytes = 1 << 20;
  r.metrics.epoch_seconds = {1.0};
  r.round_samples_per_second = {samples_per_second};
  return r;
}

TEST(BenchTable, SlowRatesKeepOneDecimal) {
  BenchOptions o;
  o.model = "gpt";
  o.batch_size = 1;
  o.steps = 10;
  const std::string slow =
      format_bench_table(o, {result("32-true", 1.46), result("transformer-engine", 1.2)});
  EXPECT_NE(slow.find(" 1.5 "), std::string::npos) << slow;
  EXPECT_NE(slow.find(" 1.2 "), std::string::npos) << slow;
  EXPECT_NE(slow.find(" 0.82 "), std::string::npos) << slow;  // 1.2 / 1.46
  const std::string fast = format_bench_table(o, {result("32-true", 12345.6)});
  EXPECT_NE(fast.find(" 12346 "), std::string::npos) << fast;
}

// Rounds: the table gives the fastest round (its ratio and ms/step too), the median and the
// spread; ms/step stays the last column, where bench/min_of_rounds.sh reads it.
BenchResult rounds_result(const std::string& precision, std::vector<double> rounds) {
  BenchResult r = result(precision, *std::max_element(rounds.begin(), rounds.end()));
  r.round_samples_per_second = std::move(rounds);
  return r;
}

TEST(BenchTable, FastestMedianAndSpreadOfTheRounds) {
  BenchOptions o;
  o.batch_size = 100;
  o.steps = 10;
  o.rounds = 3;
  const BenchResult a = rounds_result("32-true", {1000, 800, 900});
  const BenchResult b = rounds_result("bf16-true", {1500, 1600, 1550});
  EXPECT_EQ(median_samples_per_second(a), 900);
  EXPECT_DOUBLE_EQ(round_spread(a), 0.25);  // 1000 / 800 - 1
  EXPECT_DOUBLE_EQ(round_spread(b), 1600.0 / 1500 - 1);
  EXPECT_EQ(round_spread(rounds_result("16-true", {1234})), 0);
  const std::string table = format_bench_table(o, {a, b});
  EXPECT_NE(table.find("3 rounds"), std::string::npos) << table;
  EXPECT_NE(table.find(" median  spread "), std::string::npos) << table;
  // precision, fastest, ratio, median, spread, MiB, ratio, ms/step (1 s / 10 steps).
  EXPECT_NE(table.find("32-true          1000       1.00         900   25.0%              1.0"
                       "       1.00     100.00\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("bf16-true        1600       1.60        1550    6.7%"), std::string::npos)
      << table;
  EXPECT_NE(table.find("the fastest of 3 rounds per precision"), std::string::npos) << table;
  // Every line that ends in a number is a precision's row (bench/min_of_rounds.sh's test).
  std::istringstream lines(table);
  std::vector<std::string> numeric_ends;
  for (std::string line; std::getline(lines, line);) {
    const std::string last = line.substr(line.find_last_of(' ') + 1);
    if (!last.empty() && last.find_first_not_of("0123456789.") == std::string::npos)
      numeric_ends.push_back(line.substr(0, line.find(' ')));
  }
  EXPECT_EQ(numeric_ends, (std::vector<std::string>{"32-true", "bf16-true"})) << table;
}

// The header names the --fp8-* settings the transformer-engine rows ran under, in a line that
// ends in no number, and says "1 thread".
TEST(BenchTable, HeaderNamesTheFp8SettingsAndTheThreads) {
  BenchOptions o;
  o.steps = 10;
  o.precision_options = {
      {"fp8_recipe", "delayed"}, {"fp8_amax_history_len", "16"}, {"fp8_power_2_scales", "true"}};
  BenchResult a = result("bf16-mixed", 1000), b = result("transformer-engine", 900);
  a.metrics.threads = b.metrics.threads = 1;
  const std::string table = format_bench_table(o, {a, b});
  EXPECT_NE(table.find(" rounds, 1 thread\n"), std::string::npos) << table;
  EXPECT_NE(table.find("transformer-engine with --fp8-amax-history-len 16 --fp8-power-2-scales "
                       "--fp8-recipe delayed (its --fp8-* settings)\n"),
            std::string::npos)
      << table;
  // Without a transformer-engine row the settings are not shown.
  EXPECT_EQ(format_bench_table(o, {a}).find("--fp8-"), std::string::npos);
}

TEST(BenchTable, RoundsThatDifferByMoreThanTenPercentAreWarnedAbout) {
  EXPECT_FALSE(bench_spread_warning(rounds_result("32-true", {1000, 1090, 1050})));
  EXPECT_FALSE(bench_spread_warning(rounds_result("32-true", {1000})));
  const std::optional<std::string> w =
      bench_spread_warning(rounds_result("bf16-mixed", {1000, 1250, 1200}));
  ASSERT_TRUE(w);
  EXPECT_EQ(*w,
            "bf16-mixed: its 3 rounds differ by 25% (1000 to 1250 samples/s): this machine is "
            "noisy (other load, frequency changes), so a single round can mislead; the table "
            "gives the fastest round; rerun with more --rounds or --steps, or on a quiet machine");
}

}  // namespace
}  // namespace mantissa::recipes
