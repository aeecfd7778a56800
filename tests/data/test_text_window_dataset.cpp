// TextWindowDataset: the windows tile the text with the next-byte shift, match
// TextCorpus::sequential_batches, and short texts are refused with both lengths named.
#include <gtest/gtest.h>

#include <fstream>

#include "mantissa/data/dataloader.h"
#include "mantissa/data/text_corpus.h"
#include "mantissa/data/text_window_dataset.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::data {
namespace {

using mantissa::testing::expect_error;

TEST(TextWindowDataset, TilesTheTextWithTheNextByteAsTarget) {
  const TextWindowDataset set("abcdefghij", /*context=*/3);
  ASSERT_EQ(set.size(), 3);  // windows at 0, 3, 6 (each needs 4 bytes)
  const Example e = set.get(1);
  EXPECT_EQ(e.input.shape(), (Shape{3}));
  EXPECT_EQ(decode_bytes(e.input), "def");
  EXPECT_EQ(decode_bytes(e.target), "efg");
  const Example b = set.get_batch({2, 0});
  EXPECT_EQ(b.input.shape(), (Shape{2, 3}));
  EXPECT_EQ(decode_bytes(b.input.reshape({6})), "ghiabc");
  EXPECT_EQ(decode_bytes(b.target.reshape({6})), "hijbcd");
  EXPECT_EQ(b.input.dtype(), kInt64);
}

TEST(TextWindowDataset, StrideOverlapsWindows) {
  const TextWindowDataset set("abcdefghij", /*context=*/3, /*stride=*/1);
  EXPECT_EQ(set.size(), 7);  // starts 0..6
  EXPECT_EQ(decode_bytes(set.get(6).target), "hij");
}

TEST(TextWindowDataset, ValidationWindowsAreThoseOfSequentialBatches) {
  mantissa::testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  std::ofstream(dir.file("t.txt")) << text;
  const TextCorpus corpus(dir.file("t.txt"));
  const auto want = corpus.sequential_batches(/*train=*/false, 2, 8, 100);
  auto set = std::make_shared<TextWindowDataset>(corpus.val_text(), 8);
  DataLoader loader(set, 2);
  ASSERT_EQ(loader.size(), static_cast<int64_t>(want.size()));
  const auto order = loader.indices(0);
  for (int64_t b = 0; b < loader.size(); ++b) {
    const Example got = loader.batch(order, b);
    EXPECT_EQ(got.input.to_vector<int64_t>(), want[b].first.to_vector<int64_t>());
    EXPECT_EQ(got.target.to_vector<int64_t>(), want[b].second.to_vector<int64_t>());
  }
}

TEST(TextWindowDataset, RefusesTooShortTextsAndBadSizes) {
  expect_error([] { TextWindowDataset("abc", 3); }, {"3 bytes", "context + 1 = 4"});
  expect_error([] { TextWindowDataset("abcdef", 0); }, "context must be positive");
  expect_error([] { TextWindowDataset("abcdef", 2, -1); }, "stride");
  const TextWindowDataset set("abcdef", 2);
  expect_error([&] { set.get(9); }, "out of range");
}

}  // namespace
}  // namespace mantissa::data
