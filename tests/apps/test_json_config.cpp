// The --config JSON format's numbers, both ways: the resolved configuration written next to the
// checkpoints (JsonConfig::to_config) and a config read back (from_config). Values that are no
// int64 -- "inf", "nan", a uint64 seed above INT64_MAX -- are never cast from a double to int64,
// which is undefined (the sanitizer build stops there; x86 gives -9223372036854775808), and a
// JSON integer above INT64_MAX does not read back as a negative number.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "json_config.h"

namespace mantissa::app {
namespace {

TEST(JsonConfig, ResolvedConfigKeepsNonFiniteAndLargeWholeNumbers) {
  CLI::App cli{"test"};
  double clip = 0, lr = 0, big_float = 0;
  uint64_t seed = 0;
  int64_t steps = 0, negative = 0;
  cli.add_option("--gradient-clip-val", clip);
  cli.add_option("--lr", lr);
  cli.add_option("--big", big_float);
  cli.add_option("--seed", seed);
  cli.add_option("--max-steps", steps);
  cli.add_option("--negative", negative);
  cli.parse(std::vector<std::string>{"-9223372036854775808", "--negative", "12", "--max-steps",
                                     "18446744073709551615", "--seed", "1e30", "--big", "nan",
                                     "--lr", "inf", "--gradient-clip-val"});  // reversed
  const nlohmann::json j = nlohmann::json::parse(JsonConfig().to_config(&cli, false, false, ""));
  EXPECT_EQ(j.at("gradient-clip-val"), "inf");
  EXPECT_EQ(j.at("lr"), "nan");
  EXPECT_TRUE(j.at("big").is_number_float());
  EXPECT_DOUBLE_EQ(j.at("big").get<double>(), 1e30);
  ASSERT_TRUE(j.at("seed").is_number_unsigned());
  EXPECT_EQ(j.at("seed").get<uint64_t>(), UINT64_MAX);
  ASSERT_TRUE(j.at("max-steps").is_number_integer());
  EXPECT_EQ(j.at("max-steps").get<int64_t>(), 12);
  EXPECT_EQ(j.at("negative").get<int64_t>(), INT64_MIN);
}

TEST(JsonConfig, IntegerAboveInt64IsReadBackUnchanged) {
  std::istringstream in(R"({"seed": 18446744073709551615, "max_steps": -3, "lr": 0.5})");
  const std::vector<CLI::ConfigItem> items = JsonConfig("train").from_config(in);
  ASSERT_EQ(items.size(), 3u);
  for (const CLI::ConfigItem& item : items) {
    ASSERT_EQ(item.inputs.size(), 1u) << item.name;
    if (item.name == "seed") EXPECT_EQ(item.inputs[0], "18446744073709551615");
    if (item.name == "max-steps") EXPECT_EQ(item.inputs[0], "-3");
    if (item.name == "lr") EXPECT_EQ(item.inputs[0], "0.5");
  }
}

}  // namespace
}  // namespace mantissa::app
