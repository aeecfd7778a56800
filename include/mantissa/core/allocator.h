#pragma once
// Counting CPU allocator: every tensor byte goes through here, so memory_allocated() and
// max_memory_allocated() report what tensors really hold (like torch.cuda's counters).
#include <cstddef>
#include <cstdint>

namespace mantissa {

inline constexpr size_t kAllocAlignment = 64;  // a cache line and an AVX-512 register

void* allocate_bytes(size_t nbytes);  // 64-byte aligned; throws Error when out of memory
void free_bytes(void* ptr, size_t nbytes);

int64_t memory_allocated();      // bytes currently held by tensors
int64_t max_memory_allocated();  // high-water mark since start or the last reset_peak
void reset_peak_memory_stats();  // peak := current
int64_t allocation_count();      // number of live allocations (leak checks in tests)

}  // namespace mantissa
