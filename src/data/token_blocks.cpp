// Fine-tuning data: files of documents tokenized into one stream, cut into next-token blocks.
#include "mantissa/data/token_blocks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/utf8.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::data {
namespace {

constexpr const char* kWhere = "data";

// A file's path for a message, whole (escaped; paths from the command line run long).
std::string quoted_path(const std::string& path) { return quote_untrusted(path, 4096); }

// Closes the descriptor on every path out of read_whole_file.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The file's bytes. Only a regular file is read, checked on the opened descriptor (O_NONBLOCK:
// a FIFO must not wait for a writer): /dev/zero or a pipe is endless and would grow the process
// until it runs out of memory. More than kDataFileMaxBytes is refused, counted while reading (a
// file may grow, /proc files claim size 0).
std::string read_whole_file(const std::string& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  MANTISSA_CHECK(f.fd >= 0, kWhere, "cannot open the data file {}: {}", quoted_path(path),
                 std::strerror(errno));
  struct stat st {};
  MANTISSA_CHECK(::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode), kWhere,
                 "the data file {} is not a regular file (a directory, device, FIFO or socket); "
                 "give a .jsonl or text file",
                 quoted_path(path));
  const auto too_long = [&](uint64_t at_least) {
    fail(kWhere, "the data file {} holds at least {} bytes, more than the limit of {} bytes",
         quoted_path(path), at_least, kDataFileMaxBytes);
  };
  if (static_cast<uint64_t>(st.st_size) > kDataFileMaxBytes) too_long(st.st_size);
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    MANTISSA_CHECK(n >= 0, kWhere, "cannot read the data file {}: {}", quoted_path(path),
                   std::strerror(errno));
    if (n == 0) break;
    if (text.size() + static_cast<uint64_t>(n) > kDataFileMaxBytes) too_long(text.size() + n);
    text.append(chunk, static_cast<size_t>(n));
  }
  return text;
}

// Whether `path`'s file name ends with `suffix` (lower case), in any case: "data.JSONL" is
// JSONL too, not plain text.
bool has_extension(std::string_view path, std::string_view suffix) {
  if (path.size() < suffix.size()) return false;
  const std::string_view end = path.substr(path.size() - suffix.size());
  return std::equal(end.begin(), end.end(), suffix.begin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == b;
  });
}

// Appends one document: its tokens, whether each is a target, and the EOS.
void append(TokenStream& out, const std::vector<int64_t>& tokens, size_t untrained_prefix,
            const std::optional<int64_t>& eos_id) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    out.tokens.push_back(tokens[i]);
    out.trained.push_back(i >= untrained_prefix ? 1 : 0);
  }
  if (eos_id && (tokens.empty() || tokens.back() != *eos_id)) {
    out.tokens.push_back(*eos_id);
    out.trained.push_back(1);
  }
  ++out.documents;
}

// The string field `key` of a record, nullopt when absent; throws when it is not a string.
std::optional<std::string> string_field(const nlohmann::json& record, const char* key,
                                        const std::string& where_line) {
  const auto it = record.find(key);
  if (it == record.end()) return std::nullopt;
  MANTISSA_CHECK(it->is_string(), kWhere, "{}: field '{}' must be a string, got {}", where_line,
                 key, io::json_excerpt(*it));
  return it->get<std::string>();
}

