#pragma once
// Counting CPU allocator: every tensor byte goes through here, so memory_allocated() and
// max_memory_allocated() report what tensors really hold (like torch.cuda's counters).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "mantissa/core/error.h"

namespace mantissa {

inline constexpr size_t kAllocAlignment = 64;  // a cache line and an AVX-512 register

void* allocate_bytes(size_t nbytes);  // 64-byte aligned; throws Error when out of memory
void free_bytes(void* ptr, size_t nbytes);

int64_t memory_allocated();      // bytes currently held by tensors
int64_t max_memory_allocated();  // high-water mark since start or the last reset_peak
void reset_peak_memory_stats();  // peak := current
int64_t allocation_count();      // number of live allocations (leak checks in tests)

// What allocate_bytes throws when the memory budget (set_memory_limit) would be exceeded.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// A budget for memory_allocated(): an allocation that would take the bytes held by tensors
// above exempt_bytes + bytes throws OutOfMemoryError naming the budget, the request and what
// is held, as a device with that much memory would fail (`mantissa train --memory-limit`,
// docs/memory_planner.md). exempt_bytes are held outside the budget (the CLI exempts the data
// sets it loaded before training). nullopt (the default): no budget.
struct MemoryLimit {
  int64_t bytes = 0;
  int64_t exempt_bytes = 0;
};
void set_memory_limit(std::optional<MemoryLimit> limit);
std::optional<MemoryLimit> memory_limit();

// Sets a budget for a scope and restores the previous one when it ends.
class MemoryLimitGuard {
 public:
  explicit MemoryLimitGuard(std::optional<MemoryLimit> limit) : previous_(memory_limit()) {
    set_memory_limit(limit);
  }
  ~MemoryLimitGuard() { set_memory_limit(previous_); }
  MemoryLimitGuard(const MemoryLimitGuard&) = delete;
  MemoryLimitGuard& operator=(const MemoryLimitGuard&) = delete;

 private:
  std::optional<MemoryLimit> previous_;
};

// "1.50 MiB", "8.00 GiB", "512 B": byte counts in messages and tables.
std::string format_bytes(int64_t bytes);

}  // namespace mantissa
