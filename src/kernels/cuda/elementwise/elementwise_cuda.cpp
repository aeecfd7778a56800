// The elementwise ops' CUDA branch (elementwise_cuda.h).
#include "kernels/cuda/elementwise/elementwise_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "core/strided_loops.h"
#include "mantissa/core/sum_to.h"

namespace mantissa::kernels::gpu {

Tensor map(const char* op, EwOp code, const std::vector<Tensor>& ins, DType dt, DType out_dt,
           double p0, double p1, const Shape* out_shape) {
  MANTISSA_CHECK(!ins.empty() && ins.size() <= 3, op, "internal: {} inputs", ins.size());
  const Device dev = common_device(op, ins);
  cuda::detail::DeviceGuard guard(dev);
  Shape shape = out_shape ? *out_shape : ins[0].shape();
  if (!out_shape)
    for (size_t k = 1; k < ins.size(); ++k) shape = broadcast_shapes(shape, ins[k].shape(), op);
  MANTISSA_CHECK(static_cast<int>(shape.size()) <= cuda::detail::kMaxDims, op,
                 "tensors of more than {} dimensions are not supported on CUDA devices (got {})",
                 cuda::detail::kMaxDims, shape.size());
  const auto type = detail::cuda_scalar_of(dt, op);
  const auto out_type = detail::cuda_scalar_of(out_dt, op);
  std::vector<Tensor> held;  // the converted inputs, alive until the kernel is queued
  const void* ptrs[3] = {};
  cuda::detail::EwLayout l;
  l.dims = static_cast<int>(shape.size());
  for (int d = 0; d < l.dims; ++d) l.sizes[d] = shape[d];
  l.linear = true;
  for (size_t k = 0; k < ins.size(); ++k) {
    Tensor t = to_device(ins[k], dev);
    const bool is_condition = code == EwOp::kWhere && k == 0;
    if (is_condition) {
      MANTISSA_CHECK(t.dtype() == kBool, op, "condition must be bool, got {}", t.dtype().name());
    } else if (t.dtype() != dt) {
      t = t.to(dt);
    }
    const Shape bs = kernels::broadcast_strides(t, shape);
    for (int d = 0; d < l.dims; ++d) l.strides[k][d] = bs[d];
    l.linear = l.linear && t.shape() == shape && t.is_contiguous();
    ptrs[k] = t.device_ptr();
    held.push_back(std::move(t));
  }
  Tensor out = empty(shape, out_dt, dev);
  cuda::detail::launch_elementwise(code, static_cast<int>(ins.size()), ptrs, type, out.device_ptr(),
                                   out_type, l, out.numel(), p0, p1);
  return out;
}

Tensor grad_map(EwOp code, const Tensor& g, const Tensor& x, double p0, double p1) {
  return map("backward", code, {g, x}, g.dtype(), g.dtype(), p0, p1, &g.shape());
}

Tensor grad_map(EwOp code, const Tensor& g, const Tensor& x, const Tensor& y,
                const Shape& to_shape) {
  return sum_to(map("backward", code, {g, x, y}, g.dtype(), g.dtype(), 0, 0, &g.shape()), to_shape);
}

}  // namespace mantissa::kernels::gpu

#endif
