#include "mantissa/core/allocator.h"

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "block_cache.h"
#include "mantissa/core/allocator_cache.h"
#include "mantissa/core/error.h"

namespace mantissa {
namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_count{0};
std::atomic<int64_t> g_held_blocks{0};  // block bytes held by tensors (memory_reserved)

void raise_peak(int64_t now) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// The size of the block that serves `nbytes`: a size class for cacheable blocks, else the
// request rounded to the alignment (aligned_alloc needs a multiple of it).
size_t block_size(size_t nbytes) {
  if (nbytes >= kCacheMinBytes) return detail::cache_size_class(nbytes);
  return (nbytes + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
}
}  // namespace

void* allocate_bytes(size_t nbytes) {
  const size_t block = block_size(nbytes);
  void* p = nullptr;
  if (nbytes >= kCacheMinBytes) p = detail::block_cache().take(block);
  if (p == nullptr) p = std::aligned_alloc(kAllocAlignment, block);
  if (p == nullptr) {
    // Cached blocks of other sizes may be what stands between us and success.
    detail::block_cache().release_all();
    p = std::aligned_alloc(kAllocAlignment, block);
  }
  if (p == nullptr) {
    fail("allocator", "out of memory allocating {} bytes ({} bytes currently held by tensors)",
         nbytes, g_current.load());
  }
  // Counted at the requested size, so a 1M-element bf16 tensor reports exactly 2 MB.
  raise_peak(g_current.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes));
  g_count.fetch_add(1);
  g_held_blocks.fetch_add(static_cast<int64_t>(block));
  return p;
}

void free_bytes(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t block = block_size(nbytes);
  g_current.fetch_sub(static_cast<int64_t>(nbytes));
  g_count.fetch_sub(1);
  g_held_blocks.fetch_sub(static_cast<int64_t>(block));
  if (nbytes >= kCacheMinBytes && detail::block_cache().put(ptr, block)) return;
  std::free(ptr);
}

int64_t memory_allocated() { return g_current.load(); }
int64_t max_memory_allocated() { return g_peak.load(); }
void reset_peak_memory_stats() { g_peak.store(g_current.load()); }
int64_t allocation_count() { return g_count.load(); }

int64_t memory_reserved() { return g_held_blocks.load() + detail::block_cache().cached_bytes(); }
void empty_cache() { detail::block_cache().release_all(); }
int64_t allocator_cache_limit() { return detail::block_cache().limit(); }
void set_allocator_cache_limit(int64_t bytes) { detail::block_cache().set_limit(bytes); }

std::optional<int64_t> parse_allocator_cache_env(const char* value) {
  int64_t mib = -1;
  const char* end = value + std::strlen(value);
  auto [ptr, ec] = std::from_chars(value, end, mib);
  if (ec != std::errc() || ptr != end || mib < 0 || mib > (int64_t{1} << 40)) {
    std::fprintf(stderr,
                 "mantissa: ignoring MANTISSA_ALLOCATOR_CACHE='%s' (expected MiB as a "
                 "non-negative integer, 0 disables the cache)\n",
                 value);
    return std::nullopt;
  }
  return mib << 20;
}

}  // namespace mantissa
