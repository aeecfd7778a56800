// Storage on a device: the CPU's counting allocator or the CUDA caching allocator.
#include "mantissa/core/storage.h"

#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#endif

namespace mantissa {

Storage::Storage(size_t nbytes, Device device) : data_(nullptr), nbytes_(nbytes), device_(device) {
  if (device.is_cpu()) {
    data_ = nbytes ? allocate_bytes(nbytes) : nullptr;
    return;
  }
#if MANTISSA_HAS_CUDA
  cuda::detail::require_device(device, "tensor allocation");
  data_ = nbytes ? cuda::detail::allocate(nbytes, device.index) : nullptr;
#else
  throw Error(fmt::format("[tensor allocation] {} was asked for, but {}", device.str(),
                          cuda::unavailable_reason()));
#endif
}

void Storage::release() {
  MANTISSA_CHECK(device_.is_cpu(), "Storage", "only host memory can be released, not {}",
                 device_.str());
  free_bytes(data_, nbytes_);
  data_ = nullptr;
}

void Storage::restore() {
  if (data_ == nullptr && nbytes_ > 0) data_ = allocate_bytes(nbytes_);
}

Storage::~Storage() {
  if (device_.is_cpu()) {
    free_bytes(data_, nbytes_);
    return;
  }
#if MANTISSA_HAS_CUDA
  cuda::detail::release(data_, nbytes_, device_.index);
#endif
}

}  // namespace mantissa
