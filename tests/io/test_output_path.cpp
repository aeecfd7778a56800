// Output locations are checked before a run: missing directories are created, files in the
// way and unwritable places are errors naming the option, and the probe leaves nothing behind.
#include "mantissa/io/output_path.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

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

TEST(OutputPath, CleanupRemovesOnlyTheEmptyDirectoriesItsRunMade) {
  TempDir tmp;
  fs::create_directories(tmp.file("have"));
  {  // made a/b/out under the existing "have": all three go, "have" stays
    NewDirectoryCleanup cleanup(tmp.file("have/a/b/out"));
    prepare_output_dir(tmp.file("have/a/b/out"), "--output-dir");
    ASSERT_TRUE(fs::is_directory(tmp.file("have/a/b/out")));
  }
  EXPECT_FALSE(fs::exists(tmp.file("have/a")));
  EXPECT_TRUE(fs::is_directory(tmp.file("have")));
  {  // kept: the run reached its writes
    NewDirectoryCleanup cleanup(tmp.file("kept/out"));
    prepare_output_dir(tmp.file("kept/out"), "--output-dir");
    cleanup.keep();
  }
  EXPECT_TRUE(fs::is_directory(tmp.file("kept/out")));
  {  // a file appeared in the made directory: it and its parents stay
    NewDirectoryCleanup cleanup(tmp.file("full/out/"));
    prepare_output_dir(tmp.file("full/out/"), "--output-dir");
    touch(tmp.file("full/out/adapter_config.json"));
  }
  EXPECT_TRUE(fs::exists(tmp.file("full/out/adapter_config.json")));
  {  // the directory existed before: it stays although empty
    NewDirectoryCleanup cleanup(tmp.file("have"));
    prepare_output_dir(tmp.file("have"), "--output-dir");
  }
  EXPECT_TRUE(fs::is_directory(tmp.file("have")));
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

// A device or FIFO at an output path is an error before the run (metrics were renamed over it:
// as root, `--metrics-json /dev/null` replaced /dev/null with a regular file), and it stays.
TEST(OutputPath, DeviceOrFifoIsAnErrorAndStays) {
  if (fs::exists("/dev/null")) {
    expect_error([] { check_output_file("/dev/null", "--metrics-json"); },
                 {"--metrics-json '/dev/null' is a device", "give the path of a regular file"});
  }
  TempDir tmp;
  const std::string fifo = tmp.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { check_output_file(fifo, "--json"); }, {"--json", "is a FIFO (named pipe)"});
  expect_error([&] { write_text_file_atomically(fifo, "{}", "--json"); }, {"is a FIFO"});
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // A symlink to a regular file is a file.
  touch(tmp.file("real"));
  fs::create_symlink(tmp.file("real"), tmp.file("link"));
  check_output_file(tmp.file("link"), "--json");
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(OutputPath, AtomicWriteReplacesTheFileAndLeavesNoTemporary) {
  TempDir tmp;
  const std::string path = tmp.file("m.json");
  touch(path);
  write_text_file_atomically(path, "{\"a\": 1}\n", "--metrics-json");
  EXPECT_EQ(read_all(path), "{\"a\": 1}\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), fs::directory_iterator()), 1);
}

// A write that fails part way (here a file size limit, as a full disk) is an error, and the
// file already there keeps its content: the last buffer is flushed and checked before the
// rename (an ofstream's destructor would write it unchecked and put an empty file in place).
TEST(OutputPath, AtomicWriteThatFailsKeepsTheOldFile) {
  TempDir tmp;
  const std::string path = tmp.file("m.json");
  touch(path);
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // write(2) then fails with EFBIG
  struct rlimit small = old_limit;
  small.rlim_cur = 16;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  std::string message;
  try {
    write_text_file_atomically(path, std::string(100, 'y'), "--metrics-json");
  } catch (const Error& e) {
    threw = true;
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_NE(message.find("--metrics-json"), std::string::npos) << message;
  EXPECT_NE(message.find("is left as it was"), std::string::npos) << message;
  EXPECT_EQ(read_all(path), "x");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.str()), fs::directory_iterator()), 1);
}

// The same directory however it is spelt (trailing separator, "..", a symlink, a missing part),
// a directory inside it, and not a sibling whose name starts with the same letters.
TEST(OutputPath, SameOrInsideResolvesSpellingsAndSymlinks) {
  TempDir tmp;
  const std::string m = tmp.file("m");
  fs::create_directories(m + "/sub");
  fs::create_directories(tmp.file("m2"));
  fs::create_directory_symlink(m, tmp.file("link"));
  EXPECT_TRUE(same_or_inside(m, m));
  EXPECT_TRUE(same_or_inside(m + "/", m));
  EXPECT_TRUE(same_or_inside(m, m + "/"));
  EXPECT_TRUE(same_or_inside(tmp.file("m2/../m"), m));
  EXPECT_TRUE(same_or_inside(tmp.file("link"), m));
  EXPECT_TRUE(same_or_inside(m + "/sub", m));
  EXPECT_TRUE(same_or_inside(tmp.file("link/new/deeper"), m));  // missing parts as written
  EXPECT_FALSE(same_or_inside(m, m + "/sub"));
  EXPECT_FALSE(same_or_inside(tmp.file("m2"), m));
  EXPECT_FALSE(same_or_inside(tmp.file("missing"), m));
  EXPECT_FALSE(same_or_inside(tmp.str(), m));
}

}  // namespace
}  // namespace mantissa::io
