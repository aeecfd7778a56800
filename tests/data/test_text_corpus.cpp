// TextCorpus: reading a file and a directory (skipping .dat/.u8/symlinks), the split,
// random and sequential batches, byte encoding, errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "mantissa/data/text_corpus.h"
#include "support/test_util.h"

namespace mantissa::data {
namespace {

using namespace mantissa::testing;
namespace fs = std::filesystem;

fs::path write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

TEST(TextCorpus, SplitsAFile) {
  const fs::path dir = fs::temp_directory_path() / "mantissa_text_corpus_file";
  fs::create_directories(dir);
  const std::string text = "abcdefghijklmnopqrst";  // 20 bytes: 18 + 2 at val_fraction 0.1
  TextCorpus c(write_file(dir / "t.txt", text).string());
  EXPECT_EQ(c.train_text(), "abcdefghijklmnopqr");
  EXPECT_EQ(c.val_text(), "st");
  TextCorpus c25((dir / "t.txt").string(), 0.25);
  EXPECT_EQ(c25.val_text(), "pqrst");
  fs::remove_all(dir);
}

TEST(TextCorpus, ReadsADirectorySkippingIndexesAndLinks) {
  const fs::path dir = fs::temp_directory_path() / "mantissa_text_corpus_dir";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  write_file(dir / "b", "BBBBBBBBBB");
  write_file(dir / "a", "AAAAAAAAAA");
  write_file(dir / "a.dat", "index");
  write_file(dir / "sub" / "c", "CCCC");
  fs::create_symlink(dir / "a", dir / "a.u8");
  fs::create_symlink(dir / "b", dir / "b2");
  TextCorpus c(dir.string(), 0.1);
  ASSERT_EQ(c.files().size(), 2u);
  EXPECT_EQ(c.train_text() + c.val_text(), "AAAAAAAAAABBBBBBBBBB");
  fs::remove_all(dir);
}

TEST(TextCorpus, BatchesAreShiftedWindows) {
  const fs::path dir = fs::temp_directory_path() / "mantissa_text_corpus_batch";
  fs::create_directories(dir);
  std::string text;
  for (int i = 0; i < 200; ++i) text.push_back(static_cast<char>('a' + i % 26));
  TextCorpus c(write_file(dir / "t.txt", text).string());
  Generator g1(7), g2(7);
  auto [x, y] = c.batch(true, 4, 8, &g1);
  auto [x2, y2] = c.batch(true, 4, 8, &g2);
  EXPECT_EQ(x.shape(), (Shape{4, 8}));
  EXPECT_EQ(x.dtype(), kInt64);
  EXPECT_EQ(vals(x), vals(x2));  // same seed, same windows
  const auto xv = x.to_vector<int64_t>(), yv = y.to_vector<int64_t>();
  for (int64_t b = 0; b < 4; ++b) {
    for (int64_t j = 0; j < 8; ++j) {
      const int64_t cur = xv[b * 8 + j], nxt = yv[b * 8 + j];
      EXPECT_EQ(nxt, 'a' + (cur - 'a' + 1) % 26);  // the target is the next byte
      if (j < 7) EXPECT_EQ(xv[b * 8 + j + 1], nxt);
    }
  }
  // Validation: 20 bytes -> (20 - 1) / 4 = 4 windows of 4, in order, in batches of 3.
  auto seq = c.sequential_batches(false, 3, 4, 10);
  ASSERT_EQ(seq.size(), 2u);
  EXPECT_EQ(seq[0].first.size(0), 3);
  EXPECT_EQ(seq[1].first.size(0), 1);
  EXPECT_EQ(decode_bytes(seq[0].first[0]), c.val_text().substr(0, 4));
  EXPECT_EQ(decode_bytes(seq[0].second[0]), c.val_text().substr(1, 4));
  expect_error([&] { c.batch(false, 1, 64); }, {"validation", "20 bytes"});
  fs::remove_all(dir);
}

// Absurd sizes are refused before their arithmetic overflows: batch_size * max_batches wrapped
// (3 * INT64_MAX read as a positive count and returned batches), context + 1 wrapped to
// INT64_MIN (so any part was "long enough" and a window start was drawn below a negative bound),
// and a batch's element count passed on to empty(). max_batches 0 said the part was too short.
TEST(TextCorpus, AbsurdSizesAreRefusedBeforeTheyOverflow) {
  const fs::path dir = fs::temp_directory_path() / "mantissa_text_corpus_overflow";
  fs::create_directories(dir);
  std::string text;
  for (int i = 0; i < 200; ++i) text.push_back(static_cast<char>('a' + i % 26));
  TextCorpus c(write_file(dir / "t.txt", text).string());
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  expect_error([&] { c.sequential_batches(false, 3, 4, kMax); },
               {"[TextCorpus] batch_size 3 times max_batches 9223372036854775807 windows "
                "overflows a 64-bit count; pass a max_batches of at most 3074457345618258602"});
  expect_error([&] { c.sequential_batches(false, 3, 4, 0); },
               {"batch_size, context and max_batches must be positive, got 3, 4 and 0"});
  expect_error([&] { c.batch(true, 1, kMax); },
               {"the training part has 180 bytes, fewer than context + 1 "
                "(9223372036854775807 + 1)"});
  expect_error([&] { c.sequential_batches(false, 1, kMax, 1); },
               {"the validation part has 20 bytes, fewer than context + 1"});
  expect_error([&] { c.batch(true, kMax / 2, 8); },
               {"a batch of 4611686018427387903 windows of 8 bytes holds more elements than a "
                "64-bit count holds; pass a smaller batch_size or context"});
  // The largest max_batches that does not overflow reads every window.
  EXPECT_EQ(c.sequential_batches(false, 3, 4, kMax / 3).size(), 2u);
  fs::remove_all(dir);
}

TEST(TextCorpus, EncodeDecodeBytes) {
  const std::string s = "h\xc3\xa9llo";  // UTF-8 "héllo": bytes, not code points
  Tensor t = encode_bytes(s);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.to_vector<int64_t>()[1], 0xc3);
  EXPECT_EQ(decode_bytes(t), s);
}

TEST(TextCorpus, Errors) {
  expect_error([] { TextCorpus("/nonexistent/corpus.txt"); }, {"TextCorpus", "/nonexistent"});
  const fs::path p = fs::temp_directory_path() / "mantissa_text_corpus_tiny.txt";
  write_file(p, "abc");
  expect_error([&] { TextCorpus(p.string()); }, {"3 bytes", "too little"});
  fs::remove(p);
}

// A directory with nothing to read said "holds 0 bytes", as of an empty file.
TEST(TextCorpus, DirectoryWithoutFilesSaysSo) {
  const fs::path dir = fs::temp_directory_path() / "mantissa_text_corpus_empty_dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  expect_error([&] { TextCorpus(dir.string()); },
               {"is a directory with no files to read (it is empty)",
                "regular files directly in it", "*.dat"});
  fs::create_directories(dir / "sub");
  write_file(dir / "a.dat", "index");
  expect_error([&] { TextCorpus(dir.string()); },
               {"no files to read (its 2 entries are none of those)"});
  fs::remove_all(dir);
}

TEST(TextCorpus, DefaultIsTheFortunesPackage) {
  if (!fs::exists(std::string(TextCorpus::kDefaultPath) + "/cookie"))
    GTEST_SKIP() << "Debian package 'fortunes' not installed";
  TextCorpus c;
  EXPECT_GT(c.train_text().size(), 1'000'000u);
  for (const auto& f : c.files()) {
    EXPECT_EQ(f.find(".dat"), std::string::npos) << f;
    EXPECT_EQ(f.find(".u8"), std::string::npos) << f;
  }
}

}  // namespace
}  // namespace mantissa::data
