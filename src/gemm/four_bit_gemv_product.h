#pragma once
// The 4-bit forward for few input rows (kernels/cpu/quant/four_bit_gemv.h): x @ W^T (+ bias) in
// x's dtype, W's codes decoded in registers. src/gemm/dispatch.cpp chooses when it runs.
#include "gemm/four_bit_products.h"

namespace mantissa::gemm::detail {

// x: contiguous 2-D float32, bfloat16 or float16; bias: undefined or (out_features) in x's dtype.
Tensor four_bit_gemv_forward(const Tensor& x, const FourBitWeight& w, const Tensor& bias);

}  // namespace mantissa::gemm::detail
