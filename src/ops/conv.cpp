// conv2d: validation, autocast, dtype dispatch and the ConvBackward node.
// f32/bf16 -> oneDNN (kernels/cpu/onednn/onednn_conv.cpp), f16 -> widened to f32 on oneDNN and
// rounded once (oneDNN has no f16 convolution on CPUs without AVX-512 FP16, and no bf16 one
// without AVX-512: bf16 is widened there too; the widening and rounding happen in the kernel's
// reorders to and from oneDNN's layouts), f64 -> im2col and the float64 GEMM
// (kernels/cpu/conv/conv_f64.h).
#include "mantissa/ops/conv.h"
#include "mantissa/core/op_profiler.h"

#include "mantissa/core/bfloat16.h"
#include "mantissa/ops/matmul_precision.h"

#include <string>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/conv/conv_f64.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/onednn_conv.h"
#include "kernels/device_check.h"
#include "kernels/gpu_kernels.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/node.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa {
namespace {

using kernels::ConvGeometry;

std::string geometry_str(const Tensor& input, const Tensor& weight) {
  return fmt::format("input {} and weight {}", shape_str(input.shape()), shape_str(weight.shape()));
}

ConvGeometry check_and_plan(const Tensor& input, const Tensor& weight, const Tensor& bias,
                            Size2 stride, Size2 padding, Size2 dilation, int64_t groups) {
  MANTISSA_CHECK(input.dim() == 4, "conv2d", "expected a 4-D input [N, C, H, W], got shape {}",
                 shape_str(input.shape()));
  MANTISSA_CHECK(weight.dim() == 4, "conv2d",
                 "expected a 4-D weight [C_out, C_in / groups, kH, kW], got shape {}",
                 shape_str(weight.shape()));
  const DType dt = input.dtype();
  MANTISSA_CHECK(dt.is_floating_point() && !dt.is_float8(), "conv2d",
                 "expected float64, float32, float16 or bfloat16 tensors, got {}", dt.name());
  MANTISSA_CHECK(weight.dtype() == dt && (!bias.defined() || bias.dtype() == dt), "conv2d",
                 "input, weight and bias must share a dtype, got {}, {} and {}", dt.name(),
                 weight.dtype().name(), bias.defined() ? bias.dtype().name() : "none");
  MANTISSA_CHECK(groups >= 1, "conv2d", "groups must be positive, got {}", groups);
  for (int i = 0; i < 2; ++i) {
    MANTISSA_CHECK(stride[i] >= 1 && padding[i] >= 0 && dilation[i] >= 1, "conv2d",
                   "stride ({}, {}) and dilation ({}, {}) must be positive and padding ({}, {}) "
                   "non-negative",
                   stride[0], stride[1], dilation[0], dilation[1], padding[0], padding[1]);
  }
  ConvGeometry g{};
  g.n = input.size(0);
  g.ic = input.size(1);
  g.ih = input.size(2);
  g.iw = input.size(3);
  g.oc = weight.size(0);
  g.kh = weight.size(2);
  g.kw = weight.size(3);
  MANTISSA_CHECK(g.oc % groups == 0, "conv2d",
                 "weight {} has {} output channels, not divisible by groups={}",
                 shape_str(weight.shape()), g.oc, groups);
  MANTISSA_CHECK(weight.size(1) * groups == g.ic, "conv2d",
                 "in-channels mismatch: {} (input has {} channels, weight expects {} x groups={} "
                 "= {})",
                 geometry_str(input, weight), g.ic, weight.size(1), groups,
                 weight.size(1) * groups);
  MANTISSA_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == g.oc), "conv2d",
                 "bias must have shape [{}] for weight {}, got {}", g.oc, shape_str(weight.shape()),
                 shape_str(bias.shape()));
  MANTISSA_CHECK(g.kh >= 1 && g.kw >= 1 && g.oc >= 1 && g.ic >= 1, "conv2d",
                 "empty kernel or channel dimension in {}", geometry_str(input, weight));
  g.sh = stride[0];
  g.sw = stride[1];
  g.ph = padding[0];
  g.pw = padding[1];
  g.dh = dilation[0];
  g.dw = dilation[1];
  g.groups = groups;
  const int64_t eff_h = g.dh * (g.kh - 1) + 1, eff_w = g.dw * (g.kw - 1) + 1;
  MANTISSA_CHECK(g.ih + 2 * g.ph >= eff_h && g.iw + 2 * g.pw >= eff_w, "conv2d",
                 "the padded input ({} x {}) is smaller than the dilated kernel ({} x {}) for {}",
                 g.ih + 2 * g.ph, g.iw + 2 * g.pw, eff_h, eff_w, geometry_str(input, weight));
  g.oh = (g.ih + 2 * g.ph - eff_h) / g.sh + 1;
  g.ow = (g.iw + 2 * g.pw - eff_w) / g.sw + 1;
  return g;
}

