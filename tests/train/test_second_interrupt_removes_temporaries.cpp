// A second interrupt ends the process at once; a file it was writing (the final model, a
// checkpoint) loses its "<path>.tmp.<pid>" too. The temporary was left behind, and the next run
// refused its --output-dir as not empty ("it holds model.safetensors.tmp.1152").
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "mantissa/io/stale_temporaries.h"
#include "mantissa/train/signals.h"

namespace mantissa::train {
namespace {

namespace fs = std::filesystem;

TEST(SecondInterruptDeathTest, RemovesTheTemporaryBeingWritten) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  // One name for the test and its death-test child (a new process that runs this body again).
  const fs::path root = fs::path(::testing::TempDir()) / "mantissa_second_interrupt_temporaries";
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path kept = root / "kept.safetensors.tmp.1";  // written by no live registration
  std::ofstream(kept) << "other";
  EXPECT_EXIT(
      {
        InterruptHandlers handlers;
        const std::string tmp = (root / "model.safetensors.tmp.child").string();
        io::TemporaryBeingWritten being_written(tmp);
        std::ofstream(tmp) << "half a model";
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a person, not a relay
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(20));
        ::_exit(9);
      },
      ::testing::ExitedWithCode(128 + SIGINT), "second interrupt: exiting now without saving");
  EXPECT_FALSE(fs::exists(root / "model.safetensors.tmp.child"));
  EXPECT_TRUE(fs::exists(kept));
  fs::remove_all(root);
}

// A registration ends with its object: a later interrupt leaves the path alone (it may be the
// finished file's name by then, or another process's).
TEST(SecondInterruptDeathTest, LeavesAFinishedTemporaryAlone) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  const fs::path root = fs::path(::testing::TempDir()) / "mantissa_second_interrupt_finished";
  fs::remove_all(root);
  fs::create_directories(root);
  EXPECT_EXIT(
      {
        InterruptHandlers handlers;
        const std::string tmp = (root / "model.safetensors.tmp.child").string();
        { io::TemporaryBeingWritten being_written(tmp); }
        std::ofstream(tmp) << "not ours any more";
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(20));
        ::_exit(9);
      },
      ::testing::ExitedWithCode(128 + SIGINT), "second interrupt");
  EXPECT_TRUE(fs::exists(root / "model.safetensors.tmp.child"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace mantissa::train
