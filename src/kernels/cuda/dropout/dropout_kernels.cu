// dropout kernels (dropout_kernels.h).
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/dropout/dropout_kernels.h"

namespace mantissa::cuda::detail {
namespace {

// splitmix64's finaliser over seed + (i + 1) * golden ratio: independent-looking 64-bit values
// for consecutive i.
__device__ __forceinline__ uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void mask_kernel(uint8_t* mask, uint64_t seed, double p, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const double u = static_cast<double>(mix(seed, static_cast<uint64_t>(i)) >> 11) * 0x1.0p-53;
    mask[i] = u >= p ? 1 : 0;
  }
}

template <Scalar S>
__global__ void apply_mask_kernel(const elem_t<S>* x, const uint8_t* mask, double scale,
                                  elem_t<S>* out, int64_t n) {
  using A = acc_t<S>;
  const A s = static_cast<A>(scale);
  for (int64_t i = global_thread(); i < n; i += grid_threads())
    store<S>(out, i, mask[i] ? load<S>(x, i) * s : A(0));
}

}  // namespace

void launch_dropout_mask(uint8_t* mask, uint64_t seed, double p, int64_t n) {
  if (n == 0) return;
  mask_kernel<<<grid_for(n), 256, 0, current_stream()>>>(mask, seed, p, n);
  check_kernel_launch("dropout_mask");
}

void launch_apply_mask(const void* x, const uint8_t* mask, double scale, void* out, Scalar type,
                       int64_t n) {
  if (n == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    apply_mask_kernel<S><<<grid_for(n), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), mask, scale, static_cast<elem_t<S>*>(out), n);
  })
  check_kernel_launch("dropout");
}

}  // namespace mantissa::cuda::detail
