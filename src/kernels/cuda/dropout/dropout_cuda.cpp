// dropout's CUDA branch (dropout_cuda.h).
#include "kernels/cuda/dropout/dropout_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/dropout/dropout_kernels.h"
#include "kernels/device_check.h"

namespace mantissa::kernels::gpu {

Tensor dropout_mask(const Tensor& x, uint64_t seed, double p) {
  cuda::detail::DeviceGuard guard(x.device());
  // The seed is an argument of the recorded kernel: every replay would drop the same elements.
  cuda::detail::refuse_during_capture(
      "dropout on a GPU (its mask would be the same in every replay; set the dropout "
      "probability to 0 for a graphed step)");
  Tensor mask = empty(x.shape(), kUInt8, x.device());
  cuda::detail::launch_dropout_mask(static_cast<uint8_t*>(mask.device_ptr()), seed, p,
                                    mask.numel());
  return mask;
}

Tensor apply_mask(const Tensor& x, const Tensor& mask, double scale) {
  const Device dev = common_device("dropout", {&x, &mask});
  cuda::detail::DeviceGuard guard(dev);
  const Tensor xc = x.detach().contiguous();
  Tensor out = empty(x.shape(), x.dtype(), dev);
  cuda::detail::launch_apply_mask(xc.device_ptr(), static_cast<const uint8_t*>(mask.device_ptr()),
                                  scale, out.device_ptr(),
                                  detail::cuda_scalar_of(x.dtype(), "dropout"), out.numel());
  return out;
}

}  // namespace mantissa::kernels::gpu

#endif
