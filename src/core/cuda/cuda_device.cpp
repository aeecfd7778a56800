// The CUDA backend's device queries, streams and error reporting (mantissa/core/cuda.h). Without
// the backend the same functions say so: nothing here needs a GPU to compile or to answer.
#include "mantissa/core/cuda.h"

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/core/allocator.h"
#include "mantissa/core/device.h"
#include "mantissa/core/error.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#endif

namespace mantissa {

Device parse_device(std::string_view text) {
  if (text == "cpu") return kCPU;
  if (text == "cuda" || text == "gpu") return cuda_device(0);
  if (text.substr(0, 5) == "cuda:" && text.size() > 5) {
    int index = 0;
    bool digits = text.size() - 5 <= 4;
    for (char c : text.substr(5)) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) index = index * 10 + (c - '0');
    }
    if (digits) return cuda_device(index);
  }
  throw Error(
      fmt::format("[device] unknown device '{}': use cpu, cuda, cuda:N or gpu", std::string(text)));
}

namespace cuda {

#if MANTISSA_HAS_CUDA
namespace {
struct Probe {
  int count = 0;
  std::string reason;
};
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    const cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      r.count = 0;
      r.reason = err == cudaErrorNoDevice
                     ? std::string("no CUDA GPU is visible")
                     : fmt::format("the CUDA driver cannot be used ({})", cudaGetErrorString(err));
      (void)cudaGetLastError();  // clear the sticky error for later calls
    } else if (r.count == 0) {
      r.reason = "no CUDA GPU is visible";
    }
    return r;
  }();
  return p;
}
}  // namespace

bool is_built() { return true; }
bool is_available() { return probe().count > 0; }
std::string unavailable_reason() { return probe().reason; }
int device_count() { return probe().count; }

DeviceProperties get_device_properties(int index) {
  detail::require_device(cuda_device(index), "cuda::get_device_properties");
  // Asked once per device: cudaGetDeviceProperties takes tens of microseconds, and the FP8
  // products and autocast ask for the compute capability on every call.
  static std::mutex mu;
  static std::vector<std::optional<DeviceProperties>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() <= static_cast<size_t>(index)) cache.resize(static_cast<size_t>(index) + 1);
  std::optional<DeviceProperties>& cached = cache[static_cast<size_t>(index)];
  if (!cached) {
    cudaDeviceProp prop{};
    MANTISSA_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    cached = DeviceProperties{prop.name, prop.major, prop.minor,
                              static_cast<int64_t>(prop.totalGlobalMem), prop.multiProcessorCount};
  }
  return *cached;
}

void synchronize(int index) {
  detail::require_device(cuda_device(index), "cuda::synchronize");
  detail::DeviceGuard guard(cuda_device(index));
  detail::refuse_during_capture("cuda::synchronize (a wait for the GPU)");
  MANTISSA_CUDA_CHECK(cudaStreamSynchronize(detail::current_stream()));
}

namespace detail {

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaErrorMemoryAllocation)
    throw OutOfMemoryError(fmt::format("[cuda] out of GPU memory in {} ({}:{})", what, file, line));
  throw Error(
      fmt::format("[cuda] {} failed: {} ({}:{})", what, cudaGetErrorString(err), file, line));
}

void check_kernel_launch(const char* kernel_name) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(fmt::format("[cuda] kernel {} could not be launched: {}", kernel_name,
                            cudaGetErrorString(err)));
}

cudaStream_t current_stream() {
  static std::mutex mu;
  static std::vector<cudaStream_t> streams;
  int dev = 0;
  MANTISSA_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (streams.size() <= static_cast<size_t>(dev)) streams.resize(dev + 1, nullptr);
  if (streams[dev] == nullptr)
    MANTISSA_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[dev], cudaStreamNonBlocking));
  return streams[dev];
}

DeviceGuard::DeviceGuard(const Device& device) {
  int current = 0;
  MANTISSA_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device.index) {
    previous_ = current;
    MANTISSA_CUDA_CHECK(cudaSetDevice(device.index));
  }
}
DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

void require_device(const Device& device, const char* who) {
  MANTISSA_CHECK(device.is_cuda(), who, "device {} is not a CUDA device", device.str());
  MANTISSA_CHECK(is_available(), who, "{} was asked for, but {}", device.str(),
                 unavailable_reason());
  MANTISSA_CHECK(device.index >= 0 && device.index < device_count(), who,
                 "{} was asked for, but this machine has {} GPU{} (cuda:0{})", device.str(),
                 device_count(), device_count() == 1 ? "" : "s",
                 device_count() > 1 ? fmt::format(" to cuda:{}", device_count() - 1) : "");
}

}  // namespace detail

#else  // built without the CUDA backend

bool is_built() { return false; }
bool is_available() { return false; }
std::string unavailable_reason() {
  return "mantissa was built without the CUDA backend (configure with -DMANTISSA_CUDA=ON on a "
         "machine with the CUDA toolkit; docs/cuda.md)";
}
int device_count() { return 0; }
DeviceProperties get_device_properties(int) {
  throw Error("[cuda] get_device_properties: " + unavailable_reason());
}
void synchronize(int) {}
int64_t memory_allocated(int) { return 0; }
int64_t max_memory_allocated(int) { return 0; }
int64_t memory_reserved(int) { return 0; }
int64_t max_memory_reserved(int) { return 0; }
void reset_peak_memory_stats(int) {}
void empty_cache() {}

#endif

bool is_bf16_supported(int index) {
  return is_available() && get_device_properties(index).major >= 8;
}
bool is_fp8_supported(int index) {
  if (!is_available()) return false;
  const DeviceProperties p = get_device_properties(index);
  return p.major > 8 || (p.major == 8 && p.minor >= 9);
}

}  // namespace cuda
}  // namespace mantissa
