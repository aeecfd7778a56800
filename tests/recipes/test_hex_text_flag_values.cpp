// The flags whose text holds a number (a batch limit: --limit-*-batches, --val-check-interval,
// --overfit-batches; a size: --memory, --memory-limit; Apex's --amp-loss-scale) take decimal
// forms only, as the float flags do (docs/cli.md): std::stod also reads hex, so "0x10" was 16
// batches, 16 bytes or a loss scale of 16 (found by tests/sweep).
#include <gtest/gtest.h>

#include "mantissa/recipes/byte_size.h"
#include "mantissa/recipes/trainer_setup.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::expect_error;

TEST(HexTextFlagValues, BatchLimitsAndSizesRefuseHex) {
  for (const char* hex : {"0x10", "0X10", "0x1p3", "0x.8"}) {
    expect_error([&] { parse_batch_limit(hex, "--limit-train-batches"); },
                 std::string("--limit-train-batches expects a fraction like 0.25 or a batch count "
                             "like 10, got '") +
                     hex + "'");
    expect_error([&] { parse_byte_size(hex, "--memory"); },
                 std::string("--memory expects a size such as 8GiB, 512MiB, 1.5GB or 4096 (bytes), "
                             "got '") +
                     hex + "'");
  }
  // Decimal forms still read as before.
  const train::BatchLimit count = parse_batch_limit("16", "--limit-train-batches");
  EXPECT_FALSE(count.is_fraction());
  EXPECT_EQ(count.value(), 16);
  const train::BatchLimit fraction = parse_batch_limit("2.5e-1", "--limit-train-batches");
  EXPECT_TRUE(fraction.is_fraction());
  EXPECT_DOUBLE_EQ(fraction.value(), 0.25);
  EXPECT_EQ(parse_byte_size("16", "--memory"), 16);
  EXPECT_EQ(parse_byte_size("1e3kB", "--memory"), 1000000);
}

}  // namespace
}  // namespace mantissa::recipes
