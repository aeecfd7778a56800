// safetensors writer: builds the header by hand (so the byte layout is fixed and documented),
// then streams header and tensor bytes into a temporary file that is fsync'ed and renamed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/io/json_dump.h"
#include "mantissa/io/output_path.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/io/stale_temporaries.h"

namespace mantissa::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; a big-endian host needs byte swaps here");

constexpr const char* kWhere = "save_safetensors";

// Compact JSON string (escapes quotes, backslashes and control characters).
std::string json_string(const std::string& s) { return dump_json(nlohmann::json(s)); }

// The header in a fixed order: "__metadata__" first (only when non-empty), then the tensors in
// the caller's order with their data laid out back to back in that same order. The result is
// padded with spaces to a multiple of 8 so the buffer that follows is 8-byte aligned.
std::string build_header(const NamedTensors& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::string h = "{";
  bool first = true;
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first_kv = true;
    for (const auto& [k, v] : metadata) {
      if (!first_kv) h += ',';
      first_kv = false;
      h += json_string(k) + ':' + json_string(v);
    }
    h += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!first) h += ',';
    first = false;
    h += json_string(name) + ":{\"dtype\":\"" + std::string(safetensors_dtype_name(t.dtype())) +
         "\",\"shape\":[";
    for (size_t i = 0; i < t.shape().size(); ++i) {
      if (i) h += ',';
      h += std::to_string(t.shape()[i]);
    }
    const uint64_t end = offset + t.nbytes();
    h += "],\"data_offsets\":[" + std::to_string(offset) + ',' + std::to_string(end) + "]}";
    offset = end;
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

void check_inputs(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata) {
  MANTISSA_CHECK(!path.empty(), kWhere, "empty path");
  // /dev/null, a FIFO: the rename below would replace the node itself.
  check_replaceable_by_file(path, "the safetensors file");
  std::set<std::string> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    MANTISSA_CHECK(!name.empty(), kWhere, "'{}': tensor #{} has an empty name", path, i);
    MANTISSA_CHECK(name != "__metadata__", kWhere,
                   "'{}': '__metadata__' is reserved and cannot name a tensor", path);
    MANTISSA_CHECK(seen.insert(name).second, kWhere, "'{}': duplicate tensor name '{}'", path,
                   name);
    MANTISSA_CHECK(t.defined(), kWhere, "'{}': tensor '{}' is undefined", path, name);
    MANTISSA_CHECK(t.dim() <= static_cast<int64_t>(kSafetensorsMaxRank), kWhere,
                   "'{}': tensor '{}' has rank {}, above the limit of {} dimensions "
                   "(kSafetensorsMaxRank) that load_safetensors accepts; reshape it to fewer "
                   "dimensions before saving",
                   path, name, t.dim(), kSafetensorsMaxRank);
  }
  (void)metadata;  // std::map already rules out duplicate keys; any string is a valid value
}

// Row-major bytes of a strided view, copied element by element as raw bytes: a dtype-aware
// copy could quiet signalling NaNs on the way through a float register, and checkpoints must be
// bit-exact.
void gather_bytes(const Tensor& t, std::vector<uint8_t>& out) {
  const size_t item = t.element_size();
  out.resize(t.nbytes());
  const auto* base = static_cast<const uint8_t*>(t.data_ptr());
  const int64_t nd = t.dim();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += idx[d] * t.strides()[d];
    std::memcpy(out.data() + static_cast<size_t>(i) * item, base + off * static_cast<int64_t>(item),
                item);
    for (int64_t d = nd - 1; d >= 0; --d) {  // odometer increment, last dim fastest
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
}

// Closes the descriptor and removes the temporary file unless commit() was reached.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)), being_written_(path_) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(kWhere, "cannot create temporary file '{}': {}", path_, std::strerror(errno));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail(kWhere, "writing '{}' failed: {}", path_, std::strerror(errno));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

  // fsync + close + rename: after this the target holds the complete new file.
  void commit(const std::string& target) {
    if (::fsync(fd_) != 0) fail(kWhere, "fsync of '{}' failed: {}", path_, std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(kWhere, "closing '{}' failed: {}", path_, std::strerror(errno));
    if (::rename(path_.c_str(), target.c_str()) != 0)
      fail(kWhere, "renaming '{}' to '{}' failed: {}", path_, target, std::strerror(errno));
    committed_ = true;
    // Persist the directory entry too, so a crash right after leaves the new file in place.
    std::string dir = std::filesystem::path(target).parent_path().string();
    if (dir.empty()) dir = ".";
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::string path_;
  TemporaryBeingWritten being_written_;  // removed by a signal that ends the process
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  check_inputs(path, tensors, metadata);
  const std::string header = build_header(tensors, metadata);
  TempFile tmp(path + ".tmp." + std::to_string(::getpid()));
  uint8_t len[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  tmp.write(len, sizeof(len));
  tmp.write(header.data(), header.size());
  std::vector<uint8_t> staging;
  for (const auto& [name, stored] : tensors) {
    if (stored.numel() == 0) continue;
    // A GPU tensor is written from a host copy (its bits unchanged), as safetensors.torch does.
    const Tensor t = stored.is_cuda() ? stored.cpu() : stored;
    if (t.is_contiguous()) {
      tmp.write(t.data_ptr(), t.nbytes());
    } else {
      gather_bytes(t, staging);
      tmp.write(staging.data(), staging.size());
    }
  }
  tmp.commit(path);
}

// The Rust crate's Dtype enum order (ascending); files list tensors by descending rank.
static int python_dtype_rank(DType d) {
  switch (d.id()) {
    case DType::Id::b8:
      return 0;
    case DType::Id::u8:
      return 4;
    case DType::Id::i8:
      return 5;
    case DType::Id::f8_e5m2:
      return 6;
    case DType::Id::f8_e4m3:
      return 7;
    case DType::Id::f16:
      return 11;
    case DType::Id::bf16:
      return 12;
    case DType::Id::i32:
      return 13;
    case DType::Id::f32:
      return 15;
    case DType::Id::f64:
      return 17;
    case DType::Id::i64:
      return 18;
    case DType::Id::c64:
    case DType::Id::c128:
      return 0;  // unreachable: complex tensors have no safetensors name
  }
  return 0;
}

void sort_like_python_safetensors(NamedTensors& tensors) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
    const int ra = python_dtype_rank(a.second.dtype()), rb = python_dtype_rank(b.second.dtype());
    if (ra != rb) return ra > rb;
    return a.first < b.first;
  });
}

}  // namespace mantissa::io
