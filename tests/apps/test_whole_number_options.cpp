// Whole-number flags are read in decimal and refused out of range (apps/whole_number_options.h):
// CLI11 read "010" as octal 8 and "0x10" as 16, and saturated values past int64 / uint64.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "whole_number_options.h"

namespace mantissa::app {
namespace {

struct Flags {
  int64_t epochs = 2;
  int threads = 1;
  uint64_t seed = 0;
  double lr = 1e-3;
};

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--epochs", f.epochs)->capture_default_str();
  app.add_option("--threads", f.threads);
  app.add_option("--seed", f.seed)->capture_default_str();
  app.add_option("--lr", f.lr);
  read_whole_numbers_in_decimal(app);
}

// The message of the error parsing `args` gives, "" when it parses.
std::string parse_error(const std::string& args, Flags& f) {
  CLI::App app;
  add_flags(app, f);
  try {
    app.parse(args, false);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(WholeNumberOptions, LeadingZerosAreDecimal) {
  Flags f;
  EXPECT_EQ(parse_error("--epochs 010 --threads 08 --seed 0012", f), "");
  EXPECT_EQ(f.epochs, 10);  // was 8
  EXPECT_EQ(f.threads, 8);  // was an error ("08" is no octal number)
  EXPECT_EQ(f.seed, 12u);
  EXPECT_EQ(parse_error("--epochs -007 --seed +3", f), "");
  EXPECT_EQ(f.epochs, -7);
  EXPECT_EQ(f.seed, 3u);
}

TEST(WholeNumberOptions, OutOfRangeIsRefusedNotSaturated) {
  Flags f;
  EXPECT_EQ(parse_error("--epochs 99999999999999999999", f),
            "--epochs: '99999999999999999999' is out of range (expected a whole number such as "
            "2, the default)");
  EXPECT_NE(parse_error("--epochs -99999999999999999999", f).find("is out of range"),
            std::string::npos);
  EXPECT_NE(parse_error("--seed 18446744073709551616", f).find("is out of range"),
            std::string::npos);
  EXPECT_EQ(parse_error("--seed 18446744073709551615", f), "");  // the largest uint64
  EXPECT_EQ(f.seed, UINT64_MAX);
  EXPECT_EQ(parse_error("--epochs 9223372036854775807", f), "");
  EXPECT_EQ(f.epochs, INT64_MAX);
  // Narrower than int64: CLI11's own check still refuses it.
  EXPECT_FALSE(parse_error("--threads 99999999999", f).empty());
}

TEST(WholeNumberOptions, HexAndBinaryPrefixesAreNotIntegers) {
  Flags f;
  EXPECT_NE(parse_error("--epochs 0x10", f).find("'0x10' is not an integer"), std::string::npos);
  EXPECT_NE(parse_error("--seed 0b101", f).find("is not an integer"), std::string::npos);
  EXPECT_FALSE(parse_error("--epochs 1e3", f).empty());  // CLI11 refuses it, as before
  EXPECT_FALSE(parse_error("--epochs abc", f).empty());
  EXPECT_EQ(parse_error("--lr 0x1p-3", f), "");  // floating flags are left alone
  EXPECT_EQ(f.lr, 0.125);
}

}  // namespace
}  // namespace mantissa::app
