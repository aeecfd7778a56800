#include "mantissa/fp8/rowwise_linear.h"

#include <vector>

#include "mantissa/autograd/node.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/rowwise.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::fp8 {
namespace {

constexpr int kIn = static_cast<int>(Role::kInput);
constexpr int kW = static_cast<int>(Role::kWeight);
constexpr int kDy = static_cast<int>(Role::kGradOutput);

// Statistics of a cast for `slot`: its largest amax, the scale that amax gets, its counts.
void record(ScalingState& state, int slot, const RowwiseFp8& q, bool power_2) {
  state.set_last_cast(slot, q.amax, torchao_scale(q.amax, fp8_max(kFloat8_e4m3fn), power_2));
  state.add_counts(slot, q.counts);
}

// Qcol(t): t^T quantized per row, i.e. one scale per column of t.
RowwiseFp8 quantize_columns(const Tensor& t, bool power_2) {
  return quantize_rows(t.t().contiguous(), kFloat8_e4m3fn, power_2);
}

}  // namespace

Tensor fp8_linear_rowwise(const Tensor& input, const Tensor& weight, const Tensor& bias,
                          const std::shared_ptr<ScalingState>& state, const Recipe& recipe) {
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  const bool p2 = recipe.power_2_scales();
  const bool gw_hp = recipe.kind == RecipeKind::kRowwiseGwHp;
  const DType e4m3 = kFloat8_e4m3fn;
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  const Tensor w = weight.detach();
  const RowwiseFp8 qx = quantize_rows(x2, e4m3, p2);
  const RowwiseFp8 qw = quantize_rows(w, e4m3, p2);
  record(*state, kIn, qx, p2);
  record(*state, kW, qw, p2);
  register_fp8_forward(state);  // statistics and the scope's bookkeeping; no scale update

  const DType act = input.dtype();
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  Tensor y = rowwise_gemm(qx, qw, /*transpose_b=*/true, act);
  if (bias.defined()) y = add(y, bias.detach().to(act));
  y = y.view(out_shape);
  if (!autograd::needs_grad(input, weight, bias)) return y;

  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const DType w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : kFloat32;
  // Saved for backward: x's FP8 copy scaled per column (rowwise), or x itself (rowwise-gw-hp:
  // the weight-gradient product reads it in high precision).
  RowwiseFp8 qx_cols;
  Tensor x_saved;
  if (need_w) {
    if (gw_hp)
      x_saved = x2;
    else
      qx_cols = quantize_columns(x2, p2);
  }
  return autograd::record(y, {input, weight, bias}, "Fp8RowwiseLinearBackward",
                          [=](const Tensor& grad) -> std::vector<Tensor> {
                            const Tensor dy2 = grad.reshape({rows, out_f}).contiguous();
                            Tensor dx, dw, db;
                            if (need_x) {
                              const RowwiseFp8 qdy = quantize_rows(dy2, e4m3, p2);
                              record(*state, kDy, qdy, p2);
                              // The weight read along N: per column (rowwise), or one scale
                              // (rowwise-gw-hp).
                              if (gw_hp)
                                dx =
                                    rowwise_gemm(qdy, quantize_tensorwise(w, e4m3, p2), false, act);
                              else
                                dx = rowwise_gemm(qdy, quantize_columns(w, p2), true, act);
                              dx = dx.view(x_shape);
                            }
                            if (need_w) {
                              if (gw_hp) {
                                dw = matmul(dy2.t(), x_saved);
                              } else {
                                const RowwiseFp8 qdy_cols = quantize_columns(dy2, p2);
                                if (!need_x) record(*state, kDy, qdy_cols, p2);
                                dw = rowwise_gemm(qdy_cols, qx_cols, true, w_dtype);
                              }
                              if (dw.dtype() != w_dtype) dw = dw.to(w_dtype);
                            }
                            if (need_b) db = sum(dy2.to(kFloat32), {0}).to(b_dtype);
                            return {dx, dw, db};
                          });
}

}  // namespace mantissa::fp8
