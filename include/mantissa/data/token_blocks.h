#pragma once
// Fine-tuning data for a tokenized language model: documents read from a file, tokenized by a
// caller-supplied function (the tokenizer sits in a layer above data), joined into one token
// stream and cut into blocks for next-token prediction.
//
// Files:
//   *.jsonl   (any case) one JSON object a line: {"text": ...} (every token is trained), or
//             {"prompt": ..., "completion": ...} (only the completion's tokens count in the
//             loss: the prompt's targets are kIgnoreIndex, as completion-only fine-tuning
//             does). A line that is not JSON, not an object, lacks both forms, has a field that
//             is not a string, or has no text is refused naming the file and line number.
//   *.json    refused (a JSON array or object of records is neither JSONL nor text).
//   other     plain text, tokenized whole (a file above kPlainTextPieceBytes in pieces cut at
//             the start of a line, so progress can be shown).
//
// Each document is encoded with the tokenizer's special tokens (a BOS where its config adds
// one); the EOS id, when given, ends each document unless its encoding already does. Prompt
// and completion are encoded as one text (prompt + completion) when the prompt's tokens are a
// prefix of it, so a word split across the boundary is tokenized as it would be at inference;
// otherwise as the two encodings joined.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mantissa/data/dataset.h"

namespace mantissa::data {

// The target of a position that is not trained (torch's cross-entropy ignore_index).
inline constexpr int64_t kIgnoreIndex = -100;

// Encodes text; `add_special_tokens` asks for the BOS/EOS the tokenizer's config adds.
using TokenizeFn =
    std::function<std::vector<int64_t>(std::string_view text, bool add_special_tokens)>;
// Called while a file is tokenized: bytes read so far and the file's size.
using TokenizeProgressFn = std::function<void(int64_t bytes_done, int64_t bytes_total)>;

// Tokens and their targets' mask, parallel: trained[i] says whether token i is a target.
struct TokenStream {
  std::vector<int64_t> tokens;
  std::vector<uint8_t> trained;
  int64_t documents = 0;
  bool completion_only = false;  // the file held prompt/completion records
};

struct TokenizeOptions {
  std::optional<int64_t> eos_id;  // appended to each document when set
  TokenizeProgressFn progress;    // optional
};

// Plain text files larger than this are tokenized in pieces of about this size.
inline constexpr int64_t kPlainTextPieceBytes = int64_t{1} << 20;

// The largest data file tokenize_file reads (1 GiB).
inline constexpr uint64_t kDataFileMaxBytes = uint64_t{1} << 30;

// Reads and tokenizes `path` (see above). Throws mantissa::Error from "data" naming the file (and
// the line for JSONL) when it cannot be read, is not a regular file (a device or FIFO, which can
// be endless), holds more than kDataFileMaxBytes, is empty, or a line is bad.
TokenStream tokenize_file(const std::string& path, const TokenizeFn& tokenize,
                          const TokenizeOptions& options = {});

// Blocks of `block_size` tokens for next-token prediction: block i's input is
// tokens[i*B, i*B + B) and its target tokens[i*B + 1, i*B + B + 1), with kIgnoreIndex where the
// token is not trained. The last partial block is dropped. Examples are int64 (block_size)
// tensors; get_batch stacks them (batch, block_size).
class TokenBlockDataset : public Dataset {
 public:
  // The blocks [first_block, first_block + blocks) of `stream`. Throws when block_size < 1 or
  // the range exceeds the stream's blocks.
  TokenBlockDataset(std::shared_ptr<const TokenStream> stream, int64_t block_size,
                    int64_t first_block, int64_t blocks);

  int64_t size() const override { return blocks_; }
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;
  int64_t block_size() const { return block_size_; }
  // Targets that count in the loss over all blocks.
  int64_t trained_targets() const;

 private:
  std::shared_ptr<const TokenStream> stream_;
  int64_t block_size_, first_block_, blocks_;
};

// Full blocks of `block_size` tokens (plus the one-token shift) the stream holds.
int64_t block_count(const TokenStream& stream, int64_t block_size);

// A training and a validation part: the last max(1, round(blocks * val_fraction)) blocks
// validate, the others train. Throws naming `path`, the token count and the block size when the
// stream holds fewer than two blocks, or when every target of a part is ignored.
struct TokenBlockSplit {
  std::shared_ptr<TokenBlockDataset> train, val;
};
TokenBlockSplit split_blocks(std::shared_ptr<const TokenStream> stream, int64_t block_size,
                             double val_fraction, const std::string& path);

}  // namespace mantissa::data
