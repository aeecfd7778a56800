// cross_entropy's CUDA branch (loss_cuda.h).
#include "kernels/cuda/loss/loss_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_reduce.h"
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/elementwise/elementwise_cuda.h"
#include "kernels/cuda/loss/loss_kernels.h"
#include "kernels/device_check.h"

namespace mantissa::kernels::gpu {

namespace {
DType acc_dtype(DType dt) { return dt == kFloat64 ? kFloat64 : kFloat32; }
}  // namespace

CrossEntropyForward cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index,
                                  double label_smoothing, int reduction, int64_t count) {
  constexpr const char* kName = "cross_entropy";
  const Device dev = common_device(kName, {&input, &target});
  cuda::detail::DeviceGuard guard(dev);
  CrossEntropyForward f;
  const bool batched = input.dim() == 2;
  const int64_t n = batched ? input.size(0) : 1, c = input.size(-1);
  const DType dt = input.dtype(), adt = acc_dtype(dt);
  f.x = input.detach().contiguous();
  f.target = to_device(target, dev).to(kInt64).contiguous();
  f.lse = empty({n}, adt, dev);
  Tensor rows = empty({n}, adt, dev);
  cuda::detail::launch_cross_entropy_forward(f.x.device_ptr(), detail::cuda_scalar_of(dt, kName),
                                             static_cast<const int64_t*>(f.target.device_ptr()), n,
                                             c, ignore_index, label_smoothing, rows.device_ptr(),
                                             f.lse.device_ptr());
  if (reduction == 0) {
    f.loss = rows.to(dt).reshape(batched ? Shape{n} : Shape{});
    return f;
  }
  // The row losses summed in the arithmetic type, divided by the count for mean (0/0 = NaN
  // when every target is ignored, as on the CPU), rounded once to the dtype.
  Tensor s = detail::cuda_sum(rows, {true}, {}, /*mean=*/false);
  if (reduction == 1 && count < 0) {
    f.count = empty({}, adt, dev);
    cuda::detail::launch_divide_by_target_count(s.device_ptr(), detail::cuda_scalar_of(adt, kName),
                                                static_cast<const int64_t*>(f.target.device_ptr()),
                                                n, ignore_index, f.count.device_ptr());
  } else if (reduction == 1) {
    s = map(kName, EwOp::kDivScalar, {s}, adt, adt, static_cast<double>(count));
  }
  f.loss = s.to(dt);
  return f;
}

Tensor cross_entropy_backward(const CrossEntropyForward& f, const Tensor& grad,
                              int64_t ignore_index, double label_smoothing, int reduction,
                              int64_t count) {
  constexpr const char* kName = "cross_entropy";
  const Device dev = f.x.device();
  cuda::detail::DeviceGuard guard(dev);
  const DType gd = grad.dtype();
  const Tensor xs = f.x.to(gd).contiguous();
  const Tensor scale = to_device(grad, dev).to(acc_dtype(gd)).contiguous();
  const Tensor lse = f.lse.to(acc_dtype(gd)).contiguous();
  Tensor dx = empty(xs.shape(), gd, dev);
  const int64_t c = xs.size(-1), n = c == 0 ? 0 : xs.numel() / c;
  cuda::detail::launch_cross_entropy_backward(
      xs.device_ptr(), detail::cuda_scalar_of(gd, kName),
      static_cast<const int64_t*>(f.target.device_ptr()), n, c, ignore_index, label_smoothing,
      lse.device_ptr(), scale.device_ptr(), reduction == 0,
      reduction == 1 && count >= 0 ? static_cast<double>(count) : 0.0,
      reduction == 1 && count < 0 ? f.count.to(acc_dtype(gd)).device_ptr() : nullptr,
      dx.device_ptr());
  return dx;
}

}  // namespace mantissa::kernels::gpu

#endif
