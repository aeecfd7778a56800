#pragma once
// out[r, j] += bias[j] over a contiguous (rows, n) matrix on the GPU (bias_add.cu), for the
// products cuBLASLt's bias epilogue does not cover (float64, and the cuBLAS fallback). Plain
// declarations: included by the .cu and by cuda_gemm.cpp.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// The sum is computed in fp32 (double for f64) and rounded once into out's type. On the
// current stream. type: f64, f32, f16 or bf16 (out and bias share it).
void launch_add_bias_rows(void* out, const void* bias, Scalar type, int64_t rows, int64_t n);

}  // namespace mantissa::cuda::detail
