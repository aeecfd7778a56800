// A switch given twice is refused as a value flag given twice is (apps/repeated_switches.h):
// CLI11 counted a repeated switch and went on.
#include <gtest/gtest.h>

#include <cstdint>

#include "repeated_switches.h"

namespace mantissa::app {
namespace {

// A command with a bool switch, a counted switch (add_flag_function, as the --fp8-* switches)
// and a value flag, repeated switches refused.
struct Command {
  CLI::App app;
  bool quiet = false;
  int64_t rht = 0;
  int steps = 0;
  Command() {
    CLI::App* cmd = app.add_subcommand("train");
    cmd->add_flag("--no-progress-bar", quiet);
    cmd->add_flag_function("--fp8-disable-rht", [this](int64_t n) { rht = n; });
    cmd->add_option("--max-steps", steps);
    refuse_repeated_switches(app);
  }
};

TEST(RepeatedSwitches, ASwitchGivenTwiceIsRefusedInASubcommand) {
  Command a, b;
  EXPECT_THROW(a.app.parse("train --no-progress-bar --no-progress-bar", false),
               CLI::ArgumentMismatch);
  EXPECT_THROW(b.app.parse("train --fp8-disable-rht --fp8-disable-rht=true", false),
               CLI::ArgumentMismatch);
}

TEST(RepeatedSwitches, SwitchesGivenOnceAndValueFlagsStayAsTheyWere) {
  Command a, b;
  a.app.parse("train --no-progress-bar --fp8-disable-rht --max-steps 3", false);
  EXPECT_TRUE(a.quiet);
  EXPECT_EQ(a.rht, 1);
  EXPECT_EQ(a.steps, 3);
  EXPECT_THROW(b.app.parse("train --max-steps 1 --max-steps 2", false), CLI::ArgumentMismatch);
}

TEST(RepeatedSwitches, HelpIsNoSwitchToRefuse) {
  CLI::App app;
  refuse_repeated_switches(app);
  EXPECT_THROW(app.parse("--help --help", false), CLI::CallForHelp);
}

}  // namespace
}  // namespace mantissa::app
