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

  // The fsdp strategy's parameter sharding (docs/distributed.md): release() frees the bytes
  // and keeps the size, so every tensor and saved view of this storage stays valid while its
  // values live elsewhere (the ranks' shards); restore() allocates them again, uninitialised,
  // for the all-gather to fill. Neither changes the version: the values that come back are the
  // ones that left, so autograd's saved-tensor checks still hold; whoever changes them in
  // between bumps it. CPU only.
  void release();
  void restore();
  bool released() const { return data_ == nullptr && nbytes_ > 0; }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace mantissa
