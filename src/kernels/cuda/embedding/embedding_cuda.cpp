// embedding's CUDA branch (embedding_cuda.h).
#include "kernels/cuda/embedding/embedding_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/embedding/embedding_kernels.h"
#include "kernels/device_check.h"

namespace mantissa::kernels::gpu {

EmbeddingForward embedding_forward(const Tensor& weight, const Tensor& indices) {
  const Device dev = common_device("embedding", {&weight, &indices});
  cuda::detail::DeviceGuard guard(dev);
  (void)detail::cuda_scalar_of(weight.dtype(), "embedding");
  EmbeddingForward f;
  f.indices = to_device(indices, dev).to(kInt64).contiguous();
  const Tensor w = weight.detach().contiguous();
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  f.out = empty(out_shape, weight.dtype(), dev);
  cuda::detail::launch_embedding_forward(
      w.device_ptr(), static_cast<const int64_t*>(f.indices.device_ptr()), f.out.device_ptr(),
      f.indices.numel(), weight.size(0), weight.size(1), static_cast<int>(weight.element_size()));
  return f;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num, int64_t dim) {
  const Device dev = common_device("embedding", {&grad, &indices});
  cuda::detail::DeviceGuard guard(dev);
  const DType dt = grad.dtype();
  const Tensor g = grad.contiguous();
  Tensor acc = zeros({num, dim}, dt == kFloat64 ? kFloat64 : kFloat32, dev);
  cuda::detail::launch_embedding_backward(g.device_ptr(), detail::cuda_scalar_of(dt, "embedding"),
                                          static_cast<const int64_t*>(indices.device_ptr()),
                                          acc.device_ptr(), indices.numel(), num, dim);
  return acc.to(dt);
}

}  // namespace mantissa::kernels::gpu

#endif
