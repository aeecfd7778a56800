#include "mantissa/fp8/rowwise_linear.h"

#include "fp8/scaled_linear.h"
#include "mantissa/fp8/rowwise.h"
#include "mantissa/ops/matmul.h"

namespace mantissa::fp8 {
namespace {

// torchao's rowwise casts and products for scaled_linear: E4M3 with one scale per row along
// each product's K; under rowwise-gw-hp the weight-gradient product stays in high precision.
struct RowwiseOps {
  using Cast = RowwiseFp8;
  // Saved for backward: W itself (quantized in backward), and x's FP8 copy scaled per column
  // (rowwise) or x itself (rowwise-gw-hp).
  struct Saved {
    Tensor w;
    RowwiseFp8 x_cols;
    Tensor x;
  };
  static constexpr const char* kNodeName = "Fp8RowwiseLinearBackward";
  bool p2;
  bool gw_hp;

  RowwiseFp8 input(const Tensor& x2) const { return quantize_rows(x2, kFloat8_e4m3fn, p2); }
  RowwiseFp8 weight(const Tensor& w) const { return quantize_rows(w, kFloat8_e4m3fn, p2); }
  // The scale the largest amax gets.
  float scale_of(const RowwiseFp8& q, DType) const {
    return torchao_scale(q.amax, fp8_max(kFloat8_e4m3fn), p2);
  }
  // The bias is added after the product's rounding, in the input's dtype, as torchao's (in the
  // product's epilogue).
  Tensor forward(const RowwiseFp8& qx, const RowwiseFp8& qw, const Tensor& bias, DType act) const {
    return rowwise_gemm(qx, qw, /*transpose_b=*/true, act, bias.defined() ? bias.to(act) : bias);
  }
  Saved save(const Tensor& x2, const Tensor& w, const RowwiseFp8&, bool, bool need_w) const {
    Saved s{.w = w};
    if (need_w) {
      if (gw_hp)
        s.x = x2;
      else
        s.x_cols = quantize_columns(x2, kFloat8_e4m3fn, p2);
    }
    return s;
  }
  RowwiseFp8 grad_output(const Tensor& dy2) const { return quantize_rows(dy2, kFloat8_e4m3fn, p2); }
  // The weight read along N: per column (rowwise), or one scale (rowwise-gw-hp).
  Tensor grad_input(const RowwiseFp8& qdy, const Saved& s, DType act) const {
    if (gw_hp) return rowwise_gemm(qdy, quantize_tensorwise(s.w, kFloat8_e4m3fn, p2), false, act);
    return rowwise_gemm(qdy, quantize_columns(s.w, kFloat8_e4m3fn, p2), true, act);
  }
  std::optional<RowwiseFp8> grad_output_t(const Tensor& dy2, bool) const {
    if (gw_hp) return std::nullopt;
    return quantize_columns(dy2, kFloat8_e4m3fn, p2);
  }
  Tensor grad_weight(const std::optional<RowwiseFp8>& qdyt, const Tensor& dy2, const Saved& s,
                     DType w_dtype) const {
    const Tensor dw = gw_hp ? matmul(dy2.t(), s.x) : rowwise_gemm(*qdyt, s.x_cols, true, w_dtype);
    return dw.dtype() != w_dtype ? dw.to(w_dtype) : dw;
  }
};

}  // namespace

Tensor fp8_linear_rowwise(const Tensor& input, const Tensor& weight, const Tensor& bias,
                          const std::shared_ptr<ScalingState>& state, const Recipe& recipe) {
  return scaled_linear(
      input, weight, bias, state,
      RowwiseOps{.p2 = recipe.power_2_scales(), .gw_hp = recipe.kind == RecipeKind::kRowwiseGwHp});
}

}  // namespace mantissa::fp8
