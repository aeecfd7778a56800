#include "mantissa/io/mapped_safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "mantissa/core/error.h"
#include "mantissa/core/shape.h"
#include "mantissa/core/untrusted_text.h"

namespace mantissa::io {

namespace {
constexpr const char* kWhere = "safetensors";
}

MappedSafetensors::MappedSafetensors(const std::string& path)
    : path_(path), header_(read_safetensors_header(path)) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MANTISSA_CHECK(fd >= 0, kWhere, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(kWhere, "'{}' is not a regular file", path);
  }
  map_size_ = static_cast<size_t>(st.st_size);
  void* m = map_size_ ? ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  const int map_errno = errno;
  ::close(fd);
  MANTISSA_CHECK(m != MAP_FAILED, kWhere, "cannot map '{}': {}", path, std::strerror(map_errno));
  map_ = m;
  // The header was validated from the same file; its length fixes where the data begins, and
  // the tensors tile the data in order.
  uint64_t header_len = 0;
  if (map_size_ >= 8) std::memcpy(&header_len, map_, 8);  // little-endian hosts only
  size_t pos = 8 + static_cast<size_t>(header_len);
  for (size_t i = 0; i < header_.tensors.size(); ++i) {
    const auto& t = header_.tensors[i];
    index_.emplace(t.name, i);
    offsets_.push_back(pos);
    pos += static_cast<size_t>(numel_of(t.shape)) * t.dtype.itemsize();
  }
  if (pos > map_size_) {
    ::munmap(map_, map_size_);
    map_ = nullptr;
    fail(kWhere, "'{}' changed while it was opened: its tensors end at byte {}, the file has {}",
         path, pos, map_size_);
  }
}

MappedSafetensors::~MappedSafetensors() {
  if (map_) ::munmap(map_, map_size_);
}

const SafetensorsTensorInfo* MappedSafetensors::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

const SafetensorsTensorInfo& MappedSafetensors::at(const std::string& name) const {
  const SafetensorsTensorInfo* t = find(name);
  MANTISSA_CHECK(t != nullptr, kWhere, "'{}' has no tensor {}", path_, quote_untrusted(name));
  return *t;
}

const std::byte* MappedSafetensors::bytes(const std::string& name) const {
  at(name);
  return static_cast<const std::byte*>(map_) + offsets_[index_.at(name)];
}

void MappedSafetensors::release_range(size_t offset, size_t n) const {
  if (n == 0) return;
  // A fault maps the whole page-cache folio around the page it touched (up to 2 MiB), which
  // may reach past the range just read into its neighbours; the window released covers that
  // slack on both sides. Dropping a private read-only file mapping's pages only forgets them:
  // a later read faults them in again from the page cache. Failure costs memory, not
  // correctness, so it is not reported.
  constexpr size_t kFolioSlack = size_t{2} << 20;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t begin = (offset > kFolioSlack ? offset - kFolioSlack : 0) / page * page;
  const size_t end = std::min(map_size_, offset + n + kFolioSlack);
  ::madvise(static_cast<std::byte*>(map_) + begin, end - begin, MADV_DONTNEED);
}

void MappedSafetensors::release(const std::string& name) const {
  const SafetensorsTensorInfo& t = at(name);
  release_range(offsets_[index_.at(name)],
                static_cast<size_t>(numel_of(t.shape)) * t.dtype.itemsize());
}

Tensor MappedSafetensors::read(const std::string& name, std::optional<DType> dtype) const {
  const SafetensorsTensorInfo& t = at(name);
  Tensor out = empty(t.shape, dtype.value_or(t.dtype));
  read_into(name, out);
  return out;
}

void MappedSafetensors::read_into(const std::string& name, Tensor& dst) const {
  const SafetensorsTensorInfo& t = at(name);
  MANTISSA_CHECK(dst.shape() == t.shape, kWhere, "'{}': tensor {} has shape {}, expected {}", path_,
                 quote_untrusted(name), shape_str(t.shape), shape_str(dst.shape()));
  const int64_t n = numel_of(t.shape);
  const size_t item = t.dtype.itemsize();
  const size_t offset = offsets_[index_.at(name)];
  if (!dst.is_contiguous() || dst.is_cuda()) {
    dst.copy_(from_buffer(bytes(name), t.dtype, t.shape));
    release(name);
    return;
  }
  // A chunk at a time, each chunk's file pages released once copied: the mapping adds at most
  // a chunk to the resident memory, and a conversion at most a chunk-sized temporary.
  Tensor flat = dst.view({n});
  const std::byte* src = bytes(name);
  for (int64_t start = 0; start < n; start += kReadChunkElements) {
    const int64_t m = std::min(kReadChunkElements, n - start);
    const std::byte* from = src + static_cast<size_t>(start) * item;
    if (dst.dtype() == t.dtype)
      std::memcpy(static_cast<std::byte*>(flat.data_ptr()) + static_cast<size_t>(start) * item,
                  from, static_cast<size_t>(m) * item);
    else
      flat.narrow(0, start, m).copy_(from_buffer(from, t.dtype, {m}));
    release_range(offset + static_cast<size_t>(start) * item, static_cast<size_t>(m) * item);
  }
}

bool MappedSafetensors::same_bytes(const std::string& a, const std::string& b) const {
  const SafetensorsTensorInfo &ta = at(a), &tb = at(b);
  if (ta.dtype != tb.dtype || ta.shape != tb.shape) return false;
  const size_t n = static_cast<size_t>(numel_of(ta.shape)) * ta.dtype.itemsize();
  const bool same = std::memcmp(bytes(a), bytes(b), n) == 0;
  release(a);
  release(b);
  return same;
}

}  // namespace mantissa::io
