#pragma once
// The caching half of the counting allocator (allocator.h). Large blocks (>= kCacheMinBytes)
// are kept after free and handed to the next request of the same size class, like
// torch.cuda's caching allocator: a training step allocates the same activation shapes every
// step, and fresh pages from the OS cost a page fault and a zeroing per 4 KiB.
// Cached bytes are not counted by memory_allocated(); memory_reserved() counts them.
#include <cstddef>
#include <cstdint>
#include <optional>

namespace mantissa {

inline constexpr size_t kCacheMinBytes = size_t{64} << 10;

// Bytes taken from the OS and not yet given back: blocks held by tensors (at their size-class
// size) plus the free blocks kept in the cache.
int64_t memory_reserved();
// Gives every cached free block back to the OS (torch.cuda.empty_cache).
void empty_cache();
// Most bytes the cache keeps; 0 disables caching (and empties the cache). The default is
// min(1 GiB, a quarter of physical memory), or MANTISSA_ALLOCATOR_CACHE=<MiB> (0 disables),
// read on first use.
int64_t allocator_cache_limit();
void set_allocator_cache_limit(int64_t bytes);
// Parses a MANTISSA_ALLOCATOR_CACHE value into a byte limit; nullopt (with a message on
// stderr) when it is not a non-negative integer. Exposed for tests.
std::optional<int64_t> parse_allocator_cache_env(const char* value);

}  // namespace mantissa
