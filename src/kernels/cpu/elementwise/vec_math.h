#pragma once
// Vectorised float32 math over arrays (exp, log, tanh, sigmoid, erf, GELU, SiLU), replacing one
// libm call per element in the elementwise ops, softmax and the losses. Each function handles any n
// (tails run through the same vector code, padded), so an element's result does not depend on
// where a block or thread boundary falls. Accuracy: within 2 ulp of the correctly rounded
// result for exp, log, tanh, sigmoid and erf, with IEEE special values (NaN propagates, exp
// overflows to inf and underflows through the subnormals to 0, log(0) = -inf, log(x<0) = NaN).
//
// The level is chosen once from simd_level() (AVX-512, else AVX2, else scalar); tests reach
// every level through vec_math_table().
#include <cstdint>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::vm {

// y may equal x (in place); otherwise the arrays must not overlap.
void exp_f32(const float* x, float* y, int64_t n);
void log_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);
void sigmoid_f32(const float* x, float* y, int64_t n);
// x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (torch's gelu, approximate='none').
void gelu_erf_f32(const float* x, float* y, int64_t n);
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated as x / (1 + exp(-2u)).
void gelu_tanh_f32(const float* x, float* y, int64_t n);
// Backward of the two GELUs: dx = g * gelu'(x) (dx may alias g or x).
void gelu_erf_backward_f32(const float* g, const float* x, float* dx, int64_t n);
void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n);
// SiLU, x sigmoid(x), and its backward dx = g s (1 + x (1 - s)) (dx may alias g or x).
void silu_f32(const float* x, float* y, int64_t n);
void silu_backward_f32(const float* g, const float* x, float* dx, int64_t n);
// y[i] = exp(x[i] - shift) and returns sum(y): the softmax numerator and its denominator in
// one pass. The sum is taken in 16 interleaved partial sums combined in a fixed tree, the same
// order on every level (deterministic for a given n).
float exp_shift_sum_f32(const float* x, float shift, float* y, int64_t n);
// Largest element, NaN if any element is NaN, -inf for n = 0 (exact on every level).
float max_f32(const float* x, int64_t n);

struct VecMathTable {
  void (*exp)(const float*, float*, int64_t);
  void (*log)(const float*, float*, int64_t);
  void (*tanh)(const float*, float*, int64_t);
  void (*sigmoid)(const float*, float*, int64_t);
  void (*erf)(const float*, float*, int64_t);
  void (*gelu_erf)(const float*, float*, int64_t);
  void (*gelu_tanh)(const float*, float*, int64_t);
  float (*exp_shift_sum)(const float*, float, float*, int64_t);
  float (*max)(const float*, int64_t);
  void (*gelu_erf_backward)(const float*, const float*, float*, int64_t);
  void (*gelu_tanh_backward)(const float*, const float*, float*, int64_t);
  void (*silu)(const float*, float*, int64_t);
  void (*silu_backward)(const float*, const float*, float*, int64_t);
};

// The kernels of `level` (kAvx512Bf16 runs the AVX-512 ones), or nullptr when this CPU cannot
// run them (for tests). The functions above use vec_math_table(simd_level()).
const VecMathTable* vec_math_table(SimdLevel level);

// Per-level tables, defined in vec_math.cpp, vec_math_avx2.cpp, vec_math_avx512.cpp.
extern const VecMathTable kVecMathScalar;
extern const VecMathTable kVecMathAvx2;
extern const VecMathTable kVecMathAvx512;

}  // namespace mantissa::kernels::vm
