#pragma once
// Storage: one counted allocation shared by a tensor and all of its views.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "mantissa/core/allocator.h"

namespace mantissa {

class Storage {
 public:
  explicit Storage(size_t nbytes)
      : data_(nbytes ? allocate_bytes(nbytes) : nullptr), nbytes_(nbytes) {}
  ~Storage() { free_bytes(data_, nbytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

  // Bumped by every in-place write through the library (copy_/fill_/zero_, optimizer steps),
  // so caches of values derived from this storage (autocast's weight casts) can tell when
  // they are stale. Writes through raw data pointers must call bump_version() themselves.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_;
  size_t nbytes_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace mantissa
