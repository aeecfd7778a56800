#include "mantissa/fp8/block_linear.h"

#include "fp8/scaled_linear.h"
#include "mantissa/fp8/block_scaling.h"

namespace mantissa::fp8 {
namespace {

// Float8BlockScaling's casts and products for scaled_linear: x and dy in 1x128 tiles, W in
// 128x128 blocks that serve y's and dx's products both ways.
struct BlockOps {
  using Cast = BlockFp8;
  struct Saved {
    BlockFp8 w;   // W's blocks, read the other way in dx's product
    BlockFp8 xt;  // x in 128x1 tiles of its columns: x^T's 1x128 tiles along M
  };
  static constexpr const char* kNodeName = "Fp8BlockLinearBackward";
  bool p2;
  float eps;

  BlockFp8 input(const Tensor& x2) const { return quantize_1x128(x2, p2, eps); }
  BlockFp8 weight(const Tensor& w) const { return quantize_128x128(w, p2, eps); }
  // The scale of the tile holding the largest amax.
  float scale_of(const BlockFp8& q, DType src) const {
    return block_scale_of(q.amax, src, p2, eps);
  }
  Tensor forward(const BlockFp8& qx, const BlockFp8& qw, const Tensor& bias, DType act) const {
    return block_gemm(qx, false, qw, true, bias, act);
  }
  // x quantized along M (the weight-gradient product's K) from the high-precision x: 1x128
  // tiles of x's rows cannot be read along its columns. The 128x1 tiles stay in x's layout.
  Saved save(const Tensor& x2, const Tensor&, const BlockFp8& qw, bool need_x, bool need_w) const {
    return {need_x ? qw : BlockFp8{}, need_w ? quantize_128x1(x2, p2, eps) : BlockFp8{}};
  }
  BlockFp8 grad_output(const Tensor& dy2) const { return quantize_1x128(dy2, p2, eps); }
  Tensor grad_input(const BlockFp8& qdy, const Saved& s, DType act) const {
    return block_gemm(qdy, false, s.w, false, Tensor(), act);
  }
  std::optional<BlockFp8> grad_output_t(const Tensor& dy2, bool) const {
    return quantize_128x1(dy2, p2, eps);
  }
  Tensor grad_weight(const std::optional<BlockFp8>& qdyt, const Tensor&, const Saved& s,
                     DType w_dtype) const {
    // dW = dy^T @ x, both read along M where they lie.
    return block_gemm(*qdyt, true, s.xt, false, Tensor(), w_dtype);
  }
};

}  // namespace

Tensor fp8_linear_block(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const std::shared_ptr<ScalingState>& state, const Recipe& recipe) {
  return scaled_linear(input, weight, bias, state,
                       BlockOps{.p2 = recipe.power_2_scales(), .eps = recipe.amax_epsilon});
}

}  // namespace mantissa::fp8
