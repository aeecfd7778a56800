// Scalar level of the vector math (any x86-64) and the run-time choice of level.
#include "kernels/cpu/elementwise/vec_math.h"

#include <bit>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::vm {
namespace {

using V = float;
using VI = int32_t;
constexpr int kW = 1;
inline VI as_i(V v) { return std::bit_cast<VI>(v); }
inline V as_f(VI v) { return std::bit_cast<V>(v); }
inline V to_f(VI v) { return static_cast<V>(v); }
// Baseline x86-64 has no FMA instruction (std::fma would be a slow library call); the
// algorithms keep their error bounds with a separate multiply and add.
inline V fmadd(V a, V b, V c) { return a * b + c; }
inline bool all_lanes(bool m) { return m; }

#include "kernels/cpu/elementwise/vec_math_impl.h"

const VecMathTable& active() {
  static const VecMathTable* t = vec_math_table(simd_level());
  return *t;
}

}  // namespace

const VecMathTable kVecMathScalar = kTable;

const VecMathTable* vec_math_table(SimdLevel level) {
  if (level > simd_level()) return nullptr;
  switch (level) {
    case SimdLevel::kScalar:
      return &kVecMathScalar;
    case SimdLevel::kAvx2:
      return &kVecMathAvx2;
    case SimdLevel::kAvx512:
    case SimdLevel::kAvx512Bf16:
      return &kVecMathAvx512;
  }
  return nullptr;
}

void exp_f32(const float* x, float* y, int64_t n) { active().exp(x, y, n); }
void log_f32(const float* x, float* y, int64_t n) { active().log(x, y, n); }
void tanh_f32(const float* x, float* y, int64_t n) { active().tanh(x, y, n); }
void sigmoid_f32(const float* x, float* y, int64_t n) { active().sigmoid(x, y, n); }
void gelu_erf_f32(const float* x, float* y, int64_t n) { active().gelu_erf(x, y, n); }
void gelu_tanh_f32(const float* x, float* y, int64_t n) { active().gelu_tanh(x, y, n); }
float exp_shift_sum_f32(const float* x, float shift, float* y, int64_t n) {
  return active().exp_shift_sum(x, shift, y, n);
}

void gelu_erf_backward_f32(const float* g, const float* x, float* dx, int64_t n) {
  active().gelu_erf_backward(g, x, dx, n);
}
void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n) {
  active().gelu_tanh_backward(g, x, dx, n);
}

void silu_f32(const float* x, float* y, int64_t n) { active().silu(x, y, n); }
void silu_backward_f32(const float* g, const float* x, float* dx, int64_t n) {
  active().silu_backward(g, x, dx, n);
}

float max_f32(const float* x, int64_t n) { return active().max(x, n); }

}  // namespace mantissa::kernels::vm
