// The engine of block-scaled FP8 products (fp8_block_products.h).
#include "gemm/fp8_block_products.h"

#include "kernels/cpu/fp8/fp8_block.h"
#include "mantissa/core/error.h"

namespace mantissa::gemm::detail {
namespace {

namespace kf = kernels::fp8;

// The operand as the kernel's matrix V: V = X (stored codes, contiguous or a transposed view)
// or, with `t`, V = X^T; its codes and scales read through their strides.
kf::BlockOperandView view(const Operand& o, bool t) {
  kf::BlockOperandView v{};
  v.codes = static_cast<const uint8_t*>(o.data.data_ptr());
  v.fp8 = o.data.dtype();
  v.scale_inv = o.scales.data<float>();
  v.row_stride = o.data.stride(t ? 1 : 0);
  v.col_stride = o.data.stride(t ? 0 : 1);
  const bool tiles = *o.format == FormatId::kE4m3Block1x128;
  v.tile_rows = tiles ? 1 : kf::kBlockLen;
  // A 1x128 operand is read along its rows only (the dispatcher refuses the other way).
  v.scale_row_stride = o.scales.stride(t ? 1 : 0);
  v.scale_col_stride = o.scales.stride(t ? 0 : 1);
  return v;
}

}  // namespace

Tensor fp8_block_product(const Operand& a, const Operand& b, const Tensor& bias, DType out_dtype) {
  const int64_t M = a.transposed ? a.data.size(1) : a.data.size(0);
  const int64_t K = a.transposed ? a.data.size(0) : a.data.size(1);
  const int64_t N = b.transposed ? b.data.size(0) : b.data.size(1);
  const Tensor bias32 = bias.defined() ? bias.detach().to(kFloat32).contiguous() : Tensor();
  // The kernel rounds to a 16-bit out_dtype itself; any other is converted from float32.
  const bool own = out_dtype == kFloat32 || out_dtype == kBFloat16 || out_dtype == kFloat16;
  Tensor out = empty({M, N}, own ? out_dtype : kFloat32);
  // V_a = op(A); V_b = op(B)^T, which is the stored B when B is read transposed.
  kf::block_scaled_gemm(view(a, a.transposed), view(b, !b.transposed), M, N, K,
                        bias32.defined() ? bias32.data<float>() : nullptr, out.data_ptr(),
                        out.dtype());
  return own ? out : out.to(out_dtype);
}

}  // namespace mantissa::gemm::detail
