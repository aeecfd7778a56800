// The engine of block-format products (block_format_products.h).
#include "gemm/block_format_products.h"

#include "kernels/cpu/mx/mx_gemm.h"

namespace mantissa::gemm::detail {
namespace {

namespace km = kernels::mx;

// The operand as the kernel's matrix V: V = X, or with `t` V = X^T (blocks along X's columns,
// or 16x16 tiles; the dispatcher checks).
km::MxOperandView view(const Operand& o, bool t) {
  km::MxOperandView v{};
  v.codes = static_cast<const uint8_t*>(o.data.data_ptr());
  v.scales = static_cast<const uint8_t*>(o.scales.data_ptr());
  v.element = *o.format == FormatId::kMxfp8E4m3
                  ? km::Element::kE4m3
                  : (*o.format == FormatId::kMxfp8E5m2 ? km::Element::kE5m2 : km::Element::kE2m1);
  v.nvfp4 = *o.format == FormatId::kNvfp4;
  v.rows = o.shape[0];
  v.cols = o.shape[1];
  v.transposed = t;
  v.blocks = o.blocks == formats::BlockAxis::kAlongColumns ? km::MxBlocks::kAlongColumns
                                                           : km::MxBlocks::kAlongRows;
  return v;
}

}  // namespace

Tensor block_format_product(const Operand& a, const Operand& b, const Tensor& bias,
                            DType out_dtype) {
  const int64_t M = a.transposed ? a.shape[1] : a.shape[0];
  const int64_t K = a.transposed ? a.shape[0] : a.shape[1];
  const int64_t N = b.transposed ? b.shape[0] : b.shape[1];
  const Tensor bias32 = bias.defined() ? bias.detach().to(kFloat32).contiguous() : Tensor();
  const float* bias_p = bias32.defined() ? bias32.data<float>() : nullptr;
  // V_a = op(A); V_b = op(B)^T, which is the stored B when B is read transposed.
  const km::MxOperandView va = view(a, a.transposed), vb = view(b, !b.transposed);
  const float alpha = a.scale_inv * b.scale_inv;
  if (out_dtype == kBFloat16) {  // rounded by the kernel, task by task
    Tensor out = empty({M, N}, kBFloat16);
    km::mx_gemm(va, vb, M, N, K, alpha, bias_p, static_cast<uint16_t*>(out.data_ptr()));
    return out;
  }
  Tensor out = empty({M, N}, kFloat32);
  km::mx_gemm(va, vb, M, N, K, alpha, bias_p, out.data<float>());
  return out_dtype == kFloat32 ? out : out.to(out_dtype);
}

}  // namespace mantissa::gemm::detail
