#pragma once
// The Linear layer of the recipes that quantize each operand just in time, with scales taken
// from the tensor itself (block, mxfp8, mxfp4, nvfp4, rowwise, rowwise-gw-hp; docs/fp8.md). For
// x (rows M, features K), W (N, K) and dy (M, N) every recipe runs the same three products,
//   y  = x W^T + b,   dx = dy W,   dW = dy^T x,
// records the same statistics and keeps what backward needs; only the casts and the products
// are a recipe's own. scaled_linear is that shared frame; a recipe hands it an `Ops` value:
//
//   using Cast = ...;    // one quantized copy; has `float amax` and `CastCounts counts`
//   using Saved = ...;   // what backward keeps (the operands of dx and dW made in forward)
//   static constexpr const char* kNodeName;           // the autograd node's name
//   Cast input(const Tensor& x2) const;                // x [M, K], its statistics taken
//   Cast weight(const Tensor& w) const;                // W [N, K], its statistics taken
//   float scale_of(const Cast& q, DType src) const;    // the scale statistics report for q
//   Tensor forward(const Cast& qx, const Cast& qw, const Tensor& bias, DType act) const;
//                                                      // y [M, N] in act, bias as the recipe adds
//                                                      it
//   Saved save(const Tensor& x2, const Tensor& w, const Cast& qw, bool need_x, bool need_w) const;
//   Cast grad_output(const Tensor& dy2) const;         // dy [M, N] for dx, its statistics taken
//   Tensor grad_input(const Cast& qdy, const Saved& s, DType act) const;          // dx [M, K]
//   std::optional<Cast> grad_output_t(const Tensor& dy2, bool stats) const;
//                                                      // dy^T's copy for dW (nullopt: dW reads
//                                                      // dy in high precision); statistics when
//                                                      // `stats`
//   Tensor grad_weight(const std::optional<Cast>& qdyt, const Tensor& dy2, const Saved& s,
//                      DType w_dtype) const;          // dW [N, K] in w_dtype
//
// The calls run in this order (a stochastically rounding recipe draws its offsets in it):
// input, weight, forward, save; in backward grad_output (when dx is needed), then
// grad_output_t (when dW is). dy's statistics are those of its row-wise copy, or of dy^T's
// when dx is not made. db is the column sum of dy in fp32, in the bias's dtype.
#include <memory>
#include <optional>
#include <vector>

#include "kernels/cpu/reduce/sum_rows.h"
#include "mantissa/autograd/node.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::fp8 {

// db in fp32: the column sums of dy, each in row order (sum(dy2.to(kFloat32), {0})), read in
// dy's dtype on the CPU (no float32 copy of dy).
inline Tensor bias_gradient(const Tensor& dy2) {
  // One column is summed as a contiguous run, in another order.
  if (dy2.is_cuda() || dy2.size(1) == 1) return sum(dy2.to(kFloat32), {0});
  return kernels::sum_rows_f32_in_row_order(dy2);
}

template <class Ops>
void record_cast(ScalingState& state, Role role, const Ops& ops, const typename Ops::Cast& q,
                 DType src) {
  const int slot = static_cast<int>(role);
  state.set_last_cast(slot, q.amax, ops.scale_of(q, src));
  state.add_counts(slot, q.counts);
}

template <class Ops>
Tensor scaled_linear(const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const std::shared_ptr<ScalingState>& state, const Ops& ops) {
  using Cast = typename Ops::Cast;
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  const Tensor w = weight.detach();
  const Cast qx = ops.input(x2);
  const Cast qw = ops.weight(w);
  record_cast(*state, Role::kInput, ops, qx, x2.dtype());
  record_cast(*state, Role::kWeight, ops, qw, w.dtype());
  register_fp8_forward(state);  // statistics and the scope's bookkeeping; no scale update

  const DType act = input.dtype();
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  const Tensor y =
      ops.forward(qx, qw, bias.defined() ? bias.detach() : Tensor(), act).view(out_shape);
  if (!autograd::needs_grad(input, weight, bias)) return y;

  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const DType w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : kFloat32;
  const typename Ops::Saved saved = ops.save(x2, w, qw, need_x, need_w);
  return autograd::record(y, {input, weight, bias}, Ops::kNodeName,
                          [=](const Tensor& grad) -> std::vector<Tensor> {
                            const Tensor dy2 = grad.reshape({rows, out_f}).contiguous();
                            Tensor dx, dw, db;
                            if (need_x) {
                              const Cast qdy = ops.grad_output(dy2);
                              record_cast(*state, Role::kGradOutput, ops, qdy, dy2.dtype());
                              dx = ops.grad_input(qdy, saved, act).view(x_shape);
                            }
                            if (need_w) {
                              const std::optional<Cast> qdyt = ops.grad_output_t(dy2, !need_x);
                              if (!need_x && qdyt)
                                record_cast(*state, Role::kGradOutput, ops, *qdyt, dy2.dtype());
                              dw = ops.grad_weight(qdyt, dy2, saved, w_dtype);
                            }
                            if (need_b) db = bias_gradient(dy2).to(b_dtype);
                            return {dx, dw, db};
                          });
}

}  // namespace mantissa::fp8
