// TextCorpus on inputs that never end or are too big: devices and FIFOs are refused without
// reading (or blocking), the size cap holds for a file and for a directory's files together,
// and special files inside a directory are skipped.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "mantissa/data/text_corpus.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::data {
namespace {

using mantissa::testing::error_of;
using mantissa::testing::expect_error;
using mantissa::testing::TempDir;
namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(TextCorpusLimits, DefaultCapIsOneGibibyte) {
  EXPECT_EQ(TextCorpus::kDefaultMaxBytes, uint64_t{1} << 30);
}

// The GPT is byte-level, but its corpus is text: a binary file, or a file of a directory that is
// not UTF-8, is refused naming that file and the offset of the first byte that is not text.
TEST(TextCorpusLimits, BytesThatAreNotUtf8TextAreRefusedNamingFileAndOffset) {
  TempDir dir;
  write_file(dir.file("elf"), std::string("\x7f"
                                          "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0",
                                          16));
  expect_error([&] { TextCorpus(dir.file("elf")); },
               {"[TextCorpus] '",
                "elf' is not UTF-8 text: the byte at offset 7 (line 1) is NUL "
                "(0x00)"});
  fs::create_directories(dir.file("corpus"));
  write_file(dir.file("corpus/a.txt"), "plain text, line one\nline two\n");
  write_file(dir.file("corpus/b.txt"), "ok\nstill ok\nna\xefve\n");
  expect_error([&] { TextCorpus(dir.file("corpus")); },
               {"b.txt' is not UTF-8 text: the byte at offset 14 (line 3) is 0xef"});
  write_file(dir.file("corpus/b.txt"), "ok\nstill ok\nna\xc3\xafve\n");
  EXPECT_EQ(TextCorpus(dir.file("corpus")).files().size(), 2u);
}

TEST(TextCorpusLimits, CharacterDeviceIsRefused) {
  // /dev/zero never ends: reading it would fill memory.
  ASSERT_TRUE(fs::is_character_file("/dev/zero"));
  const std::string msg = error_of([] { TextCorpus("/dev/zero"); });
  EXPECT_NE(msg.find("[TextCorpus] '/dev/zero' is a character device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("regular files only"), std::string::npos) << msg;
}

TEST(TextCorpusLimits, FifoIsRefusedWithoutWaitingForAWriter) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO for reading blocks until a writer comes, unless opened non-blocking; this
  // test would hang rather than fail if the check came after a blocking open.
  const std::string msg = error_of([&] { TextCorpus{fifo}; });
  EXPECT_NE(msg.find("is a FIFO (named pipe)"), std::string::npos) << "message: " << msg;
}

TEST(TextCorpusLimits, SymlinkToADeviceIsRefused) {
  TempDir dir;
  fs::create_symlink("/dev/zero", dir.file("text.txt"));
  EXPECT_NE(error_of([&] { TextCorpus(dir.file("text.txt")); }).find("character device"),
            std::string::npos);
}

TEST(TextCorpusLimits, DirectorySkipsSpecialFilesAndSubdirectories) {
  TempDir dir;
  write_file(dir.file("a.txt"), "01234567890123456789");
  ASSERT_EQ(::mkfifo(dir.file("b.fifo").c_str(), 0600), 0);
  fs::create_directories(dir.file("c.dir"));
  write_file(dir.file("c.dir") + "/inner.txt", "not read");
  const TextCorpus c(dir.str());
  ASSERT_EQ(c.files().size(), 1u);
  EXPECT_EQ(c.train_text() + c.val_text(), "01234567890123456789");
}

TEST(TextCorpusLimits, FileLargerThanTheCapIsRefused) {
  TempDir dir;
  const std::string path = dir.file("big.txt");
  write_file(path, std::string(101, 'x'));
  const std::string msg = error_of([&] { TextCorpus(path, 0.1, 100); });
  EXPECT_NE(msg.find("at least 101 bytes, more than the limit of 100 bytes"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("max_bytes"), std::string::npos) << msg;
  // Exactly at the cap loads.
  write_file(path, std::string(100, 'x'));
  EXPECT_EQ(TextCorpus(path, 0.1, 100).train_text().size(), 90u);
}

TEST(TextCorpusLimits, CapCountsADirectorysFilesTogether) {
  TempDir dir;
  write_file(dir.file("a"), std::string(60, 'a'));
  write_file(dir.file("b"), std::string(60, 'b'));
  EXPECT_NO_THROW(TextCorpus(dir.str(), 0.1, 120));
  const std::string msg = error_of([&] { TextCorpus(dir.str(), 0.1, 119); });
  EXPECT_NE(msg.find("limit of 119 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/b'"), std::string::npos) << "names the file that crossed the cap: " << msg;
}

TEST(TextCorpusLimits, FileClaimingSizeZeroIsCappedWhileReading) {
  // /proc files report st_size 0 but have content: the cap must hold per read, not only by
  // the size stat reports. /proc/self/maps has far more than 16 bytes.
  if (!fs::exists("/proc/self/maps")) GTEST_SKIP() << "no /proc";
  const std::string msg = error_of([] { TextCorpus("/proc/self/maps", 0.1, 16); });
  EXPECT_NE(msg.find("more than the limit of 16 bytes"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mantissa::data
