// The int8 row-wise product (int8_products.h).
#include "gemm/int8_products.h"

#include "kernels/cpu/quant/int8_epilogue.h"
#include "kernels/cpu/quant/int8_rowwise.h"

namespace mantissa::gemm::detail {

Tensor int8_rowwise_product(const Operand& a, const Operand& b, const Tensor& addend,
                            const Tensor& bias, DType out_dtype) {
  const Tensor ac = a.data.contiguous(), bc = b.data.contiguous();
  const int64_t rows = ac.size(0), n = bc.size(0), k = ac.size(1);
  const Tensor sa = a.scales.contiguous().to(kFloat32), sb = b.scales.contiguous().to(kFloat32);
  const Tensor acc = empty({rows, n}, kInt32);  // every element written by the product
  kernels::quant::int8_gemm_nt(ac.data<int8_t>(), bc.data<int8_t>(), rows, n, k,
                               acc.data<int32_t>());
  const Tensor add = addend.defined() ? addend.contiguous() : Tensor();
  const Tensor b32 = bias.defined() ? bias.detach().to(kFloat32).contiguous() : Tensor();
  const float* add_p = add.defined() ? add.data<float>() : nullptr;
  const float* bias_p = b32.defined() ? b32.data<float>() : nullptr;
  Tensor y = empty({rows, n}, out_dtype);
  if (out_dtype == kFloat32) {
    kernels::quant::int8_dequant_epilogue(acc.data<int32_t>(), sa.data<float>(), sb.data<float>(),
                                          add_p, bias_p, rows, n, y.data<float>());
  } else {
    kernels::quant::int8_dequant_epilogue_to_half(acc.data<int32_t>(), sa.data<float>(),
                                                  sb.data<float>(), add_p, bias_p, rows, n,
                                                  out_dtype, static_cast<uint16_t*>(y.data_ptr()));
  }
  return y;
}

}  // namespace mantissa::gemm::detail
