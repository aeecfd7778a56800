#pragma once
// The two 4-bit code books of bitsandbytes (docs/quantization.md, "NF4" and "FP4") and the
// float32 decision boundaries its CPU quantizer uses: the midpoint of each pair of neighbouring
// values in sorted order, computed in float32 as (a + b) / 2. An input goes to the sorted slot
// equal to the number of boundaries it is strictly greater than; NaN counts as greater than
// every boundary (torch.bucketize puts it last).
#include <array>
#include <cstdint>

namespace mantissa::kernels::quant {

enum class FourBitType : uint8_t { kNf4, kFp4 };

// Code -> value. NF4 is already sorted (the code is the sorted slot).
inline constexpr std::array<float, 16> kNf4Values = {-1.0f,
                                                     -0.6961928009986877f,
                                                     -0.5250730514526367f,
                                                     -0.39491748809814453f,
                                                     -0.28444138169288635f,
                                                     -0.18477343022823334f,
                                                     -0.09105003625154495f,
                                                     0.0f,
                                                     0.07958029955625534f,
                                                     0.16093020141124725f,
                                                     0.24611230194568634f,
                                                     0.33791524171829224f,
                                                     0.44070982933044434f,
                                                     0.5626170039176941f,
                                                     0.7229568362236023f,
                                                     1.0f};

// FP4: sign bit 3, magnitudes {0, 0.0625, 8, 12, 4, 6, 2, 3} divided by 12 in float32. Code 8
// is a second zero (+0.0: bitsandbytes writes "-0" as a Python int).
inline constexpr std::array<float, 16> kFp4Values = {
    0.0f,        0.0625f / 12.f, 8.f / 12.f,  12.f / 12.f,     4.f / 12.f,  6.f / 12.f,
    2.f / 12.f,  3.f / 12.f,     0.0f,        -0.0625f / 12.f, -8.f / 12.f, -12.f / 12.f,
    -4.f / 12.f, -6.f / 12.f,    -2.f / 12.f, -3.f / 12.f};

// Sorted slot -> FP4 code: torch.argsort of kFp4Values as bitsandbytes computes it. The two
// zeros tie; argsort puts code 0 first, so 0.0 and tiny negatives get code 0 and tiny
// positives (0 < v <= 0.0026) get code 8.
inline constexpr std::array<uint8_t, 16> kFp4SortedToCode = {11, 10, 13, 12, 15, 14, 9, 0,
                                                             8,  1,  6,  7,  4,  5,  2, 3};

constexpr std::array<float, 15> midpoints(const std::array<float, 16>& sorted) {
  std::array<float, 15> m{};
  for (int i = 0; i < 15; ++i) m[i] = (sorted[i] + sorted[i + 1]) / 2.0f;
  return m;
}

constexpr std::array<float, 16> fp4_sorted() {
  std::array<float, 16> s{};
  for (int i = 0; i < 16; ++i) s[i] = kFp4Values[kFp4SortedToCode[i]];
  return s;
}

inline constexpr std::array<float, 15> kNf4Bounds = midpoints(kNf4Values);
inline constexpr std::array<float, 15> kFp4Bounds = midpoints(fp4_sorted());

inline const std::array<float, 16>& four_bit_values(FourBitType t) {
  return t == FourBitType::kNf4 ? kNf4Values : kFp4Values;
}

// Sorted slot of a normalised value, then its code. `!(v <= b)` is `v > b` for numbers and
// true for NaN.
inline uint8_t four_bit_code(float v, FourBitType t) {
  const auto& bounds = t == FourBitType::kNf4 ? kNf4Bounds : kFp4Bounds;
  int slot = 0;
  for (float b : bounds) slot += !(v <= b);
  return t == FourBitType::kNf4 ? static_cast<uint8_t>(slot) : kFp4SortedToCode[slot];
}

}  // namespace mantissa::kernels::quant
