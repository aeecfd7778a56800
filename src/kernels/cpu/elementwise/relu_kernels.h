#pragma once
// Internal: relu and its gradient over contiguous f32 and bf16 arrays, bit-identical to the
// generic pointwise path (ops/activation.cpp): relu(x) = x <= 0 ? +0 : x (NaN passes),
// grad = x > 0 ? g : +0, and a bf16 or f16 NaN comes out quiet, as the fp32 round trip makes it.
// bf16 and f16 are handled as bits (a sign test and a select), with no widening at all.
#include <cstdint>

namespace mantissa::kernels::cpu {

// A 16-bit float format as bits: NaN is (b & 0x7fff) > kInf, and a quiet NaN has kQuiet set.
template <uint16_t kInf, uint16_t kQuiet>
struct Float16Bits {
  static constexpr uint16_t inf = kInf, quiet = kQuiet;
};
using Bf16Bits = Float16Bits<0x7f80, 0x0040>;  // 8 exponent bits, 7 mantissa bits
using F16Bits = Float16Bits<0x7c00, 0x0200>;   // 5 exponent bits, 10 mantissa bits

struct ReluKernels {
  void (*forward_f32)(const float* x, float* y, int64_t n);
  void (*forward_bf16)(const uint16_t* x, uint16_t* y, int64_t n);
  void (*forward_f16)(const uint16_t* x, uint16_t* y, int64_t n);
  void (*backward_f32)(const float* g, const float* x, float* gx, int64_t n);
  void (*backward_bf16)(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t n);
  void (*backward_f16)(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t n);
};

extern const ReluKernels kReluScalar;
extern const ReluKernels kReluAvx2;
extern const ReluKernels kReluAvx512;  // AVX-512 F+BW

// AVX-512 when cpu_features() has it (after MANTISSA_DISABLE_SIMD), else AVX2, else scalar.
const ReluKernels& relu_kernels();

}  // namespace mantissa::kernels::cpu
