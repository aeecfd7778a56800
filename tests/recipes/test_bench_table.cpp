// `mantissa bench`'s table: samples/s whole, but with one decimal below 100, where whole
// numbers hid the difference the ratio column shows (the GPT at batch 1: "1" and "1" beside
// a ratio of 0.82).
#include <gtest/gtest.h>

#include <string>

#include "mantissa/recipes/bench_run.h"

namespace mantissa::recipes {
namespace {

BenchResult result(const std::string& precision, double samples_per_second) {
  BenchResult r;
  r.precision = precision;
  r.metrics.samples_per_second = samples_per_second;
  r.metrics.peak_training_memory_bytes = 1 << 20;
  r.metrics.epoch_seconds = {1.0};
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

}  // namespace
}  // namespace mantissa::recipes
