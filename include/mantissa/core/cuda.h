#pragma once
// The CUDA backend's host API, as torch.cuda names it: whether a GPU can be used, what it is,
// and the caching allocator's counters. Present in every build: without the backend
// (-DMANTISSA_CUDA=OFF, or no nvcc) is_built() and is_available() are false and the counters
// are zero. docs/cuda.md.
#include <cstdint>
#include <string>

namespace mantissa::cuda {

bool is_built();      // compiled with the CUDA backend
bool is_available();  // built, and a GPU and a driver that can run it are present
// Why is_available() is false ("built without CUDA", "no CUDA driver: ...", "no GPU"); empty
// when it is true.
std::string unavailable_reason();
int device_count();  // 0 when unavailable

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int64_t total_memory = 0;  // bytes
  int multi_processor_count = 0;
};
DeviceProperties get_device_properties(int index = 0);
// bf16 arithmetic needs compute capability 8.0 (Ampere), FP8 matrix products 8.9 (Ada, Hopper).
bool is_bf16_supported(int index = 0);
bool is_fp8_supported(int index = 0);

// Waits for every kernel queued on that GPU (timings, and the caller's host reads).
void synchronize(int index = 0);

// The caching allocator: freed blocks stay reserved for reuse until empty_cache().
int64_t memory_allocated(int index = 0);      // bytes held by tensors
int64_t max_memory_allocated(int index = 0);  // high-water mark since start / the last reset
int64_t memory_reserved(int index = 0);       // bytes taken from the driver (held + cached)
int64_t max_memory_reserved(int index = 0);
void reset_peak_memory_stats(int index = 0);
void empty_cache();  // returns cached, unused blocks to the driver

}  // namespace mantissa::cuda
