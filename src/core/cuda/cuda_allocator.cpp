// The CUDA caching allocator. cudaMalloc and cudaFree synchronise the GPU and cost tens of
// microseconds, so a freed block is kept, by rounded size, and handed to the next request of
// that size on the same device; every kernel runs on the device's one stream, so a block reused
// there is never touched by two kernels at once. empty_cache() gives the cached blocks back.
// The counters are those of torch.cuda (memory_allocated / memory_reserved and their peaks).
// While a CUDA graph is being captured (core/cuda/cuda_graph.cpp), requests on that device are
// served from the graph's private pool instead: its replays write those blocks again, so no
// block of the pool may go to other work while the graph lives, not even one freed during the
// capture. A released pool block returns to its pool; once the graph is gone (the pool retired)
// the pool's blocks go back to the shared cache.
#if MANTISSA_HAS_CUDA

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "mantissa/core/allocator.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"

namespace mantissa::cuda {
namespace {

constexpr size_t kSmallRound = 512;      // PyTorch's granularity too
constexpr size_t kLargeRound = 2 << 20;  // 2 MiB for blocks of 1 MiB and more
constexpr size_t kLargeFrom = 1 << 20;

size_t rounded(size_t n) {
  const size_t r = n < kLargeFrom ? kSmallRound : kLargeRound;
  return (n + r - 1) / r * r;
}

using FreeBlocks = std::map<size_t, std::vector<void*>>;  // by rounded size

struct DeviceCache {
  FreeBlocks free_blocks;
  int64_t allocated = 0, peak_allocated = 0, reserved = 0, peak_reserved = 0;
  std::shared_ptr<detail::GraphPool> capturing;  // the pool of a capture under way, else null
};

// Leaked on purpose: tensors held by statics are freed after static destructors have run.
std::mutex& g_mu = *new std::mutex;
std::vector<DeviceCache>& caches() {
  static auto* c = new std::vector<DeviceCache>;
  return *c;
}
DeviceCache& cache_for(int device) {
  auto& c = caches();
  if (c.size() <= static_cast<size_t>(device)) c.resize(device + 1);
  return c[device];
}

// Returns every cached block of the current device to the driver (g_mu held).
void free_cached(DeviceCache& cache) {
  for (auto& [size, blocks] : cache.free_blocks) {
    for (void* p : blocks) {
      (void)cudaFree(p);
      cache.reserved -= static_cast<int64_t>(size);
    }
  }
  cache.free_blocks.clear();
}

}  // namespace

namespace detail {
struct GraphPool {
  int device = 0;
  FreeBlocks free_blocks;
  bool retired = false;  // its graph is gone: released blocks go to the shared cache
};
}  // namespace detail

namespace {
// Every block taken for a graph pool, and its pool (g_mu held). Empty unless a graph was
// captured, so release() of ordinary blocks pays one emptiness test.
std::unordered_map<void*, std::shared_ptr<detail::GraphPool>>& pool_of_block() {
  static auto* m = new std::unordered_map<void*, std::shared_ptr<detail::GraphPool>>;
  return *m;
}

void* take_free(FreeBlocks& blocks, size_t size) {
  auto it = blocks.find(size);
  if (it == blocks.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  return p;
}
}  // namespace

namespace detail {

std::shared_ptr<GraphPool> begin_graph_pool(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceCache& cache = cache_for(device);
  MANTISSA_CHECK(cache.capturing == nullptr, "CUDAGraph",
                 "cuda:{} is already capturing a graph; one capture at a time per device", device);
  cache.capturing = std::make_shared<GraphPool>();
  cache.capturing->device = device;
  return cache.capturing;
}

void end_graph_pool(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  cache_for(device).capturing.reset();
}

void retire_graph_pool(const std::shared_ptr<GraphPool>& pool) {
  if (pool == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceCache& cache = cache_for(pool->device);
  if (cache.capturing == pool) cache.capturing.reset();
  for (auto& [size, blocks] : pool->free_blocks) {
    for (void* p : blocks) {
      pool_of_block().erase(p);
      cache.free_blocks[size].push_back(p);
    }
  }
  pool->free_blocks.clear();
  pool->retired = true;
}

void* allocate(size_t nbytes, int device) {
  const size_t size = rounded(nbytes);
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceCache& cache = cache_for(device);
  GraphPool* pool = cache.capturing.get();
  void* p = take_free(pool ? pool->free_blocks : cache.free_blocks, size);
  if (p == nullptr) {
    DeviceGuard guard(cuda_device(device));
    cudaError_t err = cudaMalloc(&p, size);
    // Not during a capture: cudaFree would wait for the device, which a capture forbids.
    if (err == cudaErrorMemoryAllocation && pool == nullptr) {
      (void)cudaGetLastError();
      free_cached(cache);  // what the cache holds may be enough once merged by the driver
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      throw OutOfMemoryError(fmt::format(
          "[cuda] out of memory: tried to allocate {} on cuda:{} ({} total, {} free, {} held by "
          "tensors, {} reserved by mantissa). Use a smaller batch or a lower precision",
          format_bytes(static_cast<int64_t>(size)), device, format_bytes(total_b),
          format_bytes(free_b), format_bytes(cache.allocated), format_bytes(cache.reserved)));
    }
    cache.reserved += static_cast<int64_t>(size);
    cache.peak_reserved = std::max(cache.peak_reserved, cache.reserved);
    if (pool != nullptr) pool_of_block().emplace(p, cache.capturing);
  }
  cache.allocated += static_cast<int64_t>(size);
  cache.peak_allocated = std::max(cache.peak_allocated, cache.allocated);
  return p;
}

void release(void* ptr, size_t nbytes, int device) {
  if (ptr == nullptr) return;
  const size_t size = rounded(nbytes);
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceCache& cache = cache_for(device);
  cache.allocated -= static_cast<int64_t>(size);
  if (!pool_of_block().empty()) {
    const auto it = pool_of_block().find(ptr);
    if (it != pool_of_block().end()) {
      if (!it->second->retired) {
        it->second->free_blocks[size].push_back(ptr);
        return;
      }
      pool_of_block().erase(it);
    }
  }
  cache.free_blocks[size].push_back(ptr);
}

}  // namespace detail

namespace {
template <typename F>
int64_t read(int index, F field) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (index < 0 || static_cast<size_t>(index) >= caches().size()) return 0;
  return field(caches()[index]);
}
}  // namespace

int64_t memory_allocated(int index) {
  return read(index, [](const DeviceCache& c) { return c.allocated; });
}
int64_t max_memory_allocated(int index) {
  return read(index, [](const DeviceCache& c) { return c.peak_allocated; });
}
int64_t memory_reserved(int index) {
  return read(index, [](const DeviceCache& c) { return c.reserved; });
}
int64_t max_memory_reserved(int index) {
  return read(index, [](const DeviceCache& c) { return c.peak_reserved; });
}
void reset_peak_memory_stats(int index) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (index < 0 || static_cast<size_t>(index) >= caches().size()) return;
  DeviceCache& c = caches()[index];
  c.peak_allocated = c.allocated;
  c.peak_reserved = c.reserved;
}
void empty_cache() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t d = 0; d < caches().size(); ++d) {
    // Not while a capture is under way there: cudaFree would wait for the device.
    if (caches()[d].free_blocks.empty() || caches()[d].capturing) continue;
    detail::DeviceGuard guard(cuda_device(static_cast<int>(d)));
    // Queued kernels may still use a block about to be freed: cudaFree waits for the device.
    free_cached(caches()[d]);
  }
}

}  // namespace mantissa::cuda

#endif  // MANTISSA_HAS_CUDA
