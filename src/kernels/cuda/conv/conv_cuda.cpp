// conv2d's CUDA branch (conv_cuda.h).
#include "kernels/cuda/conv/conv_cuda.h"

#if MANTISSA_HAS_CUDA
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/tensor_transfer.h"
#include "kernels/cuda/common/device_check.h"
#include "kernels/cuda/conv/conv_kernels.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "ops/matmul_impl.h"

namespace mantissa::kernels::gpu {

namespace {

cuda::detail::ConvShape shape_of(const kernels::ConvGeometry& g) {
  return {g.n, g.ic, g.ih, g.iw, g.kh, g.kw, g.oh, g.ow, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
}

void check_groups(const kernels::ConvGeometry& g) {
  MANTISSA_CHECK(g.groups == 1, "conv2d",
                 "grouped convolutions (groups={}) are not implemented on a GPU yet; move the "
                 "tensors to the CPU with .cpu()",
                 g.groups);
}

// The (C*KH*KW, N*OH*OW) column matrix of x (contiguous, on the GPU).
Tensor im2col(const kernels::ConvGeometry& g, const Tensor& x) {
  Tensor cols = empty({g.ic * g.kh * g.kw, g.n * g.oh * g.ow}, x.dtype(), x.device());
  cuda::detail::launch_im2col(x.device_ptr(), cols.device_ptr(),
                              detail::cuda_scalar_of(x.dtype(), "conv2d"), shape_of(g));
  return cols;
}

}  // namespace

Tensor conv2d_forward(const kernels::ConvGeometry& g, const Tensor& x_in, const Tensor& w_in,
                      const Tensor& b_in) {
  check_groups(g);
  const Device dev = common_device("conv2d", {&x_in, &w_in, &b_in});
  cuda::detail::DeviceGuard guard(dev);
  NoGradGuard no_grad;
  const Tensor x = x_in.detach().contiguous();
  const Tensor w = w_in.detach().contiguous().view({g.oc, g.ic * g.kh * g.kw});
  // (OC, CKK) @ (CKK, N*OH*OW) -> (OC, N, OH, OW), then to [N, OC, OH, OW] (+ bias) in one pass.
  const Tensor y = detail::matmul_nograd(w, im2col(g, x)).view({g.oc, g.n, g.oh, g.ow});
  const Tensor yp = y.permute({1, 0, 2, 3});
  if (b_in.defined()) return add(yp, b_in.detach().view({1, g.oc, 1, 1}));
  return yp.contiguous();
}

std::vector<Tensor> conv2d_backward(const kernels::ConvGeometry& g, const Tensor& grad_out,
                                    const Tensor& x_in, const Tensor& w_in, bool need_x,
                                    bool need_w, bool need_b) {
  check_groups(g);
  const Device dev = common_device("conv2d", {&grad_out, &x_in, &w_in});
  cuda::detail::DeviceGuard guard(dev);
  NoGradGuard no_grad;
  const DType dt = x_in.dtype();
  const int64_t ckk = g.ic * g.kh * g.kw, nl = g.n * g.oh * g.ow;
  // grad_out as (OC, N*OH*OW), the layout of the forward's product.
  const Tensor gy = grad_out.detach()
                        .to(dt)
                        .contiguous()
                        .view({g.n, g.oc, g.oh * g.ow})
                        .permute({1, 0, 2})
                        .contiguous()
                        .view({g.oc, nl});
  Tensor gx, gw, gb;
  if (need_w) {
    // (OC, N*OH*OW) @ (N*OH*OW, CKK): one product over the whole batch, fp32 accumulation.
    const Tensor cols = im2col(g, x_in.detach().contiguous());
    gw = detail::matmul_nograd(gy, cols.t()).view({g.oc, g.ic, g.kh, g.kw});
  }
  if (need_x) {
    const Tensor w = w_in.detach().contiguous().view({g.oc, ckk});
    const Tensor gcols = detail::matmul_nograd(w.t(), gy);  // (CKK, N*OH*OW)
    gx = empty({g.n, g.ic, g.ih, g.iw}, dt, dev);
    cuda::detail::launch_col2im(gcols.device_ptr(), gx.device_ptr(),
                                detail::cuda_scalar_of(dt, "conv2d"), shape_of(g));
  }
  if (need_b) gb = sum(gy, {1});
  return {gx, gw, gb};
}

}  // namespace mantissa::kernels::gpu

#endif