void tokenize_jsonl(const std::string& path, const std::string& text, const TokenizeFn& tokenize,
                    const TokenizeOptions& options, TokenStream& out) {
  size_t start = 0;
  int64_t line_no = 0;
  bool any_text = false, any_completion = false;
  const auto total = static_cast<int64_t>(text.size());
  int64_t last_report = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line(text.data() + start, end - start);
    ++line_no;
    start = end + 1;
    // Blank lines (an editor's or `echo >>`'s trailing newlines) hold no record: skipped, as the
    // datasets/pyarrow JSON Lines reader skips them; line_no still counts them.
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    if (line.back() == '\r') line.remove_suffix(1);
    const std::string where_line = fmt::format("{} line {}", quoted_path(path), line_no);
    io::check_json_nesting(line, kWhere, where_line);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(kWhere, "{}: not valid JSON ({}): {}", where_line, e.what(), quote_untrusted(line));
    }
    MANTISSA_CHECK(record.is_object(), kWhere, "{}: expected a JSON object, got {}", where_line,
                   io::json_excerpt(record));
    const auto doc = string_field(record, "text", where_line);
    const auto prompt = string_field(record, "prompt", where_line);
    const auto completion = string_field(record, "completion", where_line);
    if (doc) {
      MANTISSA_CHECK(!prompt && !completion, kWhere,
                     "{}: has both 'text' and 'prompt'/'completion'; give one form", where_line);
      MANTISSA_CHECK(!doc->empty(), kWhere, "{}: field 'text' is empty", where_line);
      append(out, tokenize(*doc, true), 0, options.eos_id);
      any_text = true;
    } else {
      MANTISSA_CHECK(prompt && completion, kWhere,
                     "{}: a record needs a 'text' field, or 'prompt' and 'completion' fields; "
                     "this one has {}",
                     where_line, record.empty() ? "none" : io::json_excerpt(record));
      MANTISSA_CHECK(!completion->empty(), kWhere, "{}: field 'completion' is empty", where_line);
      const std::vector<int64_t> prompt_ids = tokenize(*prompt, true);
      std::vector<int64_t> whole = tokenize(*prompt + *completion, true);
      // The prompt's encoding may end in a token the joined text merges with the completion's
      // first characters; then the two are encoded apart so the boundary is exact.
      const bool prefix = whole.size() > prompt_ids.size() &&
                          std::equal(prompt_ids.begin(), prompt_ids.end(), whole.begin());
      if (!prefix) {
        whole = prompt_ids;
        const std::vector<int64_t> tail = tokenize(*completion, false);
        whole.insert(whole.end(), tail.begin(), tail.end());
      }
      append(out, whole, prompt_ids.size(), options.eos_id);
      any_completion = true;
    }
    if (options.progress && static_cast<int64_t>(start) - last_report >= kPlainTextPieceBytes) {
      last_report = static_cast<int64_t>(start);
      options.progress(std::min<int64_t>(last_report, total), total);
    }
  }
  MANTISSA_CHECK(!(any_text && any_completion), kWhere,
                 "{} mixes 'text' records and 'prompt'/'completion' records; use one form a file",
                 quoted_path(path));
  out.completion_only = any_completion;
}

void tokenize_plain(const std::string& text, const TokenizeFn& tokenize,
                    const TokenizeOptions& options, TokenStream& out) {
  std::vector<int64_t> tokens;
  const auto total = static_cast<int64_t>(text.size());
  size_t start = 0;
  while (start < text.size()) {
    // A piece ends at a newline that a non-space character follows: the pre-tokenizers never
    // join a newline with a following word, so the pieces' tokens are the whole text's.
    size_t end = text.size();
    if (text.size() - start > static_cast<size_t>(kPlainTextPieceBytes)) {
      size_t cut = start + static_cast<size_t>(kPlainTextPieceBytes);
      while (cut + 1 < text.size() &&
             !(text[cut] == '\n' && !std::isspace(static_cast<unsigned char>(text[cut + 1]))))
        ++cut;
      end = std::min(cut + 1, text.size());
    }
    const std::vector<int64_t> piece =
        tokenize(std::string_view(text).substr(start, end - start), start == 0);
    tokens.insert(tokens.end(), piece.begin(), piece.end());
    start = end;
    if (options.progress) options.progress(static_cast<int64_t>(start), total);
  }
  append(out, tokens, 0, options.eos_id);
}

}  // namespace

TokenStream tokenize_file(const std::string& path, const TokenizeFn& tokenize,
                          const TokenizeOptions& options) {
  MANTISSA_CHECK(tokenize != nullptr, kWhere, "no tokenizer given");
  // A .json file (a JSON array or object of records, as datasets and many tools write) read as
  // plain text would train on its brackets, keys and quotes: refused before it is read.
  MANTISSA_CHECK(!has_extension(path, ".json"), kWhere,
                 "the data file {} is a .json file, which is read neither as records nor as "
                 "text: give JSON Lines (.jsonl: one {{\"text\": ...}} or {{\"prompt\": ..., "
                 "\"completion\": ...}} object a line; from a JSON array: jq -c '.[]' FILE.json "
                 "> FILE.jsonl) or a plain-text file",
                 quoted_path(path));
  const std::string text = read_whole_file(path);
  MANTISSA_CHECK(text.find_first_not_of(" \t\r\n") != std::string::npos, kWhere,
                 "the data file {} is empty", quoted_path(path));
  // A binary file read as text would be tokenized into garbage (byte-level tokenizers accept
  // any byte); JSON parsing alone would catch it in string values only.
  if (const auto bad = first_non_text_byte(text)) {
    fail(kWhere,
         "the data file {} is not UTF-8 text: {}; fine-tuning data is UTF-8 text or JSONL (a "
         "binary file? text in another encoding can be converted, e.g. iconv -f LATIN1 -t UTF-8)",
         quoted_path(path), describe_non_text_byte(*bad));
  }
  TokenStream out;
  if (has_extension(path, ".jsonl"))
    tokenize_jsonl(path, text, tokenize, options, out);
  else
    tokenize_plain(text, tokenize, options, out);
  return out;
}

