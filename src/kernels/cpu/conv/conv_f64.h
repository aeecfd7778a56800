#pragma once
// float64 convolution (oneDNN has no f64 convolution) as im2col + the float64 GEMM
// (kernels/cpu/gemm/gemm_f64.h), for all three passes. Double accumulation throughout; each
// output element is one fixed sequence of multiply-adds, so results do not depend on the thread
// count. Tensors are contiguous NCHW / OIHW.
#include "kernels/cpu/onednn/onednn_conv.h"

namespace mantissa::kernels {

// y [n, oc, oh, ow] = conv(x [n, ic, ih, iw], w [oc, ic / groups, kh, kw]) + bias (oc values,
// or null).
void conv_f64_forward(const ConvGeometry& g, const double* x, const double* w, const double* bias,
                      double* y);
// gx [n, ic, ih, iw] = the input gradient of gy [n, oc, oh, ow] through w (gx is overwritten).
void conv_f64_backward_data(const ConvGeometry& g, const double* gy, const double* w, double* gx);
// gw [oc, ic / groups, kh, kw] = the weight gradient from x and gy, summed over the batch in
// image order (gw is overwritten).
void conv_f64_backward_weight(const ConvGeometry& g, const double* x, const double* gy, double* gw);

}  // namespace mantissa::kernels