Tensor contig(const Tensor& t, DType dt) { return t.detach().to(dt).contiguous(); }

// Sum of gy over N, H, W per output channel.
Tensor bias_grad_f64(const ConvGeometry& g, const Tensor& gy) {
  Tensor gb = zeros({g.oc}, kFloat64);
  double* pb = gb.data<double>();
  const double* pg = gy.data<double>();
  const int64_t plane = g.oh * g.ow;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.oc; ++c)
      for (int64_t i = 0; i < plane; ++i) pb[c] += pg[(n * g.oc + c) * plane + i];
  return gb;
}

// The dtype oneDNN computes in: f16 is widened to f32, and so is bf16 where the CPU has no bf16
// dot products (AVX-512 BF16 or AMX): oneDNN has no bf16 kernels without AVX-512, and with
// AVX-512 alone it emulates them (the CNN's bf16-mixed step ran at 0.45 of its 32-true speed).
DType compute_dtype(DType dt) {
  const bool widen = dt == kFloat16 || (dt == kBFloat16 && !kernels::onednn_native_bf16());
  return widen ? kFloat32 : dt;
}

// float32 convolutions under float32_matmul_precision "medium"/"high"
// (mantissa/ops/matmul_precision.h): the operands as bf16 terms, x = hi + lo, each rounded to
// nearest even; products of bf16 values are exact in fp32 and oneDNN accumulates in fp32.
// "medium" is one convolution of the hi terms, "high" three (hi*hi + hi*lo + lo*hi) summed in
// fp32. Emulated on every CPU (the fp32 convolution on bf16 values): no speed-up.
struct Bf16Terms {
  Tensor hi, lo;
};

Bf16Terms bf16_terms(const Tensor& t, bool need_lo) {
  const Tensor c = contig(t, kFloat32);
  Bf16Terms out{empty(c.shape(), kFloat32), need_lo ? empty(c.shape(), kFloat32) : Tensor()};
  const float* src = c.data<float>();
  float* hi = out.hi.data<float>();
  float* lo = need_lo ? out.lo.data<float>() : nullptr;
  const int64_t n = c.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    hi[i] = bf16_bits_to_float(float_to_bf16_bits(src[i]));
    if (lo) lo[i] = bf16_bits_to_float(float_to_bf16_bits(src[i] - hi[i]));
  }
  return out;
}

bool reduced_fp32(DType dt) {
  return dt == kFloat32 && float32_matmul_precision() != Float32MatmulPrecision::kHighest;
}

