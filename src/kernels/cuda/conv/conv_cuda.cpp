// conv2d's CUDA branch (conv_cuda.h).
#include "kernels/cuda/conv/conv_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/conv/conv_kernels.h"

namespace mantissa::kernels::gpu {

namespace {
cuda::detail::ConvShape shape_of(const kernels::ConvGeometry& g) {
  return {g.n, g.ic, g.ih, g.iw, g.kh, g.kw, g.oh, g.ow, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
}
}  // namespace

Tensor conv2d_im2col(const kernels::ConvGeometry& g, const Tensor& x_in) {
  MANTISSA_CHECK(g.groups == 1 && x_in.is_cuda(), "conv2d", "internal: im2col of groups={} on {}",
                 g.groups, x_in.device().str());
  cuda::detail::DeviceGuard guard(x_in.device());
  const Tensor x = x_in.detach().contiguous();
  Tensor cols = empty({g.ic * g.kh * g.kw, g.n * g.oh * g.ow}, x.dtype(), x.device());
  cuda::detail::launch_im2col(x.device_ptr(), cols.device_ptr(),
                              detail::cuda_scalar_of(x.dtype(), "conv2d"), shape_of(g));
  return cols;
}

Tensor conv2d_col2im(const kernels::ConvGeometry& g, const Tensor& cols_in) {
  MANTISSA_CHECK(g.groups == 1 && cols_in.is_cuda() &&
                     cols_in.numel() == g.ic * g.kh * g.kw * g.n * g.oh * g.ow,
                 "conv2d", "internal: col2im of groups={}, {} columns on {}", g.groups,
                 shape_str(cols_in.shape()), cols_in.device().str());
  cuda::detail::DeviceGuard guard(cols_in.device());
  const Tensor cols = cols_in.detach().contiguous();
  Tensor dx = empty({g.n, g.ic, g.ih, g.iw}, cols.dtype(), cols.device());
  cuda::detail::launch_col2im(cols.device_ptr(), dx.device_ptr(),
                              detail::cuda_scalar_of(cols.dtype(), "conv2d"), shape_of(g));
  return dx;
}

}  // namespace mantissa::kernels::gpu

#endif
