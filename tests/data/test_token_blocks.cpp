// TokenBlockDataset and tokenize_file: plain text packed into next-token blocks, JSONL text and
// prompt/completion records (prompt targets ignored), the validation split, and bad lines
// refused naming file and line. The tokenizer is a byte tokenizer with BOS 256 and EOS 257.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

#include "mantissa/data/token_blocks.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::data {
namespace {

using mantissa::testing::expect_error;

constexpr int64_t kBos = 256, kEos = 257;

std::vector<int64_t> byte_tokens(std::string_view text, bool special) {
  std::vector<int64_t> ids;
  if (special) ids.push_back(kBos);
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string write(const mantissa::testing::TempDir& dir, const std::string& name,
                  const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<int64_t> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return {c.data<int64_t>(), c.data<int64_t>() + c.numel()};
}

TEST(TokenBlocks, PlainTextIsOneDocumentPackedIntoShiftedBlocks) {
  mantissa::testing::TempDir dir;
  const std::string path = write(dir, "a.txt", "abcdefg");
  const auto stream =
      std::make_shared<TokenStream>(tokenize_file(path, byte_tokens, {.eos_id = kEos}));
  // BOS a b c d e f g EOS: 9 tokens, blocks of 4 -> 2 blocks.
  ASSERT_EQ(stream->tokens.size(), 9u);
  EXPECT_EQ(stream->tokens.front(), kBos);
  EXPECT_EQ(stream->tokens.back(), kEos);
  EXPECT_FALSE(stream->completion_only);
  EXPECT_EQ(block_count(*stream, 4), 2);
  const TokenBlockDataset set(stream, 4, 0, 2);
  const Example b = set.get_batch({1, 0});
  EXPECT_EQ(values(b.input), (std::vector<int64_t>{'d', 'e', 'f', 'g', kBos, 'a', 'b', 'c'}));
  EXPECT_EQ(values(b.target), (std::vector<int64_t>{'e', 'f', 'g', kEos, 'a', 'b', 'c', 'd'}));
  EXPECT_EQ(set.trained_targets(), 8);
}

TEST(TokenBlocks, CompletionOnlyIgnoresThePromptTargets) {
  mantissa::testing::TempDir dir;
  const std::string path = write(dir, "pc.jsonl",
                                 "{\"prompt\": \"Q:\", \"completion\": \"yes\"}\n{\"prompt\": "
                                 "\"R\", \"completion\": \"no\"}\n");
  const auto stream =
      std::make_shared<TokenStream>(tokenize_file(path, byte_tokens, {.eos_id = kEos}));
  EXPECT_TRUE(stream->completion_only);
  EXPECT_EQ(stream->documents, 2);
  // BOS Q : y e s EOS | BOS R n o EOS
  EXPECT_EQ(stream->tokens,
            (std::vector<int64_t>{kBos, 'Q', ':', 'y', 'e', 's', kEos, kBos, 'R', 'n', 'o', kEos}));
  EXPECT_EQ(stream->trained, (std::vector<uint8_t>{0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1}));
  const TokenBlockDataset set(stream, 11, 0, 1);
  EXPECT_EQ(values(set.get(0).target),
            (std::vector<int64_t>{kIgnoreIndex, kIgnoreIndex, 'y', 'e', 's', kEos, kIgnoreIndex,
                                  kIgnoreIndex, 'n', 'o', kEos}));
  EXPECT_EQ(set.trained_targets(), 7);
}

TEST(TokenBlocks, TextRecordsTrainEveryToken) {
  mantissa::testing::TempDir dir;
  const std::string path = write(dir, "t.jsonl", "{\"text\": \"hi\"}\r\n{\"text\": \"yo\"}");
  const TokenStream s = tokenize_file(path, byte_tokens, {});
  EXPECT_EQ(s.tokens, (std::vector<int64_t>{kBos, 'h', 'i', kBos, 'y', 'o'}));
  EXPECT_EQ(s.trained, (std::vector<uint8_t>{1, 1, 1, 1, 1, 1}));
}

// Blank and whitespace-only lines (trailing newlines an editor or `echo >>` leaves, CRLF ones,
// gaps between records) are skipped, as the datasets/pyarrow JSON Lines reader skips them; a
// later bad line's error still gives its line number in the file.
TEST(TokenBlocks, BlankJsonlLinesAreSkippedAndLineNumbersKept) {
  mantissa::testing::TempDir dir;
  const std::string path =
      write(dir, "gaps.jsonl", "\n{\"text\": \"hi\"}\n \t\n\r\n{\"text\": \"yo\"}\r\n\n\n  \n");
  const TokenStream s = tokenize_file(path, byte_tokens, {});
  EXPECT_EQ(s.tokens, (std::vector<int64_t>{kBos, 'h', 'i', kBos, 'y', 'o'}));
  EXPECT_EQ(s.documents, 2);
  const std::string bad = write(dir, "gapbad.jsonl", "{\"text\": \"a\"}\n\n  \n{\"text\": 3}\n\n");
  expect_error([&] { tokenize_file(bad, byte_tokens, {}); },
               {"gapbad.jsonl' line 4: field 'text' must be a string, got 3"});
}

// The extension decides the format in any case; a .json file (records in a JSON array) is
// refused before it is read, instead of training on its brackets and keys as plain text.
TEST(TokenBlocks, JsonlInAnyCaseAndJsonRefused) {
  mantissa::testing::TempDir dir;
  const std::string path = write(dir, "t.JSONL", "{\"text\": \"hi\"}\n");
  EXPECT_EQ(tokenize_file(path, byte_tokens, {}).tokens, (std::vector<int64_t>{kBos, 'h', 'i'}));
  const std::string json = write(dir, "t.Json", "[{\"text\": \"hi\"}]\n");
  EXPECT_EQ(mantissa::testing::error_of([&] { tokenize_file(json, byte_tokens, {}); }),
            "[data] the data file '" + json +
                "' is a .json file, which is read neither as records nor as text: give JSON "
                "Lines (.jsonl: one {\"text\": ...} or {\"prompt\": ..., \"completion\": ...} "
                "object a line; from a JSON array: jq -c '.[]' FILE.json > FILE.jsonl) or a "
                "plain-text file");
}

TEST(TokenBlocks, LargePlainTextIsTokenizedInPiecesWithProgress) {
  mantissa::testing::TempDir dir;
  std::string text;
  while (text.size() < 3 * static_cast<size_t>(kPlainTextPieceBytes)) text += "a line of text\n";
  const std::string path = write(dir, "big.txt", text);
  std::vector<int64_t> reports;
  const TokenStream s =
      tokenize_file(path, byte_tokens, {.progress = [&](int64_t done, int64_t total) {
                      EXPECT_EQ(total, static_cast<int64_t>(text.size()));
                      reports.push_back(done);
                    }});
  // One BOS (the first piece), then every byte.
  EXPECT_EQ(s.tokens.size(), text.size() + 1);
  ASSERT_GE(reports.size(), 3u);
  EXPECT_EQ(reports.back(), static_cast<int64_t>(text.size()));
  EXPECT_TRUE(std::is_sorted(reports.begin(), reports.end()));
}

TEST(TokenBlocks, SplitKeepsTheLastBlocksForValidation) {
  auto stream = std::make_shared<TokenStream>();
  for (int i = 0; i < 41; ++i) {
    stream->tokens.push_back(i);
    stream->trained.push_back(1);
  }
  const TokenBlockSplit split = split_blocks(stream, 4, 0.2, "x");
  EXPECT_EQ(split.train->size(), 8);
  EXPECT_EQ(split.val->size(), 2);
  EXPECT_EQ(values(split.val->get(0).input), (std::vector<int64_t>{32, 33, 34, 35}));
  expect_error([&] { split_blocks(stream, 30, 0.1, "short.txt"); },
               {"'short.txt' holds 41 tokens, fewer than two blocks of --block-size 30"});
}

TEST(TokenBlocks, BadLinesAreRefusedNamingFileAndLine) {
  mantissa::testing::TempDir dir;
  const auto refuse = [&](const std::string& text, const std::string& piece) {
    const std::string path = write(dir, "bad.jsonl", text);
    expect_error([&] { tokenize_file(path, byte_tokens, {}); }, {"bad.jsonl' line 2: " + piece});
  };
  refuse("{\"text\": \"a\"}\n{\"text\": \"a\"\n", "not valid JSON");
  refuse("{\"text\": \"a\"}\n[1]\n", "expected a JSON object");
  refuse("{\"text\": \"a\"}\n{\"prompt\": \"a\"}\n",
         "a record needs a 'text' field, or 'prompt' and 'completion' fields");
  refuse("{\"text\": \"a\"}\n{\"text\": 3}\n", "field 'text' must be a string, got 3");
  refuse("{\"text\": \"a\"}\n{\"text\": \"\"}\n", "field 'text' is empty");
  expect_error([&] { tokenize_file(dir.file("none.txt"), byte_tokens, {}); },
               {"cannot open the data file", "none.txt"});
  const std::string empty = write(dir, "empty.txt", "\n\n");
  expect_error([&] { tokenize_file(empty, byte_tokens, {}); }, {"empty.txt' is empty"});
}

// Only regular files are read: /dev/zero as --data grew `mantissa finetune` without bound (it read
// until memory ran out), and a FIFO without a writer would block. A directory is named too.
TEST(TokenBlocks, ADeviceFifoOrDirectoryIsRefusedBeforeReading) {
  mantissa::testing::TempDir dir;
  expect_error(
      [] { tokenize_file("/dev/zero", byte_tokens); },
      {"[data]", "the data file '/dev/zero' is not a regular file", "give a .jsonl or text file"});
  const std::string fifo = dir.file("fifo.jsonl");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { tokenize_file(fifo, byte_tokens); }, "fifo.jsonl' is not a regular file");
  expect_error([&] { tokenize_file(dir.str(), byte_tokens); }, "is not a regular file");
  expect_error([&] { tokenize_file(dir.file("missing.txt"), byte_tokens); },
               {"cannot open the data file", "missing.txt", "No such file or directory"});
}

// A binary file (or text in another encoding) is not tokenized as text: the error names the file
// and the offset and line of the first byte that is not UTF-8 text, in plain text and JSONL.
TEST(TokenBlocks, BytesThatAreNotUtf8TextAreRefusedNamingTheOffset) {
  mantissa::testing::TempDir dir;
  const std::string latin1 = write(dir, "latin1.txt", "caf\xe9 au lait\n");
  expect_error([&] { tokenize_file(latin1, byte_tokens, {}); },
               {"[data] the data file '",
                "latin1.txt' is not UTF-8 text: the byte at offset 3 "
                "(line 1) is 0xe9, which begins no UTF-8 character"});
  // A JSONL file is checked whole before its lines are parsed: the error gives the offset.
  const std::string jsonl =
      write(dir, "bin.jsonl", std::string("{\"text\": \"a\"}\n{\"text\": \"b\"}\0\x01\n", 30));
  expect_error([&] { tokenize_file(jsonl, byte_tokens, {}); },
               {"bin.jsonl' is not UTF-8 text: the byte at offset 27 (line 2) is NUL"});
  // Valid UTF-8 beyond ASCII is text.
  const std::string utf8 = write(dir, "utf8.txt", "caf\xc3\xa9 au lait\n");
  EXPECT_EQ(tokenize_file(utf8, byte_tokens, {}).tokens.size(), 1u + 14u);  // BOS + 14 bytes
}

}  // namespace
}  // namespace mantissa::data
