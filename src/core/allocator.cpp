#include "mantissa/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "mantissa/core/error.h"

namespace mantissa {
namespace {
std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_count{0};

void raise_peak(int64_t now) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

void* allocate_bytes(size_t nbytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  const size_t rounded = (nbytes + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
  void* p = std::aligned_alloc(kAllocAlignment, rounded);
  if (p == nullptr) {
    fail("allocator", "out of memory allocating {} bytes ({} bytes currently held by tensors)",
         nbytes, g_current.load());
  }
  // Counted at the requested size, so a 1M-element bf16 tensor reports exactly 2 MB.
  raise_peak(g_current.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes));
  g_count.fetch_add(1);
  return p;
}

void free_bytes(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  g_current.fetch_sub(static_cast<int64_t>(nbytes));
  g_count.fetch_sub(1);
}

int64_t memory_allocated() { return g_current.load(); }
int64_t max_memory_allocated() { return g_peak.load(); }
void reset_peak_memory_stats() { g_peak.store(g_current.load()); }
int64_t allocation_count() { return g_count.load(); }

}  // namespace mantissa
