#pragma once
// Storage: one counted allocation shared by a tensor and all of its views, on the CPU (the
// counting allocator, mantissa/core/allocator.h) or on a GPU (the CUDA caching allocator,
// mantissa/core/cuda.h).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "mantissa/core/allocator.h"
#include "mantissa/core/device.h"

namespace mantissa {

class Storage {
 public:
  explicit Storage(size_t nbytes)
      : data_(nbytes ? allocate_bytes(nbytes) : nullptr), nbytes_(nbytes) {}
  // On `device`; a CUDA device that is not usable is an Error saying why.
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // The address on the storage's device: host code may dereference it only for the CPU.
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Bumped by every in-place write through the library (copy_/fill_/zero_, optimizer steps),
  // so caches of values derived from this storage (autocast's weight casts) can tell when
  // they are stale. Writes through raw data pointers must call bump_version() themselves.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace mantissa
