#pragma once
// A byte-level text corpus for language models: any UTF-8 file, or every regular file of a
// directory, read as bytes (tokens 0..255) and split into training and validation parts.
// The default is the English fortune-cookie files of Debian's `fortunes` package
// (/usr/share/games/fortunes, about 2.7 MB).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa::data {

class TextCorpus {
 public:
  static constexpr std::string_view kDefaultPath = "/usr/share/games/fortunes";
  static constexpr int64_t kVocabSize = 256;
  // The most bytes a corpus may hold (all files of a directory together): the whole text is
  // kept in memory, twice while it is split, so an endless or huge input must fail early
  // rather than exhaust memory.
  static constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 30;  // 1 GiB

  // path "" picks kDefaultPath. A directory contributes its regular files in name order,
  // skipping strfile indexes (*.dat), *.u8 names and symbolic links (in `fortunes` those
  // are links to the same text), subdirectories and special files. The last val_fraction of
  // the bytes is the validation part. Throws, naming the path (and the package for the
  // default path), when nothing can be read, when a part is shorter than 2 bytes, when `path`
  // is a special file (a device such as /dev/zero, a FIFO, a socket: they can be endless and
  // are never read), and when the text is longer than max_bytes (checked while reading, so
  // a file that grows or lies about its size is cut off too).
  static constexpr double kDefaultValFraction = 0.1;
  explicit TextCorpus(const std::string& path = "", double val_fraction = kDefaultValFraction,
                      uint64_t max_bytes = kDefaultMaxBytes);

  const std::string& path() const { return path_; }
  const std::vector<std::string>& files() const { return files_; }
  const std::string& train_text() const { return train_; }
  const std::string& val_text() const { return val_; }

  // batch_size random windows of context + 1 bytes from the chosen part: inputs are the
  // first `context` bytes, targets the next-byte shift; both int64 (batch_size, context).
  // Window starts are drawn with gen (default generator when null). A part shorter than
  // context + 1 bytes throws, and so does a batch of more than INT64_MAX elements (sizes are
  // checked before any arithmetic on them can overflow).
  std::pair<Tensor, Tensor> batch(bool train, int64_t batch_size, int64_t context,
                                  Generator* gen = nullptr) const;
  // The windows at start, start + context, ... (consecutive, non-overlapping) of a part, as
  // batches for a deterministic validation loss: up to max_batches batches of batch_size.
  // batch_size, context and max_batches must be positive, and batch_size * max_batches within
  // int64 (an absurd max_batches is refused, not wrapped).
  std::vector<std::pair<Tensor, Tensor>> sequential_batches(bool train, int64_t batch_size,
                                                            int64_t context,
                                                            int64_t max_batches) const;

 private:
  std::string path_;
  std::vector<std::string> files_;
  std::string train_, val_;
};

// Bytes <-> int64 token tensors.
Tensor encode_bytes(std::string_view text);
std::string decode_bytes(const Tensor& tokens);

}  // namespace mantissa::data
