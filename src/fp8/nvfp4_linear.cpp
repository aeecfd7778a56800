#include "mantissa/fp8/nvfp4_linear.h"

#include "fp8/scaled_linear.h"
#include "mantissa/fp8/nvfp4_scaling.h"

namespace mantissa::fp8 {
namespace {

// NVFP4BlockScaling's casts and products for scaled_linear, each technique on unless the
// recipe switches it off.
struct Nvfp4Ops {
  using Cast = Nvfp4Tensor;
  // The backward copies, made in forward from the high-precision tensors as TransformerEngine
  // makes both usages of a quantizer.
  struct Saved {
    Nvfp4Tensor wt;  // the weight's tiles read the other way, or W^T in 1x16 blocks along N
    Nvfp4Tensor xt;  // x^T along M, after the transform
  };
  static constexpr const char* kNodeName = "Nvfp4LinearBackward";
  bool rht;    // random Hadamard transform of dW's operands
  bool sr;     // stochastic rounding of the gradients
  bool tiles;  // 16x16 tiles for the weight

  Nvfp4Tensor input(const Tensor& x2) const { return quantize_nvfp4(x2, {}); }
  Nvfp4Tensor weight(const Tensor& w) const { return quantize_nvfp4(w, {tiles, false}); }
  // The per-tensor encode scale.
  float scale_of(const Nvfp4Tensor& q, DType) const { return 1.0f / q.tensor_scale; }
  Tensor forward(const Nvfp4Tensor& qx, const Nvfp4Tensor& qw, const Tensor& bias,
                 DType act) const {
    return nvfp4_gemm(qx, qw, true, bias, act);
  }
  Saved save(const Tensor& x2, const Tensor& w, const Nvfp4Tensor& qw, bool need_x,
             bool need_w) const {
    Saved s;
    if (need_w) s.xt = quantize_nvfp4_transposed(x2, rht, false, false);
    if (need_x) s.wt = tiles ? qw : quantize_nvfp4(w.t().contiguous(), {false, false, false});
    return s;
  }
  Nvfp4Tensor grad_output(const Tensor& dy2) const { return quantize_nvfp4(dy2, {false, sr}); }
  Tensor grad_input(const Nvfp4Tensor& qdy, const Saved& s, DType act) const {
    return nvfp4_gemm(qdy, s.wt, !tiles, Tensor(), act);
  }
  std::optional<Nvfp4Tensor> grad_output_t(const Tensor& dy2, bool stats) const {
    return quantize_nvfp4_transposed(dy2, rht, sr, stats);
  }
  Tensor grad_weight(const std::optional<Nvfp4Tensor>& qdyt, const Tensor&, const Saved& s,
                     DType w_dtype) const {
    return nvfp4_gemm(*qdyt, s.xt, true, Tensor(), w_dtype);
  }
};

}  // namespace

Tensor fp8_linear_nvfp4(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::shared_ptr<ScalingState>& state, const Recipe& recipe) {
  return scaled_linear(input, weight, bias, state,
                       Nvfp4Ops{.rht = !recipe.disable_rht,
                                .sr = !recipe.disable_stochastic_rounding,
                                .tiles = !recipe.disable_2d_quantization});
}

}  // namespace mantissa::fp8
