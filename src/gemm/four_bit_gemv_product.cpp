// The 4-bit forward for few input rows (four_bit_gemv_product.h).
#include "gemm/four_bit_gemv_product.h"

#include "kernels/cpu/quant/four_bit_gemv.h"

namespace mantissa::gemm::detail {

Tensor four_bit_gemv_forward(const Tensor& x, const FourBitWeight& w, const Tensor& bias) {
  const DType cd = x.dtype();
  const int64_t rows = x.size(0);
  // The kernel reads fp32 activations and bias: widening them is exact and costs rows + 1
  // vectors, against a weight of out_features rows.
  const Tensor x32 = cd == kFloat32 ? x : x.to(kFloat32);
  const Tensor b32 = bias.defined() ? bias.to(kFloat32).contiguous() : Tensor();
  const kernels::quant::FourBitMatrix m = four_bit_matrix(w);
  Tensor y = empty({rows, m.rows}, cd);
  kernels::quant::four_bit_gemv(m, x32.data<float>(), rows, cd,
                                b32.defined() ? b32.data<float>() : nullptr, y.data_ptr(), cd);
  return y;
}

}  // namespace mantissa::gemm::detail
