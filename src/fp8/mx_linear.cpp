#include "mantissa/fp8/mx_linear.h"

#include "fp8/scaled_linear.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/error.h"
#include "mantissa/gemm/gemm.h"

namespace mantissa::fp8 {
namespace {

namespace km = kernels::mx;

km::Element element_of(FormatId f) {
  if (f == FormatId::kMxfp8E4m3) return km::Element::kE4m3;
  if (f == FormatId::kMxfp8E5m2) return km::Element::kE5m2;
  return km::Element::kE2m1;
}

// The source a cast reads: float16 widened to float32 (exactly), contiguous.
Tensor source_of(const Tensor& x) {
  return (x.dtype() == kFloat16 ? x.detach().to(kFloat32) : x.detach()).contiguous();
}

km::E8m0Rounding kernel_rounding(formats::E8m0Rounding r) {
  return r == formats::E8m0Rounding::kFloor ? km::E8m0Rounding::kFloor : km::E8m0Rounding::kRceil;
}

// x quantized along its rows, or with `columns` x^T read from x as it lies (the column-wise
// copy without a transposed copy of the whole tensor first); with `stats`, the cast's
// statistics, counted as it encodes.
MxTensor encode_mx(const Tensor& x, FormatId format, formats::E8m0Rounding rounding, bool stats,
                   bool columns) {
  const Tensor src = source_of(x);
  const int64_t rows = src.size(0), cols = src.size(1);
  const int64_t q_rows = columns ? cols : rows, q_cols = columns ? rows : cols;
  const formats::BlockLayout l{.format = format, .rows = q_rows, .cols = q_cols};
  MxTensor q;
  q.format = format;
  q.shape = {q_rows, q_cols};
  q.codes = empty({l.code_bytes()}, kUInt8);
  q.scales = empty({l.scale_bytes()}, kUInt8);
  auto* codes = static_cast<uint8_t*>(q.codes.data_ptr());
  auto* scales = static_cast<uint8_t*>(q.scales.data_ptr());
  km::MxCastStats st;
  km::MxCastStats* out = stats ? &st : nullptr;
  const km::E8m0Rounding r = kernel_rounding(rounding);
  if (columns)
    km::mx_quantize_transposed(src.data_ptr(), src.dtype(), rows, cols, element_of(format), r,
                               codes, scales, simd_level(), out);
  else
    km::mx_quantize(src.data_ptr(), src.dtype(), rows, cols, element_of(format), r, codes, scales,
                    simd_level(), out);
  if (!stats) return q;
  q.amax = st.amax;
  q.scale = st.scale;
  q.counts = {rows * cols, st.saturated, st.flushed, st.peak};
  return q;
}

MxTensor quantize_mx_columns(const Tensor& x, FormatId format, formats::E8m0Rounding rounding,
                             bool stats = false) {
  return encode_mx(x, format, rounding, stats, true);
}

// The MX recipes' casts and products for scaled_linear: every operand blocked along its
// product's K, the row-wise and column-wise copies each quantized from the high-precision tensor.
struct MxOps {
  using Cast = MxTensor;
  struct Saved {
    MxTensor wt;  // W^T along N (dx's product)
    MxTensor xt;  // x^T along M (dW's product)
  };
  static constexpr const char* kNodeName = "MxLinearBackward";
  FormatId fwd;   // x and W
  FormatId grad;  // dy (E5M2 under HYBRID)
  formats::E8m0Rounding rounding;

  MxTensor input(const Tensor& x2) const { return quantize_mx(x2, fwd, rounding); }
  MxTensor weight(const Tensor& w) const { return quantize_mx(w, fwd, rounding); }
  // The multiplier of the block holding amax.
  float scale_of(const MxTensor& q, DType) const { return q.scale; }
  Tensor forward(const MxTensor& qx, const MxTensor& qw, const Tensor& bias, DType act) const {
    return mx_gemm(qx, qw, bias, act);
  }
  Saved save(const Tensor& x2, const Tensor& w, const MxTensor&, bool need_x, bool need_w) const {
    return {need_x ? quantize_mx_columns(w, fwd, rounding) : MxTensor{},
            need_w ? quantize_mx_columns(x2, fwd, rounding) : MxTensor{}};
  }
  MxTensor grad_output(const Tensor& dy2) const { return quantize_mx(dy2, grad, rounding); }
  Tensor grad_input(const MxTensor& qdy, const Saved& s, DType act) const {
    return mx_gemm(qdy, s.wt, Tensor(), act);
  }
  std::optional<MxTensor> grad_output_t(const Tensor& dy2, bool stats) const {
    return quantize_mx_columns(dy2, grad, rounding, stats);
  }
  Tensor grad_weight(const std::optional<MxTensor>& qdyt, const Tensor&, const Saved& s,
                     DType w_dtype) const {
    return mx_gemm(*qdyt, s.xt, Tensor(), w_dtype);
  }
};

}  // namespace

MxTensor quantize_mx(const Tensor& x, FormatId format, formats::E8m0Rounding rounding, bool stats) {
  MANTISSA_CHECK(format == FormatId::kMxfp8E4m3 || format == FormatId::kMxfp8E5m2 ||
                     format == FormatId::kMxfp4,
                 "mx scaling", "quantize_mx takes mxfp8-e4m3, mxfp8-e5m2 or mxfp4");
  MANTISSA_CHECK(
      x.defined() && !x.is_cuda() && x.dim() == 2, "mx scaling",
      "the MX recipes cast 2-D CPU tensors{}",
      x.defined() ? "; got " + shape_str(x.shape()) + " on " + x.device().str() : std::string());
  MANTISSA_CHECK(x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16,
                 "mx scaling", "expected float32, bfloat16 or float16, got {}", x.dtype().name());
  return encode_mx(x, format, rounding, stats, false);
}

Tensor mx_gemm(const MxTensor& a, const MxTensor& b, const Tensor& bias, DType out_dtype) {
  gemm::Epilogue e;
  e.bias = bias;
  e.out_dtype = out_dtype;
  return gemm::gemm(gemm::block_scaled(a.format, a.codes, a.scales, a.shape),
                    gemm::block_scaled(b.format, b.codes, b.scales, b.shape).t(), e);
}

Tensor fp8_linear_mx(const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const std::shared_ptr<ScalingState>& state, const Recipe& recipe) {
  const bool fp4 = recipe.kind == RecipeKind::kMxfp4;
  const FormatId fwd = fp4 ? FormatId::kMxfp4 : FormatId::kMxfp8E4m3;
  return scaled_linear(
      input, weight, bias, state,
      MxOps{.fwd = fwd,
            .grad = !fp4 && recipe.fp8_format == Format::kHybrid ? FormatId::kMxfp8E5m2 : fwd,
            .rounding = fp4 ? formats::E8m0Rounding::kFloor : formats::E8m0Rounding::kRceil});
}

}  // namespace mantissa::fp8