void add_into(Tensor& acc, const Tensor& t) {
  float* a = acc.data<float>();
  const float* b = t.data<float>();
  const int64_t n = acc.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

Tensor forward_bf16_terms(const ConvGeometry& g, const Tensor& input, const Tensor& weight,
                          const Tensor& bias) {
  const bool high = float32_matmul_precision() == Float32MatmulPrecision::kHigh;
  const Bf16Terms x = bf16_terms(input, high), w = bf16_terms(weight, high);
  const Tensor b = bias.defined() ? contig(bias, kFloat32) : Tensor();
  auto conv = [&](const Tensor& xs, const Tensor& ws, const Tensor& bs) {
    Tensor out = empty({g.n, g.oc, g.oh, g.ow}, kFloat32);
    kernels::onednn_conv_forward(kFloat32, kFloat32, g, xs.data_ptr(), ws.data_ptr(),
                                 bs.defined() ? bs.data_ptr() : nullptr, out.data_ptr());
    return out;
  };
  Tensor out = conv(x.hi, w.hi, b);
  if (high) {
    add_into(out, conv(x.hi, w.lo, Tensor()));
    add_into(out, conv(x.lo, w.hi, Tensor()));
  }
  return out;
}

// ---- GPU: cuDNN (kernels/cuda/conv/conv_cuda.cpp) ----
// The forward and both gradient products are cuDNN convolutions (groups included); float32
// runs on TF32 tensor cores only when float32_matmul_precision allows it, as the GPU GEMM does.
// The bias is added, and its gradient summed, by the element-wise and reduction ops.

bool gpu_allow_tf32() { return float32_matmul_precision() != Float32MatmulPrecision::kHighest; }

Tensor gpu_forward(const ConvGeometry& g, const Tensor& input, const Tensor& weight,
                   const Tensor& bias) {
  (void)kernels::gpu::common_device("conv2d", {&input, &weight, &bias});
  NoGradGuard no_grad;
  const Tensor y = kernels::gpu_kernels().conv2d_forward(g, input, weight, gpu_allow_tf32());
  if (bias.defined()) return add(y, bias.detach().view({1, g.oc, 1, 1}));
  return y;
}

std::vector<Tensor> gpu_backward(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                                 const Tensor& w, bool need_x, bool need_w, bool need_b) {
  (void)kernels::gpu::common_device("conv2d", {&grad_out, &x, &w});
  NoGradGuard no_grad;
  const DType dt = x.dtype();
  const bool tf32 = gpu_allow_tf32();
  const Tensor gy = grad_out.detach().to(dt).contiguous();
  Tensor gx, gw, gb;
  if (need_w) gw = kernels::gpu_kernels().conv2d_backward_weight(g, x, gy, tf32);
  if (need_x) gx = kernels::gpu_kernels().conv2d_backward_data(g, gy, w, tf32);
  if (need_b) gb = sum(gy, {0, 2, 3});
  return {gx, gw, gb};
}

Tensor forward_impl(const ConvGeometry& g, const Tensor& input, const Tensor& weight,
                    const Tensor& bias) {
  if (kernels::gpu::any_cuda({&input, &weight, &bias})) return gpu_forward(g, input, weight, bias);
  const DType dt = input.dtype();
  if (reduced_fp32(dt)) return forward_bf16_terms(g, input, weight, bias);
  if (dt == kFloat64) {
    const Tensor x = contig(input, dt), w = contig(weight, dt);
    const Tensor b = bias.defined() ? contig(bias, dt) : Tensor();
    Tensor out = empty({g.n, g.oc, g.oh, g.ow}, dt);
    kernels::conv_f64_forward(g, x.data<double>(), w.data<double>(),
                              b.defined() ? b.data<double>() : nullptr, out.data<double>());
    return out;
  }
  // bf16/f16 stay as they are where oneDNN computes in f32: the kernel widens them as it
  // reorders them into oneDNN's layout and rounds the result as it reorders it out.
  const DType cd = compute_dtype(dt);
  const Tensor x = contig(input, dt), w = contig(weight, dt);
  const Tensor b = bias.defined() ? contig(bias, cd) : Tensor();
  Tensor out = empty({g.n, g.oc, g.oh, g.ow}, dt);
  kernels::onednn_conv_forward(cd, dt, g, x.data_ptr(), w.data_ptr(),
                               b.defined() ? b.data_ptr() : nullptr, out.data_ptr());
  return out;
}

std::vector<Tensor> backward_impl(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                                  const Tensor& w, bool need_x, bool need_w, bool need_b) {
  if (x.is_cuda() || w.is_cuda()) return gpu_backward(g, grad_out, x, w, need_x, need_w, need_b);
  const DType dt = x.dtype();
  Tensor gx, gw, gb;
  if (dt == kFloat64) {
    const Tensor gy = contig(grad_out, dt);
    if (need_x) {
      const Tensor wc = contig(w, dt);
      gx = empty({g.n, g.ic, g.ih, g.iw}, dt);
      kernels::conv_f64_backward_data(g, gy.data<double>(), wc.data<double>(), gx.data<double>());
    }
    if (need_w) {
      const Tensor xc = contig(x, dt);
      gw = empty(w.shape(), dt);
      kernels::conv_f64_backward_weight(g, xc.data<double>(), gy.data<double>(), gw.data<double>());
    }
    if (need_b) gb = bias_grad_f64(g, gy);
    return {gx, gw, gb};
  }
  if (reduced_fp32(dt)) {
    // Each call adds one term pair to both gradients: gx = gy*w, gw = x*gy (see
    // forward_bf16_terms); the bias gradient is a plain fp32 sum, not a product.
    const bool high = float32_matmul_precision() == Float32MatmulPrecision::kHigh;
    const Bf16Terms xt = bf16_terms(x, high), wt = bf16_terms(w, high);
    const Bf16Terms gt = bf16_terms(grad_out, high);
    auto pass = [&](const Tensor& xs, const Tensor& gs, const Tensor& ws) {
      Tensor px = need_x ? empty(x.shape(), kFloat32) : Tensor();
      Tensor pw = need_w ? empty(w.shape(), kFloat32) : Tensor();
      kernels::onednn_conv_backward(kFloat32, kFloat32, g, xs.data_ptr(), gs.data_ptr(),
                                    ws.data_ptr(), need_x ? px.data_ptr() : nullptr,
                                    need_w ? pw.data<float>() : nullptr, nullptr);
      return std::pair<Tensor, Tensor>(px, pw);
    };
    auto [px, pw] = pass(xt.hi, gt.hi, wt.hi);  // gy_hi*w_hi, x_hi*gy_hi
    if (high) {
      auto [px2, pw2] = pass(xt.lo, gt.hi, wt.lo);  // gy_hi*w_lo, x_lo*gy_hi
      auto [px3, pw3] = pass(xt.hi, gt.lo, wt.hi);  // gy_lo*w_hi, x_hi*gy_lo
      if (need_x) {
        add_into(px, px2);
        add_into(px, px3);
      }
      if (need_w) {
        add_into(pw, pw2);
        add_into(pw, pw3);
      }
    }
    if (need_b) gb = bias_grad_f64(g, contig(grad_out, kFloat64)).to(kFloat32);
    return {px, pw, gb};
  }
  const DType cd = compute_dtype(dt);
  // As in the forward, the operands in their own dtype (the kernel widens them); a gradient of
  // another dtype than the input is widened here, as before.
  const DType io = grad_out.dtype() == dt ? dt : cd;
  const Tensor gy = contig(grad_out, io);
  if (need_x) gx = empty(x.shape(), io);
  // oneDNN computes weight and bias gradients in one pass; fp32 results rounded once to the
  // parameter dtype.
  Tensor gw32, gb32;
  if (need_w || need_b) {
    gw32 = empty(w.shape(), kFloat32);
    gb32 = empty({g.oc}, kFloat32);
  }
  kernels::onednn_conv_backward(cd, io, g, contig(x, io).data_ptr(), gy.data_ptr(),
                                contig(w, io).data_ptr(), need_x ? gx.data_ptr() : nullptr,
                                gw32.defined() ? gw32.data<float>() : nullptr,
                                need_b ? gb32.data<float>() : nullptr);
  if (need_x) gx = gx.to(dt);
  if (need_w) gw = gw32.to(dt);
  if (need_b) gb = gb32.to(dt);
  return {gx, gw, gb};
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Size2 stride,
              Size2 padding, Size2 dilation, int64_t groups) {
  MANTISSA_PROFILE_OP("conv2d");
  MANTISSA_AUTOCAST("conv2d", conv2d, input, weight, bias, stride, padding, dilation, groups);
  const ConvGeometry g = check_and_plan(input, weight, bias, stride, padding, dilation, groups);
  Tensor out = forward_impl(g, input, weight, bias);
  if (!autograd::needs_grad(input, weight, bias)) return out;
  const bool need_x = autograd::needs_grad(input), need_w = autograd::needs_grad(weight);
  const bool need_b = bias.defined() && autograd::needs_grad(bias);
  // Saved in the forward dtype (bf16 under autocast: half the memory of an fp32 copy).
  // The input's gradient reads the weight, the weight's gradient the input.
  const Tensor x = contig(input, input.dtype()), w = contig(weight, weight.dtype());
  return autograd::record(out, {input, weight, bias},
                          {need_w ? x : Tensor(), need_x ? w : Tensor()}, "ConvolutionBackward",
                          [g, x, w, need_x, need_w, need_b](const Tensor& grad) {
                            return backward_impl(g, grad, x, w, need_x, need_w, need_b);
                          });
}

}  // namespace mantissa
