#pragma once
// What matmul (ops/matmul.cpp) and linear (ops/linear.cpp) share: the dtype check and their
// graph-free products on the GEMM entry point (mantissa/gemm/gemm.h), float32 operands
// multiplied as float32_matmul_precision() says (the epilogue's default).
#include "mantissa/core/tensor.h"
#include "mantissa/gemm/gemm.h"

namespace mantissa::detail {

// Throws unless a and b share one floating dtype matmul supports (f64, f32, f16, bf16).
void check_matmul_dtypes(const char* op, const Tensor& a, const Tensor& b);

// a @ b (+ bias), recording nothing: a (..., M, K), b (..., K, N), same dtype, batch dims
// broadcast; bias undefined or (N), added in the fp32 accumulator before the single rounding.
Tensor matmul_nograd(const Tensor& a, const Tensor& b, const Tensor& bias = Tensor());

// matmul_nograd(a, b).to(kFloat32) for 2-D bfloat16 or float16 a and b, without the narrow
// result where the engine can round in its epilogue (a gradient whose next step widens it;
// docs/amp.md).
Tensor matmul_nograd_widened(const Tensor& a, const Tensor& b);

}  // namespace mantissa::detail
