// bench and compare's --untimed-steps (apps/untimed_steps_option.h): the untimed steps before
// each timed run were --warmup-steps, which `mantissa train --model gpt` uses for the
// learning-rate warm-up. The old name still works there for one release, with a warning that
// names the new one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench_command.h"
#include "compare_command.h"
#include "mantissa/core/warning.h"
#include "support/test_util.h"
#include "untimed_steps_option.h"

namespace mantissa::app {
namespace {

TEST(UntimedStepsOption, NewNameSetsTheStepsWithoutAWarning) {
  CLI::App app;
  int64_t steps = 3;
  const CLI::Option* alias = add_untimed_steps_option(app, &steps, "untimed steps");
  const WarningRecorder recorder;
  app.parse("--untimed-steps 7", false);
  warn_deprecated_untimed_steps_alias(alias, "bench");
  EXPECT_EQ(steps, 7);
  EXPECT_TRUE(recorder.messages().empty());
  EXPECT_EQ(app.get_option("--untimed-steps")->get_default_str(), "3");
}

TEST(UntimedStepsOption, OldNameSetsTheStepsAndWarnsNamingTheNewOne) {
  CLI::App app;
  int64_t steps = 3;
  const CLI::Option* alias = add_untimed_steps_option(app, &steps, "untimed steps");
  const WarningRecorder recorder;
  ::testing::internal::CaptureStderr();
  app.parse("--warmup-steps 9", false);
  warn_deprecated_untimed_steps_alias(alias, "compare");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(steps, 9);
  const std::string expected =
      "--warmup-steps is deprecated in `mantissa compare`: use --untimed-steps (the same untimed "
      "steps before each timed run; --warmup-steps means the learning-rate warm-up in `mantissa "
      "train --model gpt`); the old name will be removed in the next release";
  EXPECT_EQ(recorder.messages(), std::vector<std::string>{expected});
  EXPECT_EQ(err, "mantissa: warning: " + expected + "\n");
}

TEST(UntimedStepsOption, BothNamesAtOnceAreRefused) {
  CLI::App app;
  int64_t steps = 3;
  add_untimed_steps_option(app, &steps, "untimed steps");
  EXPECT_THROW(app.parse("--warmup-steps 1 --untimed-steps 2", false), CLI::ExcludesError);
}

// The commands themselves: the old name warns and reaches the same setting (its value is the
// one the commands' own check then refuses, under the new name).
TEST(UntimedStepsOption, BenchAndCompareTakeBothNames) {
  for (const std::string command : {"bench", "compare"}) {
    SCOPED_TRACE(command);
    CLI::App app;
    add_bench_command(app);
    add_compare_command(app);
    const std::string refused = command == "bench"
                                    ? "--steps must be at least 1 and --untimed-steps not negative"
                                    : "--untimed-steps must not be negative, got -1";
    EXPECT_NE(mantissa::testing::error_of([&] {
                app.parse(command + " --untimed-steps -1 --threads 1", false);
              }).find(refused),
              std::string::npos);
    app.clear();
    const WarningRecorder recorder;
    ::testing::internal::CaptureStderr();
    const std::string err = mantissa::testing::error_of(
        [&] { app.parse(command + " --warmup-steps -1 --threads 1", false); });
    ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(refused), std::string::npos) << err;
    EXPECT_EQ(recorder.messages(),
              std::vector<std::string>{deprecated_untimed_steps_alias_warning(command)});
  }
}

}  // namespace
}  // namespace mantissa::app
