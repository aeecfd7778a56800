// A run's set-up (building the model, loading the data) holds nothing to save: a SIGTERM or
// SIGINT there ends the process at once with 128 + signal and says what it interrupted. It
// printed "finishing the current step" and went on building a model of 100000000 layers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "mantissa/train/signals.h"

namespace mantissa::train {
namespace {

// Set-up that never ends by itself (a model too slow to build, a read that blocks): only the
// signal can stop it. Exits 9 after 20 s so that a regression fails instead of hanging.
[[noreturn]] void endless_setup() {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::_exit(9);
}

TEST(ExitOnInterruptDeathTest, ASignalDuringSetUpExitsAtOnce) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        InterruptHandlers handlers;
        ExitOnInterrupt building("building the model");
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          ::kill(::getpid(), SIGTERM);
        }).detach();
        endless_setup();
      },
      ::testing::ExitedWithCode(128 + SIGTERM),
      "mantissa: interrupted by SIGTERM while building the model: stopped before training, "
      "nothing to save");
}

// A signal that arrived before the set-up step began (while the options were checked) stops the
// run when the step starts, and the innermost step is the one named.
TEST(ExitOnInterruptDeathTest, ASignalAlreadyReceivedStopsTheNextStep) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        InterruptHandlers handlers;
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the watcher records it
        ExitOnInterrupt loading("loading the data");
        ::_exit(9);
      },
      ::testing::ExitedWithCode(128 + SIGINT), "interrupted by SIGINT while loading the data");
}

// The output directories a run made before its set-up are taken back by the signal while they
// are still empty (deepest first, so an emptied parent goes too); one that holds a file stays.
TEST(ExitOnInterruptDeathTest, ASignalTakesBackTheEmptyDirectoriesMade) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  // One name for the test and its death-test child (a new process that runs this body again).
  const std::filesystem::path root =
      std::filesystem::path(::testing::TempDir()) / "mantissa_exit_on_interrupt_dirs";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "made/out");
  std::filesystem::create_directories(root / "full");
  std::ofstream(root / "full/notes.txt") << "kept";
  EXPECT_EXIT(
      {
        InterruptHandlers handlers;
        ExitOnInterrupt tokenizing(
            "tokenizing the data",
            {(root / "made/out").string(), (root / "made").string(), (root / "full").string()});
        ::kill(::getpid(), SIGINT);
        endless_setup();
      },
      ::testing::ExitedWithCode(128 + SIGINT), "interrupted by SIGINT while tokenizing the data");
  EXPECT_FALSE(std::filesystem::exists(root / "made"));
  EXPECT_TRUE(std::filesystem::exists(root / "full/notes.txt"));
  std::filesystem::remove_all(root);
}

// After the set-up the Trainer's own handling is back: the signal waits for its next check.
TEST(ExitOnInterruptDeathTest, AfterTheSetUpTheSignalWaitsForTheTrainer) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        InterruptHandlers handlers;
        { ExitOnInterrupt building("building the model"); }
        ::kill(::getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ::_exit(pending_interrupt() == SIGTERM ? 7 : 8);
      },
      ::testing::ExitedWithCode(7), "finishing the current step");
}

// Inside compare or bench (handlers nested around several runs) a run's set-up does not end the
// process: the command still reports the runs it finished.
TEST(ExitOnInterruptDeathTest, NestedHandlersLeaveTheSignalPending) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        InterruptHandlers command;
        InterruptHandlers run;
        ExitOnInterrupt building("building the model");
        ::kill(::getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ::_exit(pending_interrupt() == SIGTERM ? 7 : 8);
      },
      ::testing::ExitedWithCode(7), "");
}

}  // namespace
}  // namespace mantissa::train
