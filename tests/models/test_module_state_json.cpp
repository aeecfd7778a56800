// A training module's own checkpoint state is checked as it is read (module_state_json.h): a
// damaged history value or counter must not go on into the run's metrics.
#include "mantissa/models/module_state_json.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/test_util.h"

namespace mantissa::models {
namespace {

using mantissa::testing::expect_error;

TEST(ModuleStateJson, HistoriesOutsideTheirRangeAreRefused) {
  const nlohmann::json state = {{"test_accuracy", {0.5, -1.0}},
                                {"huge", {0.5, 9.2e18}},
                                {"nulls", {nullptr, 0.25}},
                                {"text", {std::string(500, 'x')}}};
  expect_error([&] { doubles_from_json(state, "test_accuracy", "ImageClassifier", 0.0, 1.0); },
               {"'module.test_accuracy' holds -1, outside [0, 1]"});
  expect_error([&] { doubles_from_json(state, "huge", "ImageClassifier", 0.0, 1.0); },
               {"'module.huge' holds 9.2e+18, outside [0, 1]"});
  const std::vector<double> v = doubles_from_json(state, "nulls", "ImageClassifier", 0.0, 1.0);
  EXPECT_TRUE(std::isnan(v[0]));  // null: a skipped step's loss
  EXPECT_EQ(v[1], 0.25);
  // A value quoted in the message is cut, not dumped whole.
  try {
    doubles_from_json(state, "text", "ImageClassifier");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
  }
}

TEST(ModuleStateJson, CountersMustBeIntegersInRange) {
  const nlohmann::json state = {{"float", 1e308}, {"fraction", 2.5}, {"big", 1ULL << 63},
                                {"negative", -3}, {"ok", 7},         {"above", 11}};
  for (const char* key : {"float", "fraction", "big", "negative"}) {
    SCOPED_TRACE(key);
    expect_error([&] { number_from_json<int64_t>(state, key, 0, "ImageClassifier"); },
                 {"must be a number >= 0"});
  }
  EXPECT_EQ(number_from_json<int64_t>(state, "ok", 0, "ImageClassifier"), 7);
  EXPECT_EQ(number_from_json<int64_t>(state, "ok", 0, "ImageClassifier", 10), 7);
  expect_error([&] { number_from_json<int64_t>(state, "above", 0, "ImageClassifier", 10); },
               {"'module.above' must be a number in [0, 10]"});
  EXPECT_EQ(number_from_json<double>(state, "fraction", 0.0, "ImageClassifier"), 2.5);
}

}  // namespace
}  // namespace mantissa::models
