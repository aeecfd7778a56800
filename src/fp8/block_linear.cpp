#include "mantissa/fp8/block_linear.h"

#include <vector>

#include "mantissa/autograd/node.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/block_scaling.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::fp8 {
namespace {

constexpr int kIn = static_cast<int>(Role::kInput);
constexpr int kW = static_cast<int>(Role::kWeight);
constexpr int kDy = static_cast<int>(Role::kGradOutput);

// Statistics of a cast for `slot`: its largest tile amax, the scale that tile gets, its counts.
void record(ScalingState& state, int slot, const BlockFp8& q, DType src, const Recipe& recipe) {
  state.set_last_cast(slot, q.amax,
                      block_scale_of(q.amax, src, recipe.power_2_scales(), recipe.amax_epsilon));
  state.add_counts(slot, q.counts);
}

}  // namespace

Tensor fp8_linear_block(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::shared_ptr<ScalingState>& state, const Recipe& recipe) {
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  const bool p2 = recipe.power_2_scales();
  const float eps = recipe.amax_epsilon;
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  const Tensor w = weight.detach();
  const BlockFp8 qx = quantize_1x128(x2, p2, eps);
  const BlockFp8 qw = quantize_128x128(w, p2, eps);
  record(*state, kIn, qx, x2.dtype(), recipe);
  record(*state, kW, qw, w.dtype(), recipe);
  register_fp8_forward(state);  // statistics and the scope's bookkeeping; no scale update

  const DType act = input.dtype();
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  const Tensor y = block_gemm(qx, false, qw, true, bias.defined() ? bias.detach() : Tensor(), act)
                       .view(out_shape);
  if (!autograd::needs_grad(input, weight, bias)) return y;

  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const DType w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : kFloat32;
  // x^T quantized along M (the weight-gradient product's K) from the high-precision x: 1x128
  // tiles of x's rows cannot be read along its columns.
  BlockFp8 qxt;
  if (need_w) qxt = quantize_1x128_transposed(x2, p2, eps);
  const BlockFp8 qw_saved = need_x ? qw : BlockFp8{};
  return autograd::record(
      y, {input, weight, bias}, "Fp8BlockLinearBackward",
      [=](const Tensor& grad) -> std::vector<Tensor> {
        const Tensor dy2 = grad.reshape({rows, out_f}).contiguous();
        Tensor dx, dw, db;
        if (need_x) {
          const BlockFp8 qdy = quantize_1x128(dy2, p2, eps);
          record(*state, kDy, qdy, dy2.dtype(), recipe);
          dx = block_gemm(qdy, false, qw_saved, false, Tensor(), act).view(x_shape);
        }
        if (need_w) {
          const BlockFp8 qdyt = quantize_1x128_transposed(dy2, p2, eps);
          if (!need_x) record(*state, kDy, qdyt, dy2.dtype(), recipe);
          dw = block_gemm(qdyt, false, qxt, true, Tensor(), w_dtype);
        }
        if (need_b) db = sum(dy2.to(kFloat32), {0}).to(b_dtype);
        return {dx, dw, db};
      });
}

}  // namespace mantissa::fp8
