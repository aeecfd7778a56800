#include "block_cache.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "mantissa/core/allocator_cache.h"

namespace mantissa::detail {
namespace {
constexpr int64_t kDefaultMaxCache = int64_t{1} << 30;

int64_t default_limit() {
  if (const char* env = std::getenv("MANTISSA_ALLOCATOR_CACHE")) {
    if (auto v = parse_allocator_cache_env(env)) return *v;
  }
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return kDefaultMaxCache;
  return std::min<int64_t>(kDefaultMaxCache, static_cast<int64_t>(pages) * page / 4);
}
}  // namespace

size_t cache_size_class(size_t nbytes) {
  const size_t step = std::bit_floor(nbytes) / 16;
  return (nbytes + step - 1) / step * step;
}

void* BlockCache::take(size_t block_bytes) {
  std::lock_guard lock(mu_);
  auto it = free_.find(block_bytes);
  if (it == free_.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  cached_ -= static_cast<int64_t>(block_bytes);
  return p;
}

bool BlockCache::put(void* p, size_t block_bytes) {
  std::lock_guard lock(mu_);
  if (limit_ < 0) limit_ = default_limit();
  if (cached_ + static_cast<int64_t>(block_bytes) > limit_) return false;
  free_[block_bytes].push_back(p);
  cached_ += static_cast<int64_t>(block_bytes);
  return true;
}

void BlockCache::release_locked() {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) std::free(p);
  }
  free_.clear();
  cached_ = 0;
}

void BlockCache::release_all() {
  std::lock_guard lock(mu_);
  release_locked();
}

int64_t BlockCache::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_;
}

int64_t BlockCache::limit() const {
  std::lock_guard lock(mu_);
  return limit_ < 0 ? default_limit() : limit_;
}

void BlockCache::set_limit(int64_t bytes) {
  std::lock_guard lock(mu_);
  limit_ = std::max<int64_t>(bytes, 0);
  // Simplest honest shrink: drop everything and let the cache refill under the new limit.
  if (cached_ > limit_) release_locked();
}

BlockCache& block_cache() {
  // Never destroyed: tensors in other static objects may be freed after this would be.
  static BlockCache* cache = new BlockCache;
  return *cache;
}

}  // namespace mantissa::detail
