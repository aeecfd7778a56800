#pragma once
// The scalar arithmetic of the block formats (MXFP8, MXFP4, NVFP4; docs/mx_formats.md), one
// element or one block at a time. Each step is the float32 operation torchao's CPU reference
// performs (torchao.prototype.mx_formats: to_mx, nvfp4_quantize, f32_to_f4_unpacked), so the
// codes and scales equal its bytes; the SIMD paths (mx_rows_*_avx2.cpp, mx_columns_*_avx2.cpp,
// mx_cast_avx512.cpp and the nvfp4_*_avx2.cpp, nvfp4_cast_avx512.cpp) give the same bits, which
// tests/formats checks. Shared by the scalar reference and the SIMD tails.
#include <bit>
#include <cmath>
#include <cstdint>

#include "core/fp8_encode.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::mx {

// The element format of a block format's codes.
enum class Element : uint8_t {
  kE4m3,  // FP8 E4M3 "fn" (MXFP8), one byte per element
  kE5m2,  // FP8 E5M2 (MXFP8), one byte per element
  kE2m1,  // FP4 E2M1 (MXFP4, NVFP4), two per byte, the even element in the low nibble
};

// How an MX block's E8M0 scale is taken from the block's amax (torchao's ScaleCalculationMode).
enum class E8m0Rounding : uint8_t {
  // 2^(floor(log2(amax)) - emax_elem): the OCP MX spec v1.0 (section 6.3) and torchao's
  // default for to_mx. Values whose mantissa exceeds the element's largest saturate.
  kFloor,
  // 2^ceil(log2(amax / elem_max)), exactly, as cuBLAS, TransformerEngine and Blackwell's
  // cvt.rp.satfinite.ue8m0 do: no element saturates.
  kRceil,
};

// Which way a stored matrix's blocks lie (formats::BlockAxis): 1 x block runs of a row, scales
// [rows][ceil(cols / block)]; or block x 1 runs down a column, scales [ceil(rows / block)][cols].
enum class MxBlocks : uint8_t { kAlongRows, kAlongColumns };

inline constexpr int64_t kMxBlock = 32;     // elements per E8M0 scale (MX spec: k = 32)
inline constexpr int64_t kNvfp4Block = 16;  // elements per E4M3 scale in NVFP4
inline constexpr uint8_t kE8m0Nan = 0xFF;   // the E8M0 code of a block whose amax is NaN
inline constexpr float kE2m1Max = 6.0f;
inline constexpr float kE4m3Max = 448.0f;
inline constexpr float kE5m2Max = 57344.0f;
// NVFP4's per-tensor scale is amax / (448 * 6): the E4M3 block scales then reach 448.
inline constexpr float kNvfp4TensorScaleDivisor = kE4m3Max * kE2m1Max;

// Largest finite value and the exponent of its largest power of two (emax_elem).
struct ElementLimits {
  float max;
  int max_pow2;
};
constexpr ElementLimits element_limits(Element e) {
  switch (e) {
    case Element::kE4m3:
      return {kE4m3Max, 8};
    case Element::kE5m2:
      return {kE5m2Max, 15};
    case Element::kE2m1:
      break;
  }
  return {kE2m1Max, 2};
}

// Bytes of the codes of n consecutive elements (a row).
constexpr int64_t code_bytes(Element e, int64_t n) { return e == Element::kE2m1 ? (n + 1) / 2 : n; }

