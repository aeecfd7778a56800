#pragma once
// Size-bucketed free lists for large blocks; the caching half of the counting allocator
// (allocator.cpp). Thread-safe; one process-wide instance.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace mantissa::detail {

// The block size a request of `nbytes` (>= kCacheMinBytes) is served with: rounded up to a
// sixteenth of its power of two (at most 6.25% slack), so requests of nearly the same size
// share blocks while the waste stays small.
size_t cache_size_class(size_t nbytes);

class BlockCache {
 public:
  // A cached block of exactly `block_bytes`, or nullptr.
  void* take(size_t block_bytes);
  // Keeps the block if it fits under the limit; false means the caller frees it.
  bool put(void* p, size_t block_bytes);
  // Frees every cached block.
  void release_all();
  int64_t cached_bytes() const;
  int64_t limit() const;
  void set_limit(int64_t bytes);

 private:
  void release_locked();
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  int64_t cached_ = 0;
  int64_t limit_ = -1;  // -1: not read from the environment yet
};

BlockCache& block_cache();

}  // namespace mantissa::detail
