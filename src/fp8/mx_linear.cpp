#include "mantissa/fp8/mx_linear.h"

#include <cstring>

#include "fp8/scaled_linear.h"
#include "kernels/cpu/mx/hadamard.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/nvfp4_scaling.h"
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

// x quantized with blocks along its rows, or with `columns` along its columns (x^T's row
// blocks, kept in x's layout: mx_quantize_columns reads x as it lies and transposes nothing; the
// products read such an operand transposed); with `stats`, the cast's statistics, counted as it
// encodes.
MxTensor encode_mx(const Tensor& x, FormatId format, formats::E8m0Rounding rounding, bool stats,
                   bool columns) {
  const Tensor src = source_of(x);
  const int64_t rows = src.size(0), cols = src.size(1);
  const formats::BlockLayout l{
      .format = format,
      .rows = rows,
      .cols = cols,
      .blocks = columns ? formats::BlockAxis::kAlongColumns : formats::BlockAxis::kAlongRows};
  MxTensor q;
  q.format = format;
  q.shape = {rows, cols};
  q.blocks = l.blocks;
  q.codes = empty({l.code_bytes()}, kUInt8);
  q.scales = empty({l.scale_bytes()}, kUInt8);
  auto* codes = static_cast<uint8_t*>(q.codes.data_ptr());
  auto* scales = static_cast<uint8_t*>(q.scales.data_ptr());
  km::MxCastStats st;
  km::MxCastStats* out = stats ? &st : nullptr;
  const km::E8m0Rounding r = kernel_rounding(rounding);
  if (columns)
    km::mx_quantize_columns(src.data_ptr(), src.dtype(), rows, cols, element_of(format), r, codes,
                            scales, simd_level(), out);
  else
    km::mx_quantize(src.data_ptr(), src.dtype(), rows, cols, element_of(format), r, codes, scales,
                    simd_level(), out);
  if (!stats) return q;
  q.amax = st.amax;
  q.scale = st.scale;
  q.counts = {rows * cols, st.saturated, st.flushed, st.peak};
  return q;
}

// A backward operand of mxfp4 under Tseng et al.'s switches: x's rows (with `columns`, x^T's)
// along the product's K, in row blocks: the transform and the stochastic rounding's draws run
// along x^T's rows, so x^T is made first (a transform of x's columns, or a transposed copy); where
// `rht`, after the 16-point random Hadamard transform along K (the rows zero-padded to whole
// transform blocks, kernels/cpu/mx/hadamard.h); rounded stochastically after the 3/4 pre-scale
// where `sr` (kernels/cpu/mx/mxfp4_sr.h: one draw of the stream, tensor scale 4/3), else to nearest
// as the recipe's other casts. The statistics are the cast's, of the transformed values where
// `rht`, over the tensor's own elements. One of `rht` and `sr` is set (without both the recipe
// casts as torchao does).
MxTensor encode_mxfp4_backward(const Tensor& x, bool columns, bool rht, bool sr, bool stats) {
  const Tensor src = source_of(x);
  const int64_t rows = src.size(0), cols = src.size(1);
  Tensor along_k;  // the operand's rows, contiguous, float32 or bfloat16
  if (rht && columns) {
    along_k = empty({cols, km::rht_padded(rows)}, kFloat32);
    km::rht_transpose(src.data_ptr(), src.dtype(), rows, cols, along_k.data<float>());
  } else if (rht) {
    const int64_t padded = km::rht_padded(cols);
    along_k = zeros({rows, padded}, kFloat32);
    const Tensor f = src.to(kFloat32).contiguous();
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(along_k.data<float>() + r * padded, f.data<float>() + r * cols,
                  static_cast<size_t>(cols) * sizeof(float));
    km::rht_blocks(along_k.data<float>(), rows * padded);
  } else {  // sr
    along_k = columns ? src.t().contiguous() : src;
  }
  MxTensor q;
  if (!sr) {
    q = encode_mx(along_k, FormatId::kMxfp4, formats::E8m0Rounding::kFloor, stats, false);
  } else {
    const int64_t q_rows = along_k.size(0), q_cols = along_k.size(1);
    const formats::BlockLayout l{.format = FormatId::kMxfp4, .rows = q_rows, .cols = q_cols};
    q.format = FormatId::kMxfp4;
    q.shape = {q_rows, q_cols};
    q.codes = empty({l.code_bytes()}, kUInt8);
    q.scales = empty({l.scale_bytes()}, kUInt8);
    q.tensor_scale = km::kMxfp4SrTensorScale;
    const SrStream draw = next_sr_draw();
    km::MxCastStats st;
    km::mxfp4_quantize_sr(along_k.data_ptr(), along_k.dtype(), q_rows, q_cols, draw.seed,
                          draw.offset, static_cast<uint8_t*>(q.codes.data_ptr()),
                          static_cast<uint8_t*>(q.scales.data_ptr()), simd_level(),
                          stats ? &st : nullptr);
    if (stats) {
      q.amax = st.amax;
      q.scale = st.scale;
      q.counts = {0, st.saturated, st.flushed, st.peak};
    }
  }
  if (stats) q.counts.total = rows * cols;
  return q;
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
  // mxfp4 only: the backward products' operands rounded stochastically (after the 3/4
  // pre-scale), and transformed along their K by the random Hadamard transform.
  bool sr = false;
  bool rht = false;

  // A backward operand along its product's K: x's rows or, `columns`, x^T's (to nearest: x's
  // column blocks, which the products read transposed).
  MxTensor backward(const Tensor& x, FormatId format, bool columns, bool stats) const {
    if (!sr && !rht) return encode_mx(x, format, rounding, stats, columns);
    return encode_mxfp4_backward(x, columns, rht, sr, stats);
  }

  MxTensor input(const Tensor& x2) const { return quantize_mx(x2, fwd, rounding); }
  MxTensor weight(const Tensor& w) const { return quantize_mx(w, fwd, rounding); }
  // The multiplier of the block holding amax.
  float scale_of(const MxTensor& q, DType) const { return q.scale; }
  Tensor forward(const MxTensor& qx, const MxTensor& qw, const Tensor& bias, DType act) const {
    return mx_gemm(qx, qw, bias, act);
  }
  Saved save(const Tensor& x2, const Tensor& w, const MxTensor&, bool need_x, bool need_w) const {
    return {need_x ? backward(w, fwd, true, false) : MxTensor{},
            need_w ? backward(x2, fwd, true, false) : MxTensor{}};
  }
  MxTensor grad_output(const Tensor& dy2) const {
    if (!sr && !rht) return quantize_mx(dy2, grad, rounding);
    return backward(dy2, grad, false, true);
  }
  Tensor grad_input(const MxTensor& qdy, const Saved& s, DType act) const {
    return mx_gemm(qdy, s.wt, Tensor(), act);
  }
  std::optional<MxTensor> grad_output_t(const Tensor& dy2, bool stats) const {
    return backward(dy2, grad, true, stats);
  }
  Tensor grad_weight(const std::optional<MxTensor>& qdyt, const Tensor&, const Saved& s,
                     DType w_dtype) const {
    return mx_gemm(*qdyt, s.xt, Tensor(), w_dtype);
  }
};

}  // namespace