namespace scalar {

inline uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
inline float float_of(uint32_t b) { return std::bit_cast<float>(b); }
inline constexpr uint32_t kQuietNan = 0x7FC00000u;
// The NaN torch.max gives for a whole tensor holding NaN (its vector maximum ORs an all-ones
// mask into NaN lanes); a block's amax along the last dimension is kQuietNan.
inline constexpr uint32_t kTensorAmaxNan = 0xFFFFFFFFu;

// Element i of a float32 or bfloat16 buffer.
inline float load(const void* src, DType dtype, int64_t i) {
  if (dtype == kFloat32) return static_cast<const float*>(src)[i];
  return bf16_bits_to_float(static_cast<const uint16_t*>(src)[i]);
}

// max |x| over n elements; NaN (positive, quiet) when any is NaN, as torch.amax propagates it.
inline float block_amax(const void* src, DType dtype, int64_t begin, int64_t n) {
  float m = 0.0f;
  bool nan = false;
  for (int64_t i = begin; i < begin + n; ++i) {
    const float a = std::fabs(load(src, dtype, i));
    nan |= a != a;
    m = a > m ? a : m;
  }
  return nan ? float_of(kQuietNan) : m;
}

// --- E8M0 block scales --------------------------------------------------------------------

// kFloor: the biased exponent of amax less emax_elem, clamped to [-127, 128] before biasing;
// NaN amax gives 0xFF. An infinite amax gives 255 - 127 - emax_elem (a finite scale).
inline uint8_t e8m0_floor(float amax, int max_pow2) {
  if (amax != amax) return kE8m0Nan;
  int e = static_cast<int>((bits_of(amax) >> 23) & 0xFFu) - 127 - max_pow2;
  e = e < -127 ? -127 : (e > 128 ? 128 : e);
  return static_cast<uint8_t>(e + 127);
}

// kRceil: ceil(log2(amax / elem_max)) exactly, clamped to [-127, 127]; NaN gives 0xFF, an
// infinite ratio 0xFE (satfinite).
inline uint8_t e8m0_rceil(float amax, float elem_max) {
  const float d = amax / elem_max;
  if (d != d) return kE8m0Nan;
  if (std::isinf(d)) return 0xFE;
  const uint32_t b = bits_of(d);
  const uint32_t exp = b >> 23;  // d >= 0
  const uint32_t mant = b & 0x7FFFFFu;
  int e;
  if (b == 0)
    e = -127;  // log2(0) = -inf, clamped
  else if (exp == 0)
    e = static_cast<int>(std::bit_width(mant - 1)) - 149;  // d = mant * 2^-149
  else
    e = static_cast<int>(exp) - 127 + (mant != 0 ? 1 : 0);
  e = e < -127 ? -127 : (e > 127 ? 127 : e);
  return static_cast<uint8_t>(e + 127);
}

inline uint8_t e8m0_scale(float amax, Element e, E8m0Rounding r) {
  const ElementLimits lim = element_limits(e);
  return r == E8m0Rounding::kFloor ? e8m0_floor(amax, lim.max_pow2) : e8m0_rceil(amax, lim.max);
}

// The value of an E8M0 code: 2^(code - 127) (2^-127 is a float32 subnormal), NaN for 0xFF.
inline float e8m0_value(uint8_t code) {
  if (code == kE8m0Nan) return float_of(kQuietNan);
  return code == 0 ? 0x1p-127f : float_of(static_cast<uint32_t>(code) << 23);
}

// What kFloor divides a block by: the scale's value, at least 2^-126 (torchao clamps to the
// smallest normal); 0xFF gives infinity (finite elements become ±0, NaN stays NaN).
inline float floor_divisor(uint8_t code) {
  const float s = float_of(static_cast<uint32_t>(code) << 23);
  return s < 0x1p-126f ? 0x1p-126f : s;
}
// The same division as a multiplication by an exact power of two (or 0 for 0xFF): x / d and
// x * (1/d) round the same exact value, so the SIMD paths multiply.
inline float floor_reciprocal(uint8_t code) {
  if (code == kE8m0Nan) return 0.0f;
  if (code == 0) return 0x1p126f;
  return code == 254 ? 0x1p-127f : float_of(static_cast<uint32_t>(254 - code) << 23);
}

// What kRceil multiplies a block by: 2^(127 - code), except 1 for code 0 and 2^-127 for an
// infinite ratio (TransformerEngine's exp2f_rcp); NaN (the ratio itself) for 0xFF.
inline float rceil_multiplier(uint8_t code, float amax, float elem_max) {
  if (code == kE8m0Nan) return amax / elem_max;
  if (code == 0) return 1.0f;
  return code == 254 ? 0x1p-127f : float_of(static_cast<uint32_t>(254 - code) << 23);
}

// --- element codes ------------------------------------------------------------------------

// FP8 code of y, |y| <= the format's max or NaN (the caller clamped): round to nearest even;
// NaN gives 0x7F with y's sign (torch's cast).
inline uint8_t fp8_code(float y, Element e) {
  const uint32_t b = bits_of(y);
  const uint32_t sign = (b >> 24) & 0x80u;
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);
  const uint32_t mag = e == Element::kE4m3 ? fp8_encode::encode_magnitude<3, 7>(a)
                                           : fp8_encode::encode_magnitude<2, 15>(a);
  return static_cast<uint8_t>(sign | mag);
}

// E2M1 code of v (sign in bit 3) as torchao's f32_to_f4_unpacked computes it: |v| >= 6
// saturates to 7 (infinity too); below 1 the subnormal grid by adding 2^22 (FPU round to
// nearest even); else integer RNE on the float32 bits. NaN takes that last branch, which gives
// 3 for a quiet NaN (torch's answer, kept for bit equality).
inline uint8_t e2m1_code(float v) {
  const uint32_t b = bits_of(v);
  const uint32_t sign = (b >> 28) & 8u;
  const uint32_t a = b & 0x7FFFFFFFu;
  const float af = float_of(a);
  uint32_t code;
  if (af >= kE2m1Max)
    code = 7;
  else if (af < 1.0f)
    code = bits_of(af + 0x1p22f) - (149u << 23);
  else
    code = ((a + 0xC1000000u + 0x1FFFFFu + ((a >> 22) & 1u)) >> 22) & 0xFFu;
  return static_cast<uint8_t>(code | sign);
}

