// `mantissa train --devices N`: mpirun hands the launcher's Ctrl-C to every rank as SIGTERM. The
// launcher writes the signal it was sent into a file (train::set_launcher_signal_file) and the
// ranks take a SIGTERM as the SIGINT the file names, so that the run records a Ctrl-C as one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "mantissa/train/signals.h"

namespace mantissa {
namespace {

// The signal this process records for a SIGTERM sent to it (0: none within 5 s).
int recorded_for_sigterm() {
  train::InterruptHandlers handlers;
  ::kill(::getpid(), SIGTERM);
  for (int i = 0; i < 500 && !train::pending_interrupt(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return train::pending_interrupt().value_or(0);
}

TEST(LauncherSignalFile, SigtermIsTakenAsTheSignalTheLauncherWasSent) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("mantissa-signal-test-" + std::to_string(::getpid()));
  std::ofstream(file) << "";  // the launcher was sent nothing yet
  train::set_launcher_signal_file(file.string());
  EXPECT_FALSE(train::launcher_signal().has_value());
  EXPECT_EQ(recorded_for_sigterm(), SIGTERM);  // mpirun ending the job on its own

  std::ofstream(file) << "02\n";  // what the launcher writes for a Ctrl-C
  EXPECT_EQ(train::launcher_signal(), SIGINT);
  EXPECT_EQ(recorded_for_sigterm(), SIGINT);

  std::ofstream(file) << "15\n";
  EXPECT_EQ(train::launcher_signal(), SIGTERM);
  EXPECT_EQ(recorded_for_sigterm(), SIGTERM);

  train::set_launcher_signal_file("");  // the default: every signal as received
  EXPECT_FALSE(train::launcher_signal().has_value());
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace mantissa
