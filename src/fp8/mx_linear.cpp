#include "mantissa/fp8/mx_linear.h"

#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_stats.h"
#include "kernels/cpu/mx/transpose_tiles.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/error.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/gemm/gemm.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::fp8 {
namespace {

namespace km = kernels::mx;

constexpr int kIn = static_cast<int>(Role::kInput);
constexpr int kW = static_cast<int>(Role::kWeight);
constexpr int kDy = static_cast<int>(Role::kGradOutput);

km::Element element_of(FormatId f) {
  if (f == FormatId::kMxfp8E4m3) return km::Element::kE4m3;
  if (f == FormatId::kMxfp8E5m2) return km::Element::kE5m2;
  return km::Element::kE2m1;
}

// x^T of a 2-D tensor, contiguous (the column-wise copies are quantized from it).
Tensor transposed(const Tensor& x) {
  const Tensor c = x.contiguous();
  const int64_t rows = c.size(0), cols = c.size(1);
  Tensor t = empty({cols, rows}, c.dtype());
  if (c.dtype().itemsize() == 4)
    km::transpose_tiles(static_cast<const uint32_t*>(c.data_ptr()), rows, cols,
                        static_cast<uint32_t*>(t.data_ptr()));
  else if (c.dtype().itemsize() == 2)
    km::transpose_tiles(static_cast<const uint16_t*>(c.data_ptr()), rows, cols,
                        static_cast<uint16_t*>(t.data_ptr()));
  else
    t = c.t().contiguous();
  return t;
}

// quantize_mx(transposed(x), format, rounding, false) read from x as it lies (no statistics):
// the column-wise copy without a transposed copy of the whole tensor first.
MxTensor quantize_mx_columns(const Tensor& x, FormatId format, formats::E8m0Rounding rounding) {
  const Tensor src = (x.dtype() == kFloat16 ? x.detach().to(kFloat32) : x.detach()).contiguous();
  const int64_t rows = src.size(0), cols = src.size(1);
  const formats::BlockLayout l{.format = format, .rows = cols, .cols = rows};
  MxTensor q;
  q.format = format;
  q.shape = {cols, rows};
  q.codes = empty({l.code_bytes()}, kUInt8);
  q.scales = empty({l.scale_bytes()}, kUInt8);
  km::mx_quantize_transposed(src.data_ptr(), src.dtype(), rows, cols, element_of(format),
                             rounding == formats::E8m0Rounding::kFloor ? km::E8m0Rounding::kFloor
                                                                       : km::E8m0Rounding::kRceil,
                             static_cast<uint8_t*>(q.codes.data_ptr()),
                             static_cast<uint8_t*>(q.scales.data_ptr()));
  return q;
}

void record(ScalingState& state, int slot, const MxTensor& q) {
  state.set_last_cast(slot, q.amax, q.scale);
  state.add_counts(slot, q.counts);
}

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
  const Tensor src = (x.dtype() == kFloat16 ? x.detach().to(kFloat32) : x.detach()).contiguous();
  const int64_t rows = src.size(0), cols = src.size(1);
  const formats::BlockLayout l{.format = format, .rows = rows, .cols = cols};
  MxTensor q;
  q.format = format;
  q.shape = {rows, cols};
  q.codes = empty({l.code_bytes()}, kUInt8);
  q.scales = empty({l.scale_bytes()}, kUInt8);
  auto* codes = static_cast<uint8_t*>(q.codes.data_ptr());
  auto* scales = static_cast<uint8_t*>(q.scales.data_ptr());
  const auto r = rounding == formats::E8m0Rounding::kFloor ? km::E8m0Rounding::kFloor
                                                           : km::E8m0Rounding::kRceil;
  km::mx_quantize(src.data_ptr(), src.dtype(), rows, cols, element_of(format), r, codes, scales);
  if (!stats) return q;
  const km::MxCastStats st = km::mx_cast_stats(src.data_ptr(), src.dtype(), rows, cols,
                                               element_of(format), r, codes, scales);
  q.amax = st.amax;
  q.scale = st.scale;
  q.counts = {rows * cols, st.saturated, st.flushed, st.peak};
  return q;
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
  const int64_t out_f = weight.size(0), in_f = weight.size(1);
  const bool fp4 = recipe.kind == RecipeKind::kMxfp4;
  const FormatId fwd = fp4 ? FormatId::kMxfp4 : FormatId::kMxfp8E4m3;
  const FormatId grad = !fp4 && recipe.fp8_format == Format::kHybrid ? FormatId::kMxfp8E5m2 : fwd;
  const auto rounding = fp4 ? formats::E8m0Rounding::kFloor : formats::E8m0Rounding::kRceil;
  const int64_t rows = numel_of(Shape(input.shape().begin(), input.shape().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  const Tensor w = weight.detach();
  const MxTensor qx = quantize_mx(x2, fwd, rounding);
  const MxTensor qw = quantize_mx(w, fwd, rounding);
  record(*state, kIn, qx);
  record(*state, kW, qw);
  register_fp8_forward(state);  // statistics and the scope's bookkeeping; no scale update

  const DType act = input.dtype();
  Shape out_shape = input.shape();
  out_shape.back() = out_f;
  const Tensor y = mx_gemm(qx, qw, bias.defined() ? bias.detach() : Tensor(), act).view(out_shape);
  if (!autograd::needs_grad(input, weight, bias)) return y;

  const bool need_x = input.requires_grad(), need_w = weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = input.shape();
  const DType w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : kFloat32;
  // The column-wise copies, quantized along the backward products' K from the high-precision
  // tensors: W^T along N (dx), x^T along M (dW).
  const MxTensor qwt = need_x ? quantize_mx_columns(w, fwd, rounding) : MxTensor{};
  const MxTensor qxt = need_w ? quantize_mx_columns(x2, fwd, rounding) : MxTensor{};
  return autograd::record(
      y, {input, weight, bias}, "MxLinearBackward", [=](const Tensor& g) -> std::vector<Tensor> {
        const Tensor dy2 = g.reshape({rows, out_f}).contiguous();
        Tensor dx, dw, db;
        if (need_x) {
          const MxTensor qdy = quantize_mx(dy2, grad, rounding);
          record(*state, kDy, qdy);
          dx = mx_gemm(qdy, qwt, Tensor(), act).view(x_shape);
        }
        if (need_w) {
          // Recorded where dy's row-wise copy is not made: the statistics read the copy.
          const MxTensor qdyt = need_x ? quantize_mx_columns(dy2, grad, rounding)
                                       : quantize_mx(transposed(dy2), grad, rounding, true);
          if (!need_x) record(*state, kDy, qdyt);
          dw = mx_gemm(qdyt, qxt, Tensor(), w_dtype);
        }
        if (need_b) db = sum(dy2.to(kFloat32), {0}).to(b_dtype);
        return {dx, dw, db};
      });
}

}  // namespace mantissa::fp8
