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

// Opens cuBLAS and cuBLASLt as the first GPU product does (they are opened then, not linked:
// cublas_api.h) and returns how many of the entry points it calls were found; 0 in a build
// without the CUDA backend. Needs no GPU. Throws when a library cannot be opened.
int cublas_entry_points_found();

}  // namespace mantissa::kernels::cuda
