#include "mantissa/core/allocator.h"

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "block_cache.h"
#include "mantissa/core/allocator_cache.h"
#include "mantissa/core/error.h"

namespace mantissa {
namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_count{0};
std::atomic<int64_t> g_held_blocks{0};  // block bytes held by tensors (memory_reserved)
constexpr int64_t kNoLimit = -1;
std::atomic<int64_t> g_limit{kNoLimit};  // set_memory_limit's budget plus its exempt bytes
std::atomic<int64_t> g_exempt{0};

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

// Small blocks (a scalar, a bias, a tiny op's output) come from malloc, over-allocated by one
// alignment and aligned by hand, with the distance back to malloc's pointer in the byte before
// the block. glibc's aligned_alloc bypasses its per-thread cache, so each small tensor cost
// ~250 instructions of memalign, consolidation and free, a twentieth of a recorded add
// (docs/performance.md, "Eager ops"); malloc and free of these sizes hit that cache.
constexpr size_t kSmallBlockMaxBytes = 512;

void* allocate_small(size_t block) {
  auto* raw = static_cast<unsigned char*>(std::malloc(block + kAllocAlignment));
  if (raw == nullptr) return nullptr;
  // At least one byte past raw, so the distance fits in the byte before the block.
  const auto addr = reinterpret_cast<uintptr_t>(raw) + 1;
  unsigned char* p = raw + 1 + ((kAllocAlignment - addr % kAllocAlignment) % kAllocAlignment);
  p[-1] = static_cast<unsigned char>(p - raw);  // 1..kAllocAlignment
  return p;
}

void free_small(void* ptr) {
  auto* p = static_cast<unsigned char*>(ptr);
  std::free(p - p[-1]);
}

// Blocks of 4 MiB and more start on a 2 MiB boundary, and their whole 2 MiB pages are advised
// as transparent huge pages: a streaming pass over the tensor is not held up where the hardware
// prefetchers stop, at each 4 KiB page (bench/results/2026-11-30-1710-mx-rows-round6.md; a
// memcpy of 32 MiB at one thread goes from about 22 to 31 GB/s here). A block's tail short of a
// whole 2 MiB page keeps small pages, so no resident byte is added. MANTISSA_HUGE_PAGES=0 turns
// it off; the kernel's transparent_hugepage setting still rules.
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kHugePageMinBytes = size_t{4} << 20;

bool huge_pages_wanted() {
  static const bool wanted = [] {
    const char* env = std::getenv("MANTISSA_HUGE_PAGES");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return wanted;
}

void* allocate_large(size_t block) {
  if (block < kHugePageMinBytes || !huge_pages_wanted())
    return std::aligned_alloc(kAllocAlignment, block);
  void* p = std::aligned_alloc(kHugePageBytes, block);
  // Advice only: where the kernel declines, the block works on small pages.
  if (p != nullptr) ::madvise(p, block / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  return p;
}

void* allocate_block(size_t block) {
  return block <= kSmallBlockMaxBytes ? allocate_small(block) : allocate_large(block);
}

void free_block(void* p, size_t block) {
  if (block <= kSmallBlockMaxBytes)
    free_small(p);
  else
    std::free(p);
}
}  // namespace

void* allocate_bytes(size_t nbytes) {
  const int64_t n = static_cast<int64_t>(nbytes);
  const int64_t limit = g_limit.load(std::memory_order_relaxed);
  // Counted first, so two threads cannot both squeeze under the budget; undone on refusal.
  const int64_t held = g_current.fetch_add(n);
  if (limit != kNoLimit && held + n > limit) {
    g_current.fetch_sub(n);
    const int64_t exempt = g_exempt.load();
    throw OutOfMemoryError(fmt::format(
        "[allocator] out of memory: allocating {} would bring the memory held by tensors to {}, "
        "above the memory budget of {} (set_memory_limit / --memory-limit){}; {} of the budget "
        "are in use. Use a smaller batch (`mantissa plan` finds the largest that fits) or a "
        "larger budget",
        format_bytes(n), format_bytes(held + n - exempt), format_bytes(limit - exempt),
        exempt > 0 ? fmt::format(", not counting {} held before it was set", format_bytes(exempt))
                   : std::string(),
        format_bytes(held - exempt)));
  }
  const size_t block = block_size(nbytes);
  void* p = nullptr;
  if (nbytes >= kCacheMinBytes) p = detail::block_cache().take(block);
  if (p == nullptr) p = allocate_block(block);
  if (p == nullptr) {
    // Cached blocks of other sizes may be what stands between us and success.
    detail::block_cache().release_all();
    p = allocate_block(block);
  }
  if (p == nullptr) {
    g_current.fetch_sub(n);
    throw OutOfMemoryError(
        fmt::format("[allocator] out of memory allocating {} bytes ({} bytes currently held by "
                    "tensors)",
                    nbytes, held));
  }
  // Counted at the requested size, so a 1M-element bf16 tensor reports exactly 2 MB.
  raise_peak(held + n);
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
  free_block(ptr, block);
}

int64_t memory_allocated() { return g_current.load(); }

void set_memory_limit(std::optional<MemoryLimit> limit) {
  if (!limit) {
    g_limit.store(kNoLimit);
    g_exempt.store(0);
    return;
  }
  MANTISSA_CHECK(limit->bytes >= 0 && limit->exempt_bytes >= 0, "set_memory_limit",
                 "the budget and the exempt bytes must be >= 0, got {} and {}", limit->bytes,
                 limit->exempt_bytes);
  g_exempt.store(limit->exempt_bytes);
  g_limit.store(limit->bytes + limit->exempt_bytes);
}

std::optional<MemoryLimit> memory_limit() {
  const int64_t l = g_limit.load();
  if (l == kNoLimit) return std::nullopt;
  const int64_t exempt = g_exempt.load();
  return MemoryLimit{l - exempt, exempt};
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1024 && bytes > -1024) return fmt::format("{} B", bytes);
  if (std::abs(b) < 1024.0 * 1024) return fmt::format("{:.2f} KiB", b / 1024);
  if (std::abs(b) < 1024.0 * 1024 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
}
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
