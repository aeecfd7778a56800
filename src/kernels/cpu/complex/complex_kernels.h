#pragma once
// Loops over complex64 / complex128 arrays (std::complex<float> / std::complex<double>, real
// and imaginary parts interleaved), behind the complex ops of src/ops/complex.cpp. Every
// array is contiguous; "real" arrays hold the component dtype (float32 for complex64,
// float64 for complex128). Plain scalar loops: complex support is for 32-true and 64-true
// models, where correctness matters more than speed (docs/complex.md).
#include <cstdint>

#include "mantissa/core/dtype.h"
#include "mantissa/core/shape.h"

namespace mantissa::kernels {

enum class ComplexBinaryOp { kAdd, kMul, kDiv };
// out[i] = a[i] + alpha * b[i], a[i] * b[i] or a[i] / b[i].
void complex_binary(DType dtype, ComplexBinaryOp op, const void* a, const void* b, void* out,
                    int64_t n, double alpha = 1.0);

// out[i] = z[i] * s for a real s.
void complex_scale(DType dtype, const void* z, double s, void* out, int64_t n);

// C[m x n] = A[m x k] * B[k x n], row-major.
void complex_gemm(DType dtype, int64_t m, int64_t n, int64_t k, const void* a, const void* b,
                  void* c);

enum class ComplexUnaryOp { kConj, kReal, kImag, kAbs, kAngle };
// kConj writes complex values; the others write the component dtype.
void complex_unary(DType dtype, ComplexUnaryOp op, const void* z, void* out, int64_t n);

// out[i] = re[i] + i * im[i]; re or im may be null (zero).
void complex_from_parts(DType dtype, const void* re, const void* im, void* out, int64_t n);

// The gradients of abs and angle for a real upstream g (PyTorch's formulas, 0 where z == 0):
// abs: g * z / |z|; angle: g * i z / |z|^2.
void complex_abs_backward(DType dtype, const void* g, const void* z, void* out, int64_t n);
void complex_angle_backward(DType dtype, const void* g, const void* z, void* out, int64_t n);

// Sums g (shape g_shape) down to out_shape, which broadcasts to g_shape (sum_to for complex).
void complex_sum_to(DType dtype, const void* g, const Shape& g_shape, void* out,
                    const Shape& out_shape);

}  // namespace mantissa::kernels
