#include "mantissa/data/text_corpus.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/utf8.h"

namespace mantissa::data {
namespace fs = std::filesystem;

namespace {

constexpr const char* kWhere = "TextCorpus";

const char* file_kind(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  return "not a regular file";
}

// Closes the descriptor on every path out of read_file.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Appends the file's bytes to `text`, refusing anything but a regular file and stopping with an
// error once `text` would exceed max_bytes. The type is checked on the opened descriptor
// (O_NONBLOCK: opening a FIFO must not wait for a writer), so a file swapped for a FIFO or
// device after the directory was listed is refused too.
void read_file(const fs::path& p, uint64_t max_bytes, std::string& text) {
  const std::string shown = quote_untrusted(p.string(), 4096);
  Fd f{::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  MANTISSA_CHECK(f.fd >= 0, kWhere, "cannot open {}: {}", shown, std::strerror(errno));
  struct stat st {};
  MANTISSA_CHECK(::fstat(f.fd, &st) == 0, kWhere, "cannot stat {}: {}", shown,
                 std::strerror(errno));
  MANTISSA_CHECK(S_ISREG(st.st_mode), kWhere,
                 "{} is {}; a text corpus is read from regular files only (devices and pipes "
                 "can be endless)",
                 shown, file_kind(st.st_mode));
  const auto too_long = [&](uint64_t at_least) {
    fail(kWhere,
         "{}: the text is at least {} bytes, more than the limit of {} bytes; use a smaller "
         "file (e.g. `head -c 100M big.txt > part.txt`) or raise max_bytes (TextCorpus's "
         "third argument)",
         shown, at_least, max_bytes);
  };
  const uint64_t have = text.size();
  if (have + static_cast<uint64_t>(st.st_size) > max_bytes)
    too_long(have + static_cast<uint64_t>(st.st_size));
  // st_size is a hint only (a file may grow, /proc files claim 0): the cap holds per read.
  text.resize(have + static_cast<size_t>(st.st_size));
  size_t used = have;
  char chunk[1 << 16];
  for (;;) {
    char* dst = used < text.size() ? text.data() + used : chunk;
    const size_t room = used < text.size() ? text.size() - used : sizeof(chunk);
    const ssize_t n = ::read(f.fd, dst, room);
    if (n < 0 && errno == EINTR) continue;
    MANTISSA_CHECK(n >= 0, kWhere, "reading {} failed: {}", shown, std::strerror(errno));
    if (n == 0) break;
    if (dst == chunk) {
      if (used + static_cast<uint64_t>(n) > max_bytes) too_long(used + static_cast<uint64_t>(n));
      text.append(chunk, static_cast<size_t>(n));
    }
    used += static_cast<size_t>(n);
  }
  text.resize(used);  // a file that shrank while being read
  // The model is byte-level, but a binary file (or text in another encoding) read as text trains
  // on bytes that no UTF-8 prompt or sample will ever hold.
  if (const auto bad = first_non_text_byte(std::string_view(text).substr(have))) {
    fail(kWhere,
         "{} is not UTF-8 text: {}; a text corpus is read from UTF-8 text files (a binary "
         "file? text in another encoding can be converted, e.g. iconv -f LATIN1 -t UTF-8)",
         shown, describe_non_text_byte(*bad));
  }
}

bool is_index_or_alias(const fs::directory_entry& e) {
  const std::string ext = e.path().extension().string();
  return e.is_symlink() || !e.is_regular_file() || ext == ".dat" || ext == ".u8";
}

}  // namespace

TextCorpus::TextCorpus(const std::string& path, double val_fraction, uint64_t max_bytes)
    : path_(path.empty() ? std::string(kDefaultPath) : path) {
  MANTISSA_CHECK(val_fraction > 0 && val_fraction < 1, "TextCorpus",
                 "val_fraction must be in (0, 1), got {}", val_fraction);
  const bool is_default = path.empty();
  std::error_code ec;
  MANTISSA_CHECK(
      fs::exists(path_, ec), "TextCorpus", "'{}' does not exist{}", path_,
      is_default
          ? " (install the Debian package 'fortunes', or name a text file: --text FILE on the "
            "command line)"
          : "");
  std::string text;
  if (fs::is_directory(path_, ec)) {
    std::vector<fs::path> names;
    int64_t skipped = 0;
    for (const auto& e : fs::directory_iterator(path_)) {
      if (!is_index_or_alias(e))
        names.push_back(e.path());
      else
        ++skipped;
    }
    // It said "'DIR' holds 0 bytes", as of an empty file.
    MANTISSA_CHECK(!names.empty(), "TextCorpus",
                   "'{}' is a directory with no files to read{}: a corpus directory is read as "
                   "the regular files directly in it, in name order (not subdirectories, symbolic "
                   "links or fortune's index files *.dat and *.u8); put text files there, or "
                   "name a text file",
                   path_,
                   skipped == 0 ? std::string(" (it is empty)")
                                : fmt::format(" (its {} entr{} are none of those)", skipped,
                                              skipped == 1 ? "y" : "ies"));
    std::sort(names.begin(), names.end());
    for (const fs::path& p : names) {
      read_file(p, max_bytes, text);
      files_.push_back(p.string());
    }
  } else {
    read_file(path_, max_bytes, text);
    files_.push_back(path_);
  }
  const auto n = static_cast<int64_t>(text.size());
  const auto n_val = static_cast<int64_t>(static_cast<double>(n) * val_fraction);
  MANTISSA_CHECK(n - n_val >= 2 && n_val >= 2, "TextCorpus",
                 "'{}' holds {} byte{}; too little text for a training and a validation part{}",
                 path_, n, n == 1 ? "" : "s",
                 is_default ? " (is the Debian package 'fortunes' installed?)" : "");
  train_ = text.substr(0, static_cast<size_t>(n - n_val));
  val_ = text.substr(static_cast<size_t>(n - n_val));
}

namespace {
// A batch's rows * context elements, each indexed as b * context + j: refused when the count
// overflows int64 (before empty() is asked for the shape).
void check_batch_elements(int64_t rows, int64_t context) {
  MANTISSA_CHECK(rows <= std::numeric_limits<int64_t>::max() / context, "TextCorpus",
                 "a batch of {} windows of {} bytes holds more elements than a 64-bit count "
                 "holds; pass a smaller batch_size or context",
                 rows, context);
}
}  // namespace

std::pair<Tensor, Tensor> TextCorpus::batch(bool train, int64_t batch_size, int64_t context,
                                            Generator* gen) const {
  const std::string& t = train ? train_ : val_;
  const auto n = static_cast<int64_t>(t.size());
  MANTISSA_CHECK(batch_size > 0 && context > 0, "TextCorpus",
                 "batch_size and context must be positive, got {} and {}", batch_size, context);
  // Compared as context >= n: context + 1 overflows for context = INT64_MAX.
  MANTISSA_CHECK(context < n, "TextCorpus",
                 "the {} part has {} bytes, fewer than context + 1 ({} + 1)",
                 train ? "training" : "validation", n, context);
  check_batch_elements(batch_size, context);
  Generator& g = gen ? *gen : default_generator();
  Tensor x = empty({batch_size, context}, kInt64), y = empty({batch_size, context}, kInt64);
  int64_t* xp = x.data<int64_t>();
  int64_t* yp = y.data<int64_t>();
  for (int64_t b = 0; b < batch_size; ++b) {
    const auto start = static_cast<int64_t>(g.below(static_cast<uint64_t>(n - context)));
    for (int64_t j = 0; j < context; ++j) {
      xp[b * context + j] = static_cast<unsigned char>(t[static_cast<size_t>(start + j)]);
      yp[b * context + j] = static_cast<unsigned char>(t[static_cast<size_t>(start + j + 1)]);
    }
  }
  return {x, y};
}

std::vector<std::pair<Tensor, Tensor>> TextCorpus::sequential_batches(bool train,
                                                                      int64_t batch_size,
                                                                      int64_t context,
                                                                      int64_t max_batches) const {
  const std::string& t = train ? train_ : val_;
  const auto n = static_cast<int64_t>(t.size());
  MANTISSA_CHECK(batch_size > 0 && context > 0 && max_batches > 0, "TextCorpus",
                 "batch_size, context and max_batches must be positive, got {}, {} and {}",
                 batch_size, context, max_batches);
  // batch_size * max_batches overflowed int64 for absurd arguments (and a negative product
  // then read as "fewer than context + 1"): refused before it is computed.
  MANTISSA_CHECK(max_batches <= std::numeric_limits<int64_t>::max() / batch_size, "TextCorpus",
                 "batch_size {} times max_batches {} windows overflows a 64-bit count; pass a "
                 "max_batches of at most {}",
                 batch_size, max_batches, std::numeric_limits<int64_t>::max() / batch_size);
  MANTISSA_CHECK(context < n, "TextCorpus",
                 "the {} part has {} bytes, fewer than context + 1 ({} + 1)",
                 train ? "training" : "validation", n, context);
  check_batch_elements(std::min(batch_size, (n - 1) / context), context);
  const int64_t windows = std::min((n - 1) / context, batch_size * max_batches);
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int64_t w0 = 0; w0 < windows; w0 += batch_size) {
    const int64_t bs = std::min(batch_size, windows - w0);
    Tensor x = empty({bs, context}, kInt64), y = empty({bs, context}, kInt64);
    int64_t* xp = x.data<int64_t>();
    int64_t* yp = y.data<int64_t>();
    for (int64_t b = 0; b < bs; ++b) {
      const int64_t start = (w0 + b) * context;
      for (int64_t j = 0; j < context; ++j) {
        xp[b * context + j] = static_cast<unsigned char>(t[static_cast<size_t>(start + j)]);
        yp[b * context + j] = static_cast<unsigned char>(t[static_cast<size_t>(start + j + 1)]);
      }
    }
    out.emplace_back(x, y);
  }
  return out;
}

Tensor encode_bytes(std::string_view text) {
  Tensor t = empty({static_cast<int64_t>(text.size())}, kInt64);
  int64_t* p = t.data<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) p[i] = static_cast<unsigned char>(text[i]);
  return t;
}

std::string decode_bytes(const Tensor& tokens) {
  std::string s;
  for (int64_t v : tokens.to_vector<int64_t>()) {
    MANTISSA_CHECK(v >= 0 && v < 256, "decode_bytes", "token {} is not a byte (0..255)", v);
    s.push_back(static_cast<char>(static_cast<unsigned char>(v)));
  }
  return s;
}

}  // namespace mantissa::data
