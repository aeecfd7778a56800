// Scalar level of the relu kernels and the run-time choice of level.
#include "kernels/cpu/elementwise/relu_kernels.h"

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::cpu {
namespace {

template <class B>
bool is_nan(uint16_t b) {
  return (b & 0x7fffu) > B::inf;
}
template <class B>
uint16_t quiet(uint16_t b) {
  return static_cast<uint16_t>(b | B::quiet);
}

void forward_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

template <class B>
void forward_h16(const uint16_t* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t b = x[i];
    // Sign bit set or +0: x <= 0.
    y[i] = is_nan<B>(b) ? quiet<B>(b) : (b == 0 || (b & 0x8000u) ? uint16_t{0} : b);
  }
}

void backward_f32(const float* g, const float* x, float* gx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gx[i] = x[i] > 0.0f ? g[i] : 0.0f;
}

template <class B>
void backward_h16(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t b = x[i];
    const bool positive = b != 0 && (b & 0x8000u) == 0 && !is_nan<B>(b);
    gx[i] = positive ? (is_nan<B>(g[i]) ? quiet<B>(g[i]) : g[i]) : uint16_t{0};
  }
}

}  // namespace

const ReluKernels kReluScalar{forward_f32,  forward_h16<Bf16Bits>,  forward_h16<F16Bits>,
                              backward_f32, backward_h16<Bf16Bits>, backward_h16<F16Bits>};

const ReluKernels& relu_kernels() {
  static const ReluKernels& k = []() -> const ReluKernels& {
    const SimdLevel level = simd_level();
    if (level >= SimdLevel::kAvx512) return kReluAvx512;
    return level == SimdLevel::kAvx2 ? kReluAvx2 : kReluScalar;
  }();
  return k;
}

}  // namespace mantissa::kernels::cpu