inline constexpr float kE2m1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// E2M1 code of v by stochastic rounding with 8 random bits, the rule of the hardware's
// cvt.rs.satfinite.e2m1x4 (PTX ISA, "Rounding modifiers": the result rounds away from zero on
// the carry out of adding the random bits to the discarded bits of the mantissa). With
// a = min(|v|, 6) between neighbours lo < hi of the grid and f = (a - lo) / (hi - lo) in [0, 1),
// t = 256 * code(lo) + floor(256 f): the code below a followed by the top 8 of the discarded
// bits (a * 512 below 2, where the step is 0.5; from 2 on, a's bits from bit 14 up less those of
// 0.5, the step being a's mantissa bit 22). t + random carries into the code with probability
// floor(256 f) / 256, so the expected magnitude is a - e with 0 <= e < 2^-8 (hi - lo): biased
// towards zero by less than 1/256 of a step, unbiased where f is a multiple of 1/256 (values on
// the grid are exact). NaN gives e2m1_code's answer. The SIMD bodies compute t as the max of
// a * 512 (a clamped to 2) and that difference shifted, which is the same.
inline uint8_t e2m1_code_stochastic(float v, uint8_t random) {
  if (v != v) return e2m1_code(v);
  const uint32_t sign = (bits_of(v) >> 28) & 8u;
  float a = std::fabs(v);
  a = a > kE2m1Max ? kE2m1Max : a;
  const uint32_t t = a < 2.0f ? static_cast<uint32_t>(a * 512.0f)  // exact product, truncated
                              : (bits_of(a) - 0x3F000000u) >> 14;
  return static_cast<uint8_t>(((t + random) >> 8) | sign);
}

// --- NVFP4 ----------------------------------------------------------------------------------

// One NVFP4 block's E4M3 scale and the factor its elements are multiplied by before rounding
// (torchao's nvfp4_quantize with a per-tensor scale): s = amax / 6 / tensor_scale clamped to
// [2^-6, 448] (NaN kept) and rounded to E4M3; factor = (1 / tensor_scale) / value(s).
struct Nvfp4BlockScale {
  uint8_t code;
  float factor;
};
inline float e4m3_value(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t mag = code & 0x7Fu;
  if (mag == 0x7Fu) return float_of(sign | 0x7FF00000u);  // torch's NaN for the NaN codes
  const uint32_t exp = mag >> 3, man = mag & 7u;
  const float v =
      exp == 0 ? static_cast<float>(man) * 0x1p-9f : float_of(((exp + 120u) << 23) | (man << 20));
  return sign ? -v : v;
}
// The value of an E5M2 code, as the half with the code's bits in its high byte converts to
// float32 (F16C): NaN codes keep their mantissa bits and gain the quiet bit.
inline float e5m2_value(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t exp = (code >> 2) & 31u, man = code & 3u;
  if (exp == 31) return float_of(sign | 0x7F800000u | (man != 0 ? 0x400000u | (man << 21) : 0u));
  const float v =
      exp == 0 ? static_cast<float>(man) * 0x1p-16f : float_of(((exp + 112u) << 23) | (man << 21));
  return sign ? -v : v;
}
inline Nvfp4BlockScale nvfp4_block_scale(float block_amax, float tensor_scale) {
  float s = (block_amax / kE2m1Max) / tensor_scale;
  s = s < 0x1p-6f ? 0x1p-6f : (s > kE4m3Max ? kE4m3Max : s);  // NaN fails both: kept
  const uint8_t code = fp8_code(s, Element::kE4m3);
  return {code, (1.0f / tensor_scale) / e4m3_value(code)};
}
// x * m with torch's NaN: m's own NaN where m is NaN (whatever x is), else x's where x is.
inline float times(float x, float m) { return m != m ? m : x * m; }
inline float nvfp4_scaled(float x, float factor) { return times(x, factor); }

// NVFP4's per-tensor scale from the tensor's amax: amax / (448 * 6); 1 when amax is 0, where
// torchao's formula divides by zero (every block scale would be NaN).
inline float nvfp4_tensor_scale_of_amax(float amax) {
  return amax == 0.0f ? 1.0f : amax / kNvfp4TensorScaleDivisor;
}

}  // namespace scalar
}  // namespace mantissa::kernels::mx
