// conv2d's im2col / col2im kernels (conv_kernels.h).
#include "kernels/cuda/common/device_util.cuh"
#include "kernels/cuda/conv/conv_kernels.h"

namespace mantissa::cuda::detail {
namespace {

template <Scalar S>
__global__ void im2col_kernel(const elem_t<S>* x, elem_t<S>* cols, ConvShape s, int64_t total) {
  const int64_t L = s.oh * s.ow, NL = s.n * L;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t r = i / NL, col = i % NL;
    const int64_t n = col / L, l = col % L;
    const int64_t oy = l / s.ow, ox = l % s.ow;
    const int64_t kx = r % s.kw, ky = (r / s.kw) % s.kh, c = r / (s.kw * s.kh);
    const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
    const int64_t ix = ox * s.sw - s.pw + kx * s.dw;
    if (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w) {
      cols[i] = x[((n * s.c + c) * s.h + iy) * s.w + ix];
    } else {
      store<S>(cols, i, acc_t<S>(0));
    }
  }
}

template <Scalar S>
__global__ void col2im_kernel(const elem_t<S>* cols, elem_t<S>* dx, ConvShape s, int64_t total) {
  using A = acc_t<S>;
  const int64_t L = s.oh * s.ow, NL = s.n * L;
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    const int64_t ix = i % s.w, iy = (i / s.w) % s.h;
    const int64_t c = (i / (s.w * s.h)) % s.c, n = i / (s.w * s.h * s.c);
    A acc = 0;
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      const int64_t ty = iy + s.ph - ky * s.dh;  // = oy * sh
      if (ty < 0 || ty % s.sh != 0) continue;
      const int64_t oy = ty / s.sh;
      if (oy >= s.oh) continue;
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        const int64_t tx = ix + s.pw - kx * s.dw;  // = ox * sw
        if (tx < 0 || tx % s.sw != 0) continue;
        const int64_t ox = tx / s.sw;
        if (ox >= s.ow) continue;
        const int64_t r = (c * s.kh + ky) * s.kw + kx;
        acc += load<S>(cols, r * NL + n * L + oy * s.ow + ox);
      }
    }
    store<S>(dx, i, acc);
  }
}

}  // namespace

void launch_im2col(const void* x, void* cols, Scalar type, const ConvShape& s) {
  const int64_t total = s.c * s.kh * s.kw * s.n * s.oh * s.ow;
  if (total == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    im2col_kernel<S><<<grid_for(total), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(x), static_cast<elem_t<S>*>(cols), s, total);
  })
  check_kernel_launch("im2col");
}

void launch_col2im(const void* cols, void* dx, Scalar type, const ConvShape& s) {
  const int64_t total = s.n * s.c * s.h * s.w;
  if (total == 0) return;
  MANTISSA_CUDA_DISPATCH_FLOAT(type, S, {
    col2im_kernel<S><<<grid_for(total), 256, 0, current_stream()>>>(
        static_cast<const elem_t<S>*>(cols), static_cast<elem_t<S>*>(dx), s, total);
  })
  check_kernel_launch("col2im");
}

}  // namespace mantissa::cuda::detail
