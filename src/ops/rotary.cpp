// Rotary embeddings. apply_rotary_embedding runs one fused pass each way on the CPU
// (kernels/cpu/rotary/rotary_kernels.h) with the composed form's roundings; the composed form
// (narrow, neg, cat, mul, add) serves GPU tensors, tables other than float32 and tables that
// need their own gradient.
#include "mantissa/ops/rotary.h"

#include <vector>

#include "amp/autocast_dispatch.h"
#include "kernels/cpu/rotary/rotary_kernels.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/op_profiler.h"
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

namespace {

// Element offsets from x.data_ptr() of x's rows of D (its last dimension, stride 1), in
// row-major order.
std::vector<int64_t> row_offsets(const Tensor& x) {
  const int64_t lead = x.dim() - 1;
  int64_t rows = 1;
  for (int64_t d = 0; d < lead; ++d) rows *= x.size(d);
  std::vector<int64_t> off(static_cast<size_t>(rows));
  std::vector<int64_t> idx(static_cast<size_t>(lead), 0);
  int64_t at = 0;
  for (int64_t r = 0; r < rows; ++r) {
    off[static_cast<size_t>(r)] = at;
    for (int64_t d = lead - 1; d >= 0; --d) {
      const auto k = static_cast<size_t>(d);
      at += x.stride(d);
      if (++idx[k] < x.size(d)) break;
      at -= x.stride(d) * x.size(d);
      idx[k] = 0;
    }
  }
  return off;
}

}  // namespace

Tensor apply_rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  MANTISSA_PROFILE_OP("rotary");
  MANTISSA_AUTOCAST("apply_rotary_embedding", apply_rotary_embedding, x, cos, sin);
  MANTISSA_CHECK(x.dim() >= 2, "apply_rotary_embedding", "x must be (..., T, D), got shape {}",
                 shape_str(x.shape()));
  const int64_t T = x.size(x.dim() - 2), D = x.size(x.dim() - 1);
  for (const Tensor* table : {&cos, &sin})
    MANTISSA_CHECK(table->dim() == 2 && table->size(0) == T && table->size(1) == D,
                   "apply_rotary_embedding", "cos and sin must be (T, D) = ({}, {}), got {}", T, D,
                   shape_str(table->shape()));
  const bool fused = !x.is_cuda() && x.is_floating_point() && !x.dtype().is_float8() &&
                     D % 2 == 0 && cos.dtype() == kFloat32 && sin.dtype() == kFloat32 &&
                     !cos.is_cuda() && !sin.is_cuda() && !autograd::needs_grad(cos, sin);
  if (!fused) return add(mul(x, cos.to(x.dtype())), mul(rotate_half(x), sin.to(x.dtype())));

  const Tensor xs = x.stride(x.dim() - 1) == 1 ? x.detach() : x.detach().contiguous();
  const Tensor c = cos.detach().contiguous(), s = sin.detach().contiguous();
  kernels::cpu::RotaryRows p;
  p.rows = T == 0 ? 0 : x.numel() / D;
  p.positions = T;
  p.dim = D;
  p.cos = c.data<float>();
  p.sin = s.data<float>();
  Tensor out = empty(x.shape(), x.dtype());
  if (p.rows > 0) {
    const std::vector<int64_t> off = row_offsets(xs);
    kernels::cpu::rotary_forward(p, x.dtype(), xs.data_ptr(), off.data(), out.data_ptr());
  }
  if (!autograd::needs_grad(x)) return out;
  const DType dt = x.dtype();
  return autograd::record(out, {x}, {c, s}, "RotaryBackward", [p, c, s, dt](const Tensor& g) {
    const Tensor gc = g.to(dt).contiguous();
    Tensor dx = empty(gc.shape(), dt);
    if (p.rows > 0) kernels::cpu::rotary_backward(p, dt, gc.data_ptr(), dx.data_ptr());
    return std::vector<Tensor>{dx};
  });
}

}  // namespace mantissa
