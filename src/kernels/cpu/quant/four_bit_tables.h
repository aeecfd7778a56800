#pragma once
// The two 4-bit code books of bitsandbytes (docs/quantization.md, "NF4" and "FP4") and the
// float32 decision boundaries its CPU quantizer uses: the midpoint of each pair of neighbouring
// values in sorted order, computed in float32 as (a + b) / 2. An input goes to the sorted slot
// equal to the number of boundaries it is strictly greater than; NaN counts as greater than
// every boundary (torch.bucketize puts it last). A 4-bit format is one FourBitCodebook here
// and one case in four_bit_codebook(); the kernels read only the code book.
#include <array>
#include <bit>
#include <cstdint>

#include "mantissa/core/error.h"
#include "mantissa/core/format_id.h"

namespace mantissa::kernels::quant {

// Code -> value. NF4 is already sorted (the code is the sorted slot).
// Written as float32 bits: bitsandbytes rounds its decimal literals to double and then to
// float32, which a float literal here could round differently in the last bit.
inline constexpr std::array<float, 16> kNf4Values = {
    std::bit_cast<float>(0xBF800000u), std::bit_cast<float>(0xBF3239B1u),
    std::bit_cast<float>(0xBF066B30u), std::bit_cast<float>(0xBECA32A0u),
    std::bit_cast<float>(0xBE91A24Du), std::bit_cast<float>(0xBE3D353Fu),
    std::bit_cast<float>(0xBDBA7871u), std::bit_cast<float>(0x00000000u),
    std::bit_cast<float>(0x3DA2FAFFu), std::bit_cast<float>(0x3E24CAE3u),
    std::bit_cast<float>(0x3E7C04DDu), std::bit_cast<float>(0x3EAD033Au),
    std::bit_cast<float>(0x3EE1A4B8u), std::bit_cast<float>(0x3F1007ABu),
    std::bit_cast<float>(0x3F3913B3u), std::bit_cast<float>(0x3F800000u)};

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

// What dequantization multiplies by: bitsandbytes' kernels (CUDA and its CPU library) decode
// FP4 code 8 as -0.0, while the table it stores (quant_map, above) holds +0.0. Its pure-PyTorch
// fallback, which its CPU backend takes for tensors with an odd last dimension, uses the stored
// table and so gives +0.0 there; only the sign of that zero differs.
inline constexpr std::array<float, 16> kFp4DequantValues = [] {
  std::array<float, 16> v = kFp4Values;
  v[8] = -0.0f;
  return v;
}();

// Everything the 4-bit kernels know of a format.
struct FourBitCodebook {
  std::array<float, 16> values;            // code -> value, as stored with a tensor (quant_map)
  std::array<float, 16> dequant_values;    // code -> value dequantization multiplies by
  std::array<float, 15> bounds;            // decision boundaries between sorted slots
  std::array<uint8_t, 16> sorted_to_code;  // sorted slot -> code
};

inline constexpr std::array<uint8_t, 16> kIdentityCodes = {0, 1, 2,  3,  4,  5,  6,  7,
                                                           8, 9, 10, 11, 12, 13, 14, 15};

inline constexpr FourBitCodebook kNf4Codebook = {kNf4Values, kNf4Values, kNf4Bounds,
                                                 kIdentityCodes};
inline constexpr FourBitCodebook kFp4Codebook = {kFp4Values, kFp4DequantValues, kFp4Bounds,
                                                 kFp4SortedToCode};

// The code book of a 4-bit format; throws for any other format.
inline const FourBitCodebook& four_bit_codebook(FormatId format) {
  switch (format) {
    case FormatId::kNf4:
      return kNf4Codebook;
    case FormatId::kFp4:
      return kFp4Codebook;
    default:
      break;
  }
  fail("four_bit_codebook", "format {} is not a 4-bit format (nf4 or fp4)",
       static_cast<int>(format));
}

// Sorted slot of a normalised value, then its code. `!(v <= b)` is `v > b` for numbers and
// true for NaN.
inline uint8_t four_bit_code(float v, const FourBitCodebook& book) {
  int slot = 0;
  for (float b : book.bounds) slot += !(v <= b);
  return book.sorted_to_code[slot];
}

}  // namespace mantissa::kernels::quant
