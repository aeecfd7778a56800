#pragma once
// The FP8 encoder's integer arithmetic (docs/numerics.md, "FP8 formats"): one exact
// round-to-nearest-even step from float32 bits, independent of the FPU rounding mode and of
// FTZ/DAZ. Shared by the CPU's conversions (src/core/float8.cpp) and the GPU's casts
// (src/kernels/cuda/fp8/fp8_kernels.cu), so both give the same codes by construction. Plain
// C++ with no mantissa headers: nvcc compiles it for the device too.
#include <cstdint>

#if defined(__CUDACC__)
#define MANTISSA_FP8_ENCODE_FN __host__ __device__ constexpr inline
#else
#define MANTISSA_FP8_ENCODE_FN constexpr inline
#endif

namespace mantissa::fp8_encode {

inline constexpr uint32_t kNaNCode = 0x7f;

// Rounds m / 2^shift to the nearest integer, ties to even. shift is in [1, 31].
MANTISSA_FP8_ENCODE_FN uint32_t shift_rne(uint32_t m, uint32_t shift) {
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

// Magnitude code for |x| (bits a, not NaN) in a format with kMant mantissa bits and bias kBias.
// The result may exceed the largest finite code; the caller handles overflow.
template <int kMant, int kBias>
MANTISSA_FP8_ENCODE_FN uint32_t encode_magnitude(uint32_t a) {
  // Exponent field of the smallest normal FP8 value, as a float32 biased exponent.
  constexpr uint32_t kMinNormalExp = 128u - kBias;
  const uint32_t exp = a >> 23;
  if (exp >= kMinNormalExp) {
    // Normal range: drop the extra mantissa bits with RNE (a carry into the exponent is the
    // correct next binade), then rebias the exponent.
    constexpr uint32_t kDrop = 23 - kMant;
    const uint32_t r = a + ((1u << (kDrop - 1)) - 1u) + ((a >> kDrop) & 1u);
    return (r >> kDrop) - ((127u - kBias) << kMant);
  }
  // Subnormal range: count units of the subnormal quantum 2^(1 - bias - mant). Rounding up to
  // 2^mant units gives the smallest normal code, which is the right answer.
  const uint32_t m = (a & 0x7fffffu) | (exp != 0 ? 0x800000u : 0u);
  const uint32_t e = exp != 0 ? exp : 1u;  // float32 subnormals share the exponent of 2^-126
  const uint32_t shift = 151u - kBias - kMant - e;
  if (shift >= 25u) return 0;  // m < 2^24 <= half a quantum: rounds to zero
  return shift_rne(m, shift);
}

// The code of the float32 with bits x. Overflow (and infinity) gives +-kMaxCode when
// saturating, else sign | kNoSatOverflowCode. NaN gives 0x7F in both modes, its sign lost (CUDA's
// conversion canonicalises it to 0x7F first).
template <int kMant, int kBias, uint32_t kMaxCode, uint32_t kNoSatOverflowCode>
MANTISSA_FP8_ENCODE_FN uint8_t encode_bits(uint32_t x, bool saturate) {
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(kNaNCode);
  // Infinity rounds past the largest code, so it takes the overflow branch too.
  const uint32_t code = a == 0x7f800000u ? kMaxCode + 1 : encode_magnitude<kMant, kBias>(a);
  if (code > kMaxCode)
    return static_cast<uint8_t>(sign | (saturate ? kMaxCode : kNoSatOverflowCode));
  return static_cast<uint8_t>(sign | code);
}

// E4M3 "fn" has no infinity: overflow without saturation gives NaN with the sign kept.
MANTISSA_FP8_ENCODE_FN uint8_t e4m3_bits(uint32_t x, bool saturate) {
  return encode_bits<3, 7, 0x7eu, 0x7fu>(x, saturate);
}
MANTISSA_FP8_ENCODE_FN uint8_t e5m2_bits(uint32_t x, bool saturate) {
  return encode_bits<2, 15, 0x7bu, 0x7cu>(x, saturate);
}

}  // namespace mantissa::fp8_encode

#undef MANTISSA_FP8_ENCODE_FN
