// A build without the CUDA backend has no GPU kernel table (gpu_kernels.h); the CUDA backend's
// is kernels/cuda/gpu_kernels_cuda.cpp.
#include "kernels/gpu_kernels.h"

#if !MANTISSA_HAS_CUDA
#include "mantissa/core/cuda.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels {

const GpuKernels& gpu_kernels() {
  fail("gpu kernels", "a GPU kernel was asked for, but {}", cuda::unavailable_reason());
}

}  // namespace mantissa::kernels

#endif
