#include "mantissa/fp8/nvfp4_linear.h"

#include <vector>

#include "mantissa/autograd/node.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/nvfp4_scaling.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::fp8 {
namespace {

constexpr int kIn = static_cast<int>(Role::kInput);
constexpr int kW = static_cast<int>(Role::kWeight);
constexpr int kDy = static_cast<int>(Role::kGradOutput);

// Statistics of a cast for `slot`: its amax, its per-tensor encode scale, its counts.
void record(ScalingState& state, int slot, const Nvfp4Tensor& q) {
  state.set_last_cast(slot, q.amax, 1.0f / q.tensor_scale);
  state.add_counts(slot, q.counts);
}

}  // namespace

Tensor fp8_linear_nvfp4(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::shared_ptr<ScalingState>& state, const Recipe& recipe) {
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  const bool rht = !recipe.disable_rht, sr = !recipe.disable_stochastic_rounding;
  const bool tiles = !recipe.disable_2d_quantization;
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  const Tensor w = weight.detach();
  const Nvfp4Tensor qx = quantize_nvfp4(x2, {});
  const Nvfp4Tensor qw = quantize_nvfp4(w, {tiles, false});
  record(*state, kIn, qx);
  record(*state, kW, qw);
  register_fp8_forward(state);  // statistics and the scope's bookkeeping; no scale update

  const DType act = input.dtype();
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  const Tensor y =
      nvfp4_gemm(qx, qw, true, bias.defined() ? bias.detach() : Tensor(), act).view(out_shape);
  if (!autograd::needs_grad(input, weight, bias)) return y;

  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const DType w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : kFloat32;
  // The backward copies, made now from the high-precision tensors as TransformerEngine makes
  // both usages of a quantizer: x^T along M for the weight gradient; for dx the weight's tiles,
  // read the other way, or W^T in 1x16 blocks along N.
  Nvfp4Tensor qxt, qwt;
  if (need_w) qxt = quantize_nvfp4_transposed(x2, rht, false, false);
  if (need_x) qwt = tiles ? qw : quantize_nvfp4(w.t().contiguous(), {false, false, false});
  return autograd::record(y, {input, weight, bias}, "Nvfp4LinearBackward",
                          [=](const Tensor& grad) -> std::vector<Tensor> {
                            const Tensor dy2 = grad.reshape({rows, out_f}).contiguous();
                            Tensor dx, dw, db;
                            if (need_x) {
                              const Nvfp4Tensor qdy = quantize_nvfp4(dy2, {false, sr});
                              record(*state, kDy, qdy);
                              dx = nvfp4_gemm(qdy, qwt, !tiles, Tensor(), act).view(x_shape);
                            }
                            if (need_w) {
                              const Nvfp4Tensor qdyt =
                                  quantize_nvfp4_transposed(dy2, rht, sr, !need_x);
                              if (!need_x) record(*state, kDy, qdyt);
                              dw = nvfp4_gemm(qdyt, qxt, true, Tensor(), w_dtype);
                            }
                            if (need_b) db = sum(dy2.to(kFloat32), {0}).to(b_dtype);
                            return {dx, dw, db};
                          });
}

}  // namespace mantissa::fp8