int64_t block_count(const TokenStream& stream, int64_t block_size) {
  const auto n = static_cast<int64_t>(stream.tokens.size());
  return n > block_size ? (n - 1) / block_size : 0;
}

TokenBlockDataset::TokenBlockDataset(std::shared_ptr<const TokenStream> stream, int64_t block_size,
                                     int64_t first_block, int64_t blocks)
    : stream_(std::move(stream)),
      block_size_(block_size),
      first_block_(first_block),
      blocks_(blocks) {
  MANTISSA_CHECK(stream_ != nullptr, "TokenBlockDataset", "no token stream");
  MANTISSA_CHECK(block_size_ >= 1, "TokenBlockDataset", "block size must be at least 1, got {}",
                 block_size_);
  MANTISSA_CHECK(first_block_ >= 0 && blocks_ >= 0 &&
                     first_block_ + blocks_ <= block_count(*stream_, block_size_),
                 "TokenBlockDataset", "blocks [{}, {}) outside the stream's {} blocks",
                 first_block_, first_block_ + blocks_, block_count(*stream_, block_size_));
}

Example TokenBlockDataset::get(int64_t index) const {
  Example batch = get_batch({index});
  return {batch.input.reshape({block_size_}), batch.target.reshape({block_size_})};
}

Example TokenBlockDataset::get_batch(const std::vector<int64_t>& indices) const {
  const auto rows = static_cast<int64_t>(indices.size());
  Tensor x = empty({rows, block_size_}, kInt64), y = empty({rows, block_size_}, kInt64);
  int64_t* xp = x.data<int64_t>();
  int64_t* yp = y.data<int64_t>();
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t i = indices[static_cast<size_t>(b)];
    MANTISSA_CHECK(i >= 0 && i < blocks_, "TokenBlockDataset", "block {} out of range ({} blocks)",
                   i, blocks_);
    const auto base = static_cast<size_t>((first_block_ + i) * block_size_);
    for (int64_t j = 0; j < block_size_; ++j) {
      const size_t t = base + static_cast<size_t>(j);
      xp[b * block_size_ + j] = stream_->tokens[t];
      yp[b * block_size_ + j] = stream_->trained[t + 1] ? stream_->tokens[t + 1] : kIgnoreIndex;
    }
  }
  return {x, y};
}

int64_t TokenBlockDataset::trained_targets() const {
  int64_t n = 0;
  const auto begin = static_cast<size_t>(first_block_ * block_size_) + 1;
  const auto end = begin + static_cast<size_t>(blocks_ * block_size_);
  for (size_t t = begin; t < end; ++t) n += stream_->trained[t];
  return n;
}

TokenBlockSplit split_blocks(std::shared_ptr<const TokenStream> stream, int64_t block_size,
                             double val_fraction, const std::string& path) {
  MANTISSA_CHECK(block_size >= 1, kWhere, "--block-size must be at least 1, got {}", block_size);
  MANTISSA_CHECK(val_fraction > 0 && val_fraction < 1, kWhere,
                 "the validation fraction must be in (0, 1), got {}", val_fraction);
  const int64_t blocks = block_count(*stream, block_size);
  MANTISSA_CHECK(blocks >= 2, kWhere,
                 "{} holds {} tokens, fewer than two blocks of --block-size {} (+1) (one to "
                 "train, one to validate); use more data or a smaller --block-size",
                 quoted_path(path), stream->tokens.size(), block_size);
  const int64_t val =
      std::clamp<int64_t>(std::llround(static_cast<double>(blocks) * val_fraction), 1, blocks - 1);
  TokenBlockSplit split{std::make_shared<TokenBlockDataset>(stream, block_size, 0, blocks - val),
                        std::make_shared<TokenBlockDataset>(stream, block_size, blocks - val, val)};
  MANTISSA_CHECK(split.train->trained_targets() > 0, kWhere,
                 "{}: the training blocks hold no completion token to train on", quoted_path(path));
  MANTISSA_CHECK(split.val->trained_targets() > 0, kWhere,
                 "{}: the validation blocks (the last {} of {}) hold no completion token to "
                 "validate on; use more data",
                 quoted_path(path), val, blocks);
  return split;
}

}  // namespace mantissa::data
