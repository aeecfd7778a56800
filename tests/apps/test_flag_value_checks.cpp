// Every flag's value is checked before CLI11 converts it (apps/flag_value_checks.h): an empty
// value became 0 or "not given", and a float flag read hex ("--lr 0x10" trained at 16). A
// --config value that the command line overrides is still checked (apps/json_config.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "flag_value_checks.h"
#include "json_config.h"
#include "whole_number_options.h"

namespace mantissa::app {
namespace {

TEST(FlagValueChecks, DecimalNumbers) {
  for (const char* ok : {"1", "-0.5", "+2", ".5", "3.", "1e-3", "2E+4", "007", "1.5e10"})
    EXPECT_TRUE(is_decimal_number(ok)) << ok;
  for (const char* bad : {"",   "0x10", "0X1p3", "0x1p3", "1e",   "1e+", "e3",       ".",
                          "-",  "+.",   "inf",   "-inf",  "nan",  "NaN", "Infinity", "1.5.2",
                          " 1", "1 ",   "1,5",   "1_000", "0b11", "1f",  "--1"})
    EXPECT_FALSE(is_decimal_number(bad)) << bad;
}

struct Flags {
  int64_t steps = 1000;
  double lr = 1e-3;
  std::string resume;
  std::string checkpoint;
  std::string prompt = "The";
  std::string recipe;
  bool quiet = false;
};

// The root app with the subcommand "train" holding the flags, checked as main.cpp does.
struct Cli {
  CLI::App app{"test"};
  Flags f;
  Cli() {
    CLI::App* train = app.add_subcommand("train");
    train->add_option("--max-steps", f.steps)->capture_default_str();
    train->add_option("--lr", f.lr)->capture_default_str();
    train->add_option("--resume", f.resume, "A checkpoint file; or last");
    train->add_option("--checkpoint", f.checkpoint)->required();
    train->add_flag("--quiet", f.quiet);
    train->add_option("--prompt", f.prompt);
    train->add_option("--recipe", f.recipe,
                      "how scales are found: delayed (amax history; default), current (each "
                      "tensor's own amax), rowwise or rowwise-gw-hp (torchao's per-row scales), "
                      "block (1x128 and 128x128 blocks), mxfp8 (1x32 blocks, E8M0 scales)");
    read_whole_numbers_in_decimal(app);
    check_flag_values(app, {"--prompt"});
  }
  // The parse error's message, "" when it parses.
  std::string parse(std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  }
};

TEST(FlagValueChecks, EmptyValueIsRefusedNamingTheFlag) {
  EXPECT_EQ(Cli().parse({"train", "--max-steps", ""}),
            "--max-steps: the value is empty (an unset shell variable?); give a whole number such "
            "as 1000, the default, or leave --max-steps out");
  EXPECT_EQ(Cli().parse({"train", "--lr", ""}),
            "--lr: the value is empty (an unset shell variable?); give a number such as 0.001, "
            "the default, or leave --lr out");
  // What a text flag takes: its description up to the first "; ".
  EXPECT_EQ(Cli().parse({"train", "--resume", ""}),
            "--resume: the value is empty (an unset shell variable?); give a value (A checkpoint "
            "file), or leave --resume out");
  // A "; " inside parentheses is no end; a long description is cut after a whole item.
  EXPECT_EQ(Cli().parse({"train", "--recipe", "", "--checkpoint", "c"}),
            "--recipe: the value is empty (an unset shell variable?); give a value (how scales are "
            "found: delayed (amax history; default), current (each tensor's own amax), rowwise or "
            "rowwise-gw-hp (torchao's per-row scales), ...), or leave --recipe out");
  // A required flag cannot be left out: no such advice.
  EXPECT_EQ(Cli().parse({"train", "--checkpoint", ""}),
            "--checkpoint: the value is empty (an unset shell variable?); give a value (TEXT)");
  // A flag whose "" means something, exempted by name.
  Cli prompt;
  EXPECT_EQ(prompt.parse({"train", "--prompt", "", "--checkpoint", "c"}), "");
  EXPECT_EQ(prompt.f.prompt, "");
  Cli given;
  EXPECT_EQ(given.parse({"train", "--max-steps", "3", "--resume", "last", "--checkpoint", "c"}),
            "");
  EXPECT_EQ(given.f.steps, 3);
  EXPECT_EQ(given.f.resume, "last");
}

TEST(FlagValueChecks, FloatsAreDecimalOnly) {
  EXPECT_EQ(Cli().parse({"train", "--lr", "0x10"}),
            "--lr: '0x10' is not a number (expected a number such as 0.001, the default); write "
            "it in decimal, such as 0.001 or 1e-3");
  for (const char* bad : {"0x1p3", "1e", "inf", "nan", "-inf"})
    EXPECT_NE(Cli().parse({"train", "--lr", bad}).find("is not a number"), std::string::npos)
        << bad;
  // A decimal form past double's range would read as inf.
  for (const char* huge : {"1e400", "-1e400"})
    EXPECT_NE(Cli().parse({"train", "--lr", huge}).find("is out of range"), std::string::npos)
        << huge;
  Cli ok;
  EXPECT_EQ(ok.parse({"train", "--lr", "2E-3", "--checkpoint", "c"}), "");
  EXPECT_DOUBLE_EQ(ok.f.lr, 2e-3);
  // Whole-number flags keep their own check: hex is no integer.
  EXPECT_NE(Cli().parse({"train", "--max-steps", "0x10"}).find("is not an integer"),
            std::string::npos);
}

// The error reading `json` as the --config of `args` (a train command line) gives, "" when none.
std::string config_error(const std::string& json, std::vector<std::string> args) {
  Cli cli;
  std::istringstream in(json);
  args.insert(args.begin(), "train");
  args.insert(args.end(), {"--checkpoint", "c"});
  EXPECT_EQ(cli.parse(args), "");
  try {
    JsonConfig("train", &cli.app).from_config(in);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(FlagValueChecks, ConfigValueTheCommandLineOverridesIsStillChecked) {
  EXPECT_EQ(config_error(R"({"max_steps": "1.5"})", {"--max-steps", "1"}),
            "config key 'max_steps': '1.5' is not an integer (expected a whole number such as "
            "1000, the default) (--max-steps on the command line overrides it, but the file's "
            "value must still be one the flag takes)");
  EXPECT_NE(config_error(R"({"lr": "0x10"})", {"--lr", "0.1"})
                .find("config key 'lr': '0x10' is "
                      "not a number"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"resume": ""})", {"--resume", "last"})
                .find("config key 'resume': the value is empty"),
            std::string::npos);
  // A switch's value is checked whether the command line gives it or not.
  EXPECT_EQ(config_error(R"({"quiet": "maybe"})", {"--quiet"}),
            "key 'quiet' is a switch: give true or false, not 'maybe'");
  EXPECT_EQ(config_error(R"({"quiet": ""})", {}),
            "key 'quiet' is a switch: give true or false, not ''");
  EXPECT_EQ(config_error(R"({"quiet": 2.5})", {}),
            "key 'quiet' is a switch: give true or false, not '2.5'");
  EXPECT_EQ(config_error(R"({"quiet": "99999999999999999999"})", {}),
            "key 'quiet' is a switch: give true or false, not '99999999999999999999'");
  EXPECT_EQ(config_error(R"({"quiet": [true, false]})", {}),
            "key 'quiet' is a switch: give true or false, not a list");
  // A switch takes JSON's true or false only, not the other words CLI11 reads as on.
  for (const char* other : {R"({"quiet": "yes"})", R"({"quiet": 2})", R"({"quiet": "on"})"})
    EXPECT_NE(config_error(other, {}).find("key 'quiet' is a switch: give true or false, not"),
              std::string::npos)
        << other;
  // A number flag takes no list, not even of one element; keys carry no dashes.
  EXPECT_EQ(config_error(R"({"lr": [1]})", {}), "key 'lr' takes one number, not a list");
  EXPECT_EQ(config_error(R"({"max-steps": [2]})", {"--max-steps", "1"}),
            "key 'max-steps' takes one number, not a list");
  EXPECT_EQ(config_error(R"({"--lr": 0.1})", {}),
            "key '--lr': write a flag without its dashes, e.g. \"max-steps\" for --max-steps");
  // Valid values, and keys the command line does not give (CLI11 checks those when it applies
  // them).
  EXPECT_EQ(config_error(R"({"max-steps": 2, "lr": 0.5, "quiet": false})",
                         {"--max-steps", "1", "--lr", "0.1", "--quiet"}),
            "");
  EXPECT_EQ(config_error(R"({"max-steps": "1.5"})", {}), "");
}

}  // namespace
}  // namespace mantissa::app
