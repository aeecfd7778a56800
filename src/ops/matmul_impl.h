#pragma once
// The graph-free matmul engine shared by matmul (ops/matmul.cpp) and linear
// (ops/linear.cpp): dtype routing, layouts, broadcasting and the fused bias.
#include "mantissa/core/tensor.h"

namespace mantissa::detail {

// Throws unless a and b share one floating dtype matmul supports (f64, f32, f16, bf16).
void check_matmul_dtypes(const char* op, const Tensor& a, const Tensor& b);

// a @ b (+ bias), recording nothing. a: (..., M, K), b: (..., K, N), both at least 2-D with
// the same dtype; batch dims broadcast. bias: undefined or 1-D of size N in the same dtype,
// added in the fp32 accumulator before the single rounding. Returns a new contiguous tensor.
// Operands that are contiguous, or contiguous with the last two dims swapped (a .t() or
// .transpose(-1, -2) view), are read in place; others are copied first.
// float32 operands follow float32_matmul_precision() (mantissa/ops/matmul_precision.h).
Tensor matmul_nograd(const Tensor& a, const Tensor& b, const Tensor& bias = Tensor());
// The same, always at full precision ("highest"), whatever the setting.
Tensor matmul_exact(const Tensor& a, const Tensor& b, const Tensor& bias = Tensor());

// matmul_nograd(a, b).to(kFloat32) for 2-D bfloat16 or float16 a and b: float32 holding exactly
// the rounded low-precision product. Where the native AVX2 GEMM runs the product it rounds in
// its epilogue and stores fp32, so neither the narrow result nor the widening pass is made (a
// weight gradient under autocast, whose cached cast widens it next; docs/amp.md).
Tensor matmul_nograd_widened(const Tensor& a, const Tensor& b);

// a @ b for 2-D bfloat16 operands (contiguous or transposed views) with the fp32 accumulator
// returned unrounded as float32: on oneDNN's native bf16 dot products (AVX-512 BF16, AMX) where
// the CPU has them, else as the fp32 product of the widened operands (the same products, since
// a product of two bf16 values is exact in fp32). For callers whose operands are exactly bf16
// values and that finish the output themselves (fp8_gemm's scales).
Tensor matmul_bf16_fp32_out(const Tensor& a, const Tensor& b);

// alpha * (a @ b) + bias for 2-D bfloat16 operands, computed in the fp32 accumulator and
// rounded once to out_dtype (float32 or bfloat16), on oneDNN's native bf16 matmul with the scale
// and the bias in its epilogue: no fp32 result in memory. bias: undefined or 1-D of size N
// (float32 or bfloat16). Returns an undefined tensor where oneDNN has no native bf16 matmul:
// the caller then runs its own fp32 product and epilogue (fp8_gemm does).
Tensor matmul_bf16_scaled(const Tensor& a, const Tensor& b, float alpha, const Tensor& bias,
                          DType out_dtype);

}  // namespace mantissa::detail
