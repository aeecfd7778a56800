// Output locations are checked before a run: missing directories are created, files in the
// way and unwritable places are errors naming the option, and the probe leaves nothing behind.
#include "mantissa/io/output_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::io {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::expect_error;
using mantissa::testing::TempDir;

void touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(OutputPath, CreatesMissingDirectoriesAndLeavesNoProbe) {
  TempDir tmp;
  const std::string dir = tmp.file("a/b/c");
  prepare_output_dir(dir, "--checkpoint-dir");
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir));  // the probe file is removed again

  check_output_file(tmp.file("x/y/metrics.json"), "--metrics-json");
  EXPECT_TRUE(fs::is_directory(tmp.file("x/y")));
  EXPECT_FALSE(fs::exists(tmp.file("x/y/metrics.json")));  // nothing written yet
  EXPECT_TRUE(fs::is_empty(tmp.file("x/y")));
}

TEST(OutputPath, ExistingFileIsLeftAlone) {
  TempDir tmp;
  touch(tmp.file("m.json"));
  check_output_file(tmp.file("m.json"), "--metrics-json");
  std::ifstream in(tmp.file("m.json"));
  std::string content;
  in >> content;
  EXPECT_EQ(content, "x");
}

TEST(OutputPath, FileInTheWayIsAnError) {
  TempDir tmp;
  touch(tmp.file("file"));
  expect_error([&] { prepare_output_dir(tmp.file("file"), "--checkpoint-dir"); },
               {"--checkpoint-dir", "exists and is not a directory"});
  expect_error([&] { prepare_output_dir(tmp.file("file/sub"), "--log-dir"); },
               {"--log-dir", "cannot be created"});
  expect_error([&] { check_output_file(tmp.file("file/m.json"), "--metrics-json"); },
               {"--metrics-json", "file/m.json"});
  expect_error([&] { check_output_file(tmp.str(), "--html"); }, {"--html", "is a directory"});
  expect_error([&] { prepare_output_dir("", "--checkpoint-dir"); }, "must not be empty");
}

// /proc refuses new files even to root, so this runs everywhere on Linux.
TEST(OutputPath, ProcIsNotWritable) {
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc";
  // The reason names the file system, not strerror(ENOENT)'s "No such file or directory".
  expect_error([] { prepare_output_dir("/proc", "--checkpoint-dir"); },
               {"--checkpoint-dir '/proc' is not writable: '/proc' is on a file system that does "
                "not allow new entries"});
  expect_error([] { check_output_file("/proc/metrics.json", "--metrics-json"); },
               {"--metrics-json '/proc/metrics.json'", "is not writable"});
  expect_error([] { prepare_output_dir("/proc/x/y", "--checkpoint-dir"); },
               {"--checkpoint-dir '/proc/x/y' cannot be created: '/proc' is on a file system"});
}

TEST(OutputPath, UnwritableDirectoryIsAnError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  TempDir tmp;
  const std::string dir = tmp.file("ro");
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0555);
  expect_error([&] { prepare_output_dir(dir, "--checkpoint-dir"); },
               {"--checkpoint-dir", "is not writable"});
  expect_error([&] { check_output_file(dir + "/m.json", "--metrics-json"); },
               {"--metrics-json", "is not writable"});
  ::chmod(dir.c_str(), 0755);
}

}  // namespace
}  // namespace mantissa::io
