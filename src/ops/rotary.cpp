// Rotary embeddings composed of differentiable views and pointwise ops (narrow, neg, cat, mul,
// add), so their backward is the graph's: the transpose rotation of the upstream gradient.
#include "mantissa/ops/rotary.h"

#include "amp/autocast_dispatch.h"
#include "mantissa/core/shape.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/shape_ops.h"

namespace mantissa {

Tensor rotate_half(const Tensor& x) {
  MANTISSA_AUTOCAST("rotate_half", rotate_half, x);
  MANTISSA_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) % 2 == 0, "rotate_half",
                 "the last dimension must be even, got shape {}", shape_str(x.shape()));
  const int64_t last = x.dim() - 1;
  const int64_t half = x.size(last) / 2;
  return cat({neg(x.narrow(last, half, half)), x.narrow(last, 0, half)}, last);
}

Tensor apply_rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  MANTISSA_AUTOCAST("apply_rotary_embedding", apply_rotary_embedding, x, cos, sin);
  MANTISSA_CHECK(x.dim() >= 2, "apply_rotary_embedding", "x must be (..., T, D), got shape {}",
                 shape_str(x.shape()));
  const int64_t T = x.size(x.dim() - 2), D = x.size(x.dim() - 1);
  for (const Tensor* table : {&cos, &sin})
    MANTISSA_CHECK(table->dim() == 2 && table->size(0) == T && table->size(1) == D,
                   "apply_rotary_embedding", "cos and sin must be (T, D) = ({}, {}), got {}", T, D,
                   shape_str(table->shape()));
  return add(mul(x, cos.to(x.dtype())), mul(rotate_half(x), sin.to(x.dtype())));
}

}  // namespace mantissa
