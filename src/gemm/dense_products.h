#pragma once
// The CPU engines of dense products (dense_products.cpp). Each runs what it is given;
// src/gemm/dispatch.cpp chooses which one runs a product and checks the operands first.
// Operands are at least 2-D with broadcasting batch dims, read in place when contiguous or a
// transposed view (others are copied), detached.
#include "mantissa/core/tensor.h"

namespace mantissa::gemm::detail {

// a @ b (+ bias) into out (the broadcast shape, a's dtype) on the float64 kernel: any strides.
void f64_product(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out);
// The same on the native GEMM (f32, bf16, f16; it widens narrow operands while packing). out is
// in a's dtype, or float32 holding the products rounded through round_to.
void native_product(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                    DType round_to = kFloat32);
// The same on oneDNN (f16, and bf16 where oneDNN has no native bf16, widened to f32 first and
// rounded once).
void onednn_product(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out);
// float32 a (M, K) rows contiguous, M <= kernels::kDenseGemvMaxRows, against b (K, N) a
// Linear weight read in place (W = b^T row-major: b's stride(-2) is 1): the few-rows kernel
// (kernels/cpu/gemm/dense_gemv.h), which reads W once per input row at memory speed.
bool few_rows_product_fits(const Tensor& a, const Tensor& b, int64_t batch);
void few_rows_product(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out);

// float32 "medium" on oneDNN's native bf16 matmul: both operands rounded to bf16 in their own
// layouts, fp32 out, the bias added in fp32.
Tensor bf16_rounded_onednn(const Tensor& a, const Tensor& b, const Tensor& bias);
// float32 "high" for 2-D operands on oneDNN's native bf16 matmul: A as [hi | hi | lo] and B as
// [hi; lo; hi] along K, in their own layouts, one product over 3K, fp32 out, bias in fp32.
Tensor bf16x3_onednn(const Tensor& a, const Tensor& b, const Tensor& bias);

// float32 a and b split into `terms` (1 or 3) bf16 terms along K (kernels/cpu/gemm/
// bf16_split.h), contiguous, stored as `as` (bfloat16, or float32 holding the bf16 values).
struct Bf16Terms {
  Tensor a, b;
};
Bf16Terms bf16_terms(const Tensor& a, const Tensor& b, int terms, DType as);

// bfloat16 a @ b with the fp32 accumulator as the float32 result (out_shape: the broadcast
// shape), on oneDNN's native bf16 matmul or on the native GEMM.
Tensor onednn_bf16_accumulator(const Tensor& a, const Tensor& b, const Shape& out_shape);
Tensor native_bf16_accumulator(const Tensor& a, const Tensor& b, const Shape& out_shape);

// out (..., N) float32 += bias (N) float32, in fp32.
void add_bias_f32(Tensor& out, const Tensor& bias);

// alpha * (a @ b) + bias for 2-D bfloat16 operands on oneDNN's native bf16 matmul, scale and
// bias in its epilogue, rounded once to out_dtype (float32 or bfloat16). bias: undefined or
// float32/bfloat16 (N).
Tensor onednn_bf16_scaled(const Tensor& a, const Tensor& b, float alpha, const Tensor& bias,
                          DType out_dtype);

}  // namespace mantissa::gemm::detail
