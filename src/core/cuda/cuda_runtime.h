#pragma once
// The CUDA backend's host-side runtime (internal): error checks, the current device and its
// stream, the caching allocator. Only code under `#if MANTISSA_HAS_CUDA` includes this.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "core/cuda/launch.h"
#include "mantissa/core/device.h"

namespace mantissa::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);

#define MANTISSA_CUDA_CHECK(expr)                                                                \
  do {                                                                                           \
    const cudaError_t mantissa_cuda_err_ = (expr);                                               \
    if (mantissa_cuda_err_ != cudaSuccess)                                                       \
      ::mantissa::cuda::detail::throw_cuda_error(mantissa_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// Makes `device` current for the scope (kernels, allocations and cuBLAS calls then go to it).
class DeviceGuard {
 public:
  explicit DeviceGuard(const Device& device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Throws a clear Error when `device` is not a usable GPU (no backend, no GPU, bad index).
void require_device(const Device& device, const char* who);

// The caching allocator (cuda_allocator.cpp): blocks of the rounded size are kept after free
// and reused by the next request of that size on the same device.
void* allocate(size_t nbytes, int device);
void release(void* ptr, size_t nbytes, int device);

// A CUDA graph's private memory pool (cuda_allocator.cpp; used by cuda_graph.cpp). From
// begin_graph_pool to end_graph_pool every allocation on `device` comes from the new pool;
// its blocks serve only that pool until retire_graph_pool (the graph is destroyed), after which
// they return to the shared cache as they are released.
struct GraphPool;
std::shared_ptr<GraphPool> begin_graph_pool(int device);
void end_graph_pool(int device);
void retire_graph_pool(const std::shared_ptr<GraphPool>& pool);

// True while the current device's stream is being captured into a CUDA graph (cuda_graph.cpp).
bool stream_is_capturing();
// Throws a clear Error naming `what` when the current stream is being captured: for the host
// reads and copies a graph cannot replay (a copy to or from host memory, a synchronisation).
void refuse_during_capture(const char* what);

}  // namespace mantissa::cuda::detail
