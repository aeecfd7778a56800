#pragma once
// oneDNN 2-D convolution (forward, backward data, backward weights) for f32 and bf16 with fp32
// accumulation. Callers pass plain NCHW / (G)OIHW buffers; the primitives run on oneDNN's
// blocked layouts (reorders in and out through per-thread staging buffers) and are cached by
// (pass, dtypes, geometry), so a training loop builds each layer's primitives once.
//
// `dtype` is what the primitive computes in, `io` the dtype of the caller's activations and
// weights: the same, or bf16/f16 with a float32 `dtype` where the CPU has no such convolution.
// Those are widened as they are reordered into the primitive's layout and its results rounded
// as they are reordered out, one pass each (blocked_convert.h), with Tensor::to's bits.
#include <cstddef>
#include <cstdint>

#include "mantissa/core/dtype.h"

namespace mantissa::kernels {

// Geometry of one convolution, PyTorch conventions: dilation 1 means dense, padding is
// symmetric on the left/top (the right/bottom padding follows from the output size).
struct ConvGeometry {
  int64_t n, ic, ih, iw;  // input [n, ic, ih, iw]
  int64_t oc, kh, kw;     // weight [oc, ic / groups, kh, kw]
  int64_t oh, ow;         // output [n, oc, oh, ow]
  int64_t sh, sw, ph, pw, dh, dw, groups;
};

// dst = conv(src, wei) + bias. src, wei and dst have dtype `io`; bias (may be null) `dtype`.
void onednn_conv_forward(DType dtype, DType io, const ConvGeometry& g, const void* src,
                         const void* wei, const void* bias, void* dst);
// The backward of one convolution: diff_src = conv_transpose(diff_dst, wei) unless diff_src is
// null; diff_wei (and diff_bias when not null) from src and diff_dst unless diff_wei is null.
// Weight and bias gradients are float32 (fp32 accumulation kept to the end; the caller rounds
// to the parameter dtype). src, diff_dst, wei and diff_src have dtype `io`. diff_dst is reordered
// once for both passes.
void onednn_conv_backward(DType dtype, DType io, const ConvGeometry& g, const void* src,
                          const void* diff_dst, const void* wei, void* diff_src, float* diff_wei,
                          float* diff_bias);

inline constexpr size_t kOnednnConvCacheCapacity = 256;
size_t onednn_conv_cache_size();
void onednn_conv_clear_cache();

}  // namespace mantissa::kernels
