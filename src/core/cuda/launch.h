#pragma once
// What a CUDA kernel file (.cu) needs from the backend's runtime, and nothing else: kept free of
// mantissa's C++ headers so nvcc parses only plain declarations. Included by .cu files only.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mantissa::cuda::detail {

// The stream every kernel of the current device is queued on (one per device, created at the
// first use; non-blocking, so host-side memcpys of other libraries do not serialise with it).
cudaStream_t current_stream();
// Throws mantissa::Error naming the kernel when its launch failed (bad configuration, no
// kernel image for this GPU). Call right after each <<<...>>>.
void check_kernel_launch(const char* kernel_name);

// The caching allocator (cuda_allocator.cpp; also declared in cuda_runtime.h), for a kernel's
// scratch: a block released after the launches that use it is reused only by later work on
// the same stream, so it may be released right away.
void* allocate(size_t nbytes, int device);
void release(void* ptr, size_t nbytes, int device);

// Blocks of 256 threads covering n elements, capped so a grid-stride loop does the rest.
inline unsigned grid_for(int64_t n, int threads = 256) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

}  // namespace mantissa::cuda::detail
