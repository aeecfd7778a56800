// IDX reader and writer. The reader streams: it inflates (or reads) the header, allocates the
// tensor, then inflates the payload straight into the tensor's memory, so a 47 MB image file
// needs no second buffer. Sizes are checked both ways: data shorter than the header says is
// "truncated" (with the sizes expected and found, and for a gzip file cut short, e.g. by an
// incomplete download, its size and that its stream ends early), longer is "extra data".
#include "mantissa/data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

namespace mantissa::data {
namespace {

constexpr const char* kWhere = "idx";

[[noreturn]] void missing_file(const std::string& path, int err) {
  if (err == ENOENT) {
    fail(kWhere,
         "cannot open '{}': no such file. Fashion-MNIST is not installed there: install the "
         "Debian package `dataset-fashion-mnist` with `apt-get install dataset-fashion-mnist` "
         "(it puts the files in /usr/share/datasets/fashion-mnist), or pass --data-dir / set "
         "MANTISSA_DATA_DIR to a directory holding them",
         path);
  }
  fail(kWhere, "cannot open '{}': {}", path, std::strerror(err));
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Sequential bytes of an IDX file, gunzipped when the file starts with the gzip magic.
class Source {
 public:
  explicit Source(const std::string& path) : path_(path) {
    // Non-blocking, and looked at before reading: a FIFO blocked fopen until a writer came
    // (forever; SIGTERM did not end the run), and a directory opened and read as "not a gzip
    // file (it starts with bytes 0x00 0x00)".
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) missing_file(path, errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      const bool directory = S_ISDIR(st.st_mode);
      ::close(fd);
      MANTISSA_CHECK(!directory, kWhere, "'{}' is a directory, not an IDX file", path);
      fail(kWhere, "'{}' is not a regular file (a device, FIFO or socket), not an IDX file", path);
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    file_.reset(::fdopen(fd, "rb"));
    if (!file_) {
      const int err = errno;
      ::close(fd);
      fail(kWhere, "cannot open '{}': {}", path, std::strerror(err));
    }
    unsigned char head[2] = {0, 0};
    const size_t n = std::fread(head, 1, 2, file_.get());
    gzip_ = n == 2 && head[0] == 0x1f && head[1] == 0x8b;
    const bool gz_name = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
    MANTISSA_CHECK(gzip_ || !gz_name, kWhere,
                   "'{}': not a gzip file (it starts with bytes {:#04x} {:#04x}, gzip files "
                   "with 0x1f 0x8b)",
                   path, n > 0 ? head[0] : 0, n > 1 ? head[1] : 0);
    std::fseek(file_.get(), 0, SEEK_END);
    file_size_ = static_cast<uint64_t>(std::ftell(file_.get()));
    std::rewind(file_.get());
    if (gzip_) {
      // 15 + 16: a gzip wrapper (not zlib) with the largest window.
      MANTISSA_CHECK(inflateInit2(&zs_, 15 + 16) == Z_OK, kWhere, "'{}': zlib init failed", path);
      zs_open_ = true;
    }
  }
  ~Source() {
    if (zs_open_) inflateEnd(&zs_);
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  bool gzip() const { return gzip_; }
  uint64_t file_size() const { return file_size_; }

  // For the messages of data that ends early: why, when the gzip stream itself was cut short
  // (its input ended before its end-of-stream marker), else "".
  std::string cut_short_note() const {
    if (!cut_short_) return "";
    return fmt::format(
        " (the {}-byte gzip file ends before its end-of-stream marker: it was cut short, e.g. by "
        "an incomplete download)",
        file_size_);
  }

  // An upper bound on the bytes still to come, checked before allocating what a header asks
  // for: exact for plain files; for gzip, deflate never compresses better than 1032:1.
  uint64_t max_remaining() const {
    if (!gzip_) return file_size_ - static_cast<uint64_t>(std::ftell(file_.get()));
    return file_size_ * 1032 + 1024;
  }

  // Reads up to n bytes; fewer only at the end of the data, or where a gzip stream was cut
  // short (cut_short_note() then says so).
  size_t read(void* dst, size_t n) {
    if (!gzip_) {
      const size_t got = std::fread(dst, 1, n, file_.get());
      check_io();
      return got;
    }
    auto* out = static_cast<unsigned char*>(dst);
    size_t got = 0;
    while (got < n && !stream_end_ && !cut_short_) {
      if (zs_.avail_in == 0) {
        zs_.avail_in = static_cast<uInt>(std::fread(in_, 1, sizeof(in_), file_.get()));
        zs_.next_in = in_;
        check_io();
        if (zs_.avail_in == 0) {
          cut_short_ = true;  // the caller reports the bytes missing
          break;
        }
      }
      const size_t chunk = std::min<size_t>(n - got, UINT_MAX);
      zs_.next_out = out + got;
      zs_.avail_out = static_cast<uInt>(chunk);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      got += chunk - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        stream_end_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail(kWhere, "'{}': corrupt gzip data ({})", path_,
             zs_.msg ? zs_.msg : "zlib error " + std::to_string(rc));
      }
    }
    return got;
  }

  // Counts the bytes left after the payload (reading through the gzip trailer, which also
  // verifies its CRC). A gzip stream cut short after the payload (its trailer missing) is an
  // error: the CRC that would vouch for the data is gone.
  uint64_t remaining(uint64_t payload_bytes) {
    uint64_t extra = 0;
    unsigned char scratch[4096];
    while (size_t got = read(scratch, sizeof(scratch))) extra += got;
    MANTISSA_CHECK(!cut_short_, kWhere,
                   "'{}': truncated: the {} bytes of data the header describes{} are there, but "
                   "not the gzip trailer (CRC and length) that vouches for them{}",
                   path_, payload_bytes,
                   extra ? fmt::format(" (and {} bytes more)", extra) : std::string(),
                   cut_short_note());
    return extra;
  }

 private:
  void check_io() {
    MANTISSA_CHECK(!std::ferror(file_.get()), kWhere, "'{}': read error: {}", path_,
                   std::strerror(errno));
  }

  std::string path_;
  File file_;
  bool gzip_ = false;
  uint64_t file_size_ = 0;
  z_stream zs_{};
  bool zs_open_ = false;
  bool stream_end_ = false;
  bool cut_short_ = false;  // the gzip input ended before its end-of-stream marker
  unsigned char in_[1 << 16];
};

uint32_t big_endian32(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

Tensor read_checked(const std::string& path, uint32_t expect_magic) {
  auto src = std::make_unique<Source>(path);
  const char* kind = src->gzip() ? "decompressed data" : "file";
  unsigned char magic[4];
  const size_t got_magic = src->read(magic, 4);
  MANTISSA_CHECK(got_magic == 4, kWhere,
                 "'{}': truncated: the {} has {} bytes, too short for "
                 "the 4-byte IDX magic number{}",
                 path, kind, got_magic, src->cut_short_note());
  const uint32_t m = big_endian32(magic);
  const uint32_t ndim = magic[3];
  const char* expected = expect_magic == kIdxImagesMagic   ? "0x00000803 (images)"
                         : expect_magic == kIdxLabelsMagic ? "0x00000801 (labels)"
                                                           : "0x000008NN (unsigned bytes)";
  const bool ok =
      expect_magic ? m == expect_magic
                   : (magic[0] == 0 && magic[1] == 0 && magic[2] == 0x08 && ndim >= 1 && ndim <= 4);
  MANTISSA_CHECK(ok, kWhere,
                 "'{}': bad magic number {:#010x}, expected {}; not an IDX file of "
                 "unsigned bytes",
                 path, m, expected);

  unsigned char dims_raw[16];
  const size_t got_dims = src->read(dims_raw, 4 * ndim);
  MANTISSA_CHECK(got_dims == 4 * ndim, kWhere,
                 "'{}': truncated header: {} dims need {} bytes after the magic, the {} has {}{}",
                 path, ndim, 4 * ndim, kind, got_dims, src->cut_short_note());
  Shape shape;
  uint64_t bytes = 1;
  for (uint32_t d = 0; d < ndim; ++d) shape.push_back(big_endian32(dims_raw + 4 * d));
  // Checked before each product (below 2^40 times below 2^32 can pass 2^64): [2^31, 4, 2^31]
  // wrapped to 0 bytes, passed, and failed later without the file's name.
  for (const int64_t dim : shape) {
    const uint64_t n = static_cast<uint64_t>(dim);
    MANTISSA_CHECK(n == 0 || bytes < (uint64_t{1} << 40) / n, kWhere,
                   "'{}': implausible dims {} (more than 2^40 bytes)", path, shape_str(shape));
    bytes *= n;
  }

  const uint64_t avail = src->max_remaining();
  MANTISSA_CHECK(
      bytes <= avail, kWhere,
      "'{}': truncated: the header describes {} = {} bytes of data but the {} {}", path,
      shape_str(shape), bytes, kind,
      src->gzip() ? fmt::format("of the {}-byte file can hold at most {}", src->file_size(), avail)
                  : fmt::format("holds only {}", avail));
  Tensor t = empty(shape, kUInt8);
  const size_t got = bytes ? src->read(t.data_ptr(), bytes) : 0;
  MANTISSA_CHECK(got == bytes, kWhere,
                 "'{}': truncated: the header describes {} = {} bytes of data but the {} holds "
                 "only {}{}",
                 path, shape_str(shape), bytes, kind, got, src->cut_short_note());
  const uint64_t extra = src->remaining(bytes);
  MANTISSA_CHECK(extra == 0, kWhere,
                 "'{}': {} bytes of extra data after the {} bytes the header {} describes", path,
                 extra, bytes, shape_str(shape));
  return t;
}

}  // namespace

Tensor read_idx(const std::string& path) { return read_checked(path, 0); }
Tensor read_idx_images(const std::string& path) { return read_checked(path, kIdxImagesMagic); }
Tensor read_idx_labels(const std::string& path) { return read_checked(path, kIdxLabelsMagic); }

void write_idx(const std::string& path, const Tensor& t, bool gzip) {
  MANTISSA_CHECK(t.dtype() == kUInt8 && t.dim() >= 1 && t.dim() <= 4, kWhere,
                 "write_idx needs a uint8 tensor of 1 to 4 dims, got {} {}", t.dtype().name(),
                 shape_str(t.shape()));
  std::string bytes = {0, 0, 0x08, static_cast<char>(t.dim())};
  for (int64_t d : t.shape()) {
    MANTISSA_CHECK(d <= UINT32_MAX, kWhere, "dim {} does not fit IDX's uint32", d);
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((d >> s) & 0xff));
  }
  const Tensor c = t.contiguous();
  bytes.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) fail(kWhere, "cannot create '{}': {}", path, std::strerror(errno));
    const int wrote = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    const int closed = gzclose(f);
    MANTISSA_CHECK(wrote == static_cast<int>(bytes.size()) && closed == Z_OK, kWhere,
                   "'{}': gzip write failed", path);
  } else {
    File f(std::fopen(path.c_str(), "wb"));
    if (!f) fail(kWhere, "cannot create '{}': {}", path, std::strerror(errno));
    const size_t wrote = std::fwrite(bytes.data(), 1, bytes.size(), f.get());
    MANTISSA_CHECK(wrote == bytes.size() && std::fclose(f.release()) == 0, kWhere,
                   "'{}': write failed: {}", path, std::strerror(errno));
  }
}

}  // namespace mantissa::data