namespace {

void check_mx_source(const Tensor& x, FormatId format) {
  MANTISSA_CHECK(format == FormatId::kMxfp8E4m3 || format == FormatId::kMxfp8E5m2 ||
                     format == FormatId::kMxfp4,
                 "mx scaling", "quantize_mx takes mxfp8-e4m3, mxfp8-e5m2 or mxfp4");
  MANTISSA_CHECK(
      x.defined() && !x.is_cuda() && x.dim() == 2, "mx scaling",
      "the MX recipes cast 2-D CPU tensors{}",
      x.defined() ? "; got " + shape_str(x.shape()) + " on " + x.device().str() : std::string());
  MANTISSA_CHECK(x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16,
                 "mx scaling", "expected float32, bfloat16 or float16, got {}", x.dtype().name());
}

}  // namespace

MxTensor quantize_mx(const Tensor& x, FormatId format, formats::E8m0Rounding rounding, bool stats) {
  check_mx_source(x, format);
  return encode_mx(x, format, rounding, stats, false);
}

MxTensor quantize_mx_columns(const Tensor& x, FormatId format, formats::E8m0Rounding rounding,
                             bool stats) {
  check_mx_source(x, format);
  return encode_mx(x, format, rounding, stats, true);
}

Tensor mx_gemm(const MxTensor& a, const MxTensor& b, const Tensor& bias, DType out_dtype) {
  gemm::Epilogue e;
  e.bias = bias;
  e.out_dtype = out_dtype;
  // The stored matrix as a product operand, read transposed where `t`.
  const auto operand = [](const MxTensor& q, bool t) {
    if (q.blocks == formats::BlockAxis::kAlongRows) {
      const gemm::Operand o =
          gemm::block_scaled(q.format, q.codes, q.scales, q.shape, q.tensor_scale);
      return t ? o.t() : o;
    }
    gemm::Operand o = gemm::block_scaled_columns(q.format, q.codes, q.scales, q.shape);
    o.scale_inv = q.tensor_scale;
    return t ? o.t() : o;
  };
  // Each operand as its matrix along K: row blocks as stored, column blocks transposed.
  const bool a_columns = a.blocks == formats::BlockAxis::kAlongColumns;
  const bool b_columns = b.blocks == formats::BlockAxis::kAlongColumns;
  return gemm::gemm(operand(a, a_columns), operand(b, !b_columns), e);
}

Tensor fp8_linear_mx(const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const std::shared_ptr<ScalingState>& state, const Recipe& recipe) {
  const bool fp4 = recipe.kind == RecipeKind::kMxfp4;
  const FormatId fwd = fp4 ? FormatId::kMxfp4 : FormatId::kMxfp8E4m3;
  return scaled_linear(
      input, weight, bias, state,
      MxOps{.fwd = fwd,
            .grad = !fp4 && recipe.fp8_format == Format::kHybrid ? FormatId::kMxfp8E5m2 : fwd,
            .rounding = fp4 ? formats::E8m0Rounding::kFloor : formats::E8m0Rounding::kRceil,
            .sr = fp4 && recipe.enable_stochastic_rounding,
            .rht = fp4 && recipe.enable_rht});
}

}  // namespace mantissa::fp8
