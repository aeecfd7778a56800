#pragma once
// Matrix products of GPU tensors on cuBLASLt (float32, float16, bfloat16; fp32 accumulation)
// and cuBLAS (float64). What detail::matmul_nograd (ops/matmul.cpp) runs when its operands are
// on a GPU. Declared in every build; without the CUDA backend the function throws.
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::cuda {

// a @ b (+ bias) for GPU tensors on one device: a (..., M, K), b (..., K, N), both at least
// 2-D, same floating dtype (float64, float32, float16 or bfloat16); batch dims broadcast.
// bias: undefined, or 1-D of size N in the same dtype on the same device, added before the
// single rounding (cuBLASLt's bias epilogue) where cuBLASLt runs the product.
// Returns a new contiguous tensor of the operands' dtype on their device.
//
// An operand whose last two dims are row-major (stride(-1) == 1) or column-major
// (stride(-2) == 1, a .t() / .transpose(-1, -2) view) is read in place as CUBLAS_OP_N / _T;
// batch dims must collapse into one stride (contiguous or broadcast), else it is copied first.
// allow_tf32: float32 products on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32), as
// PyTorch does for float32_matmul_precision "high" and "medium"; false gives full fp32.
Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& bias, bool allow_tf32);

// The FP8 tensor-core product (compute capability >= 8.9): out (M, N) = alpha * (a @ b^T)
// (+ bias), rounded once to out_dtype (float32, float16 or bfloat16), with a (M, K) and b (N, K)
// contiguous FP8 codes (float8_e4m3fn / float8_e5m2, not both e5m2) on one GPU: both
// K-contiguous, the one layout cuBLASLt's FP8 kernels read. fp32 accumulation. bias: undefined,
// or 1-D of size N in out_dtype, float16 or bfloat16 only (the epilogue adds it before the
// rounding). Returns an undefined tensor where cuBLASLt offers no algorithm (the caller
// emulates the product).
Tensor fp8_matmul_tn(const Tensor& a, const Tensor& b, float alpha, DType out_dtype,
                     const Tensor& bias = Tensor());

// Opens cuBLAS and cuBLASLt as the first GPU product does (they are opened then, not linked:
// cublas_api.h) and returns how many of the entry points it calls were found; 0 in a build
// without the CUDA backend. Needs no GPU. Throws when a library cannot be opened.
int cublas_entry_points_found();

}  // namespace mantissa::kernels::cuda
