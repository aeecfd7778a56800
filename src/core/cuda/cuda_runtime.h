#pragma once
// The CUDA backend's host-side runtime (internal): error checks, the current device and its
// stream, the caching allocator. Only code under `#if MANTISSA_HAS_CUDA` includes this.
#include <cuda_runtime_api.h>

#include <cstddef>

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

}  // namespace mantissa::cuda::detail
