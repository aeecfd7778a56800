#pragma once
// Stochastic rounding (SR) of fp32 values to bfloat16 / float16, and the counter-based random
// bits that drive it.
//
// SR rounds x to one of its two neighbours lo <= x <= hi in the narrow format, choosing hi with
// probability (x - lo) / (hi - lo), so E[SR(x)] = x: updates smaller than half an ulp survive
// on average instead of being rounded away every step. As llm.c does for bf16, this is done on
// the bit pattern: add k random bits below the kept mantissa to the magnitude bits, then drop
// those k bits. The carry happens for exactly (dropped bits of x) of the 2^k random values, so
// the probability is exact (to 2^-k); rounding the magnitude keeps it symmetric in sign.
//
// The random bits come from a stateless hash of (seed, parameter index, step, element index)
// instead of a sequential generator, so every element's draw is fixed by its position: results
// do not depend on the thread count or block size, and a resumed run draws the same bits.
#include <bit>
#include <cstdint>

#include "mantissa/core/bfloat16.h"
#include "mantissa/core/dtype.h"
#include "mantissa/core/half.h"

namespace mantissa::optim {

// splitmix64's output function: a bijective 64-bit mix with good avalanche.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;  // 2^64 / golden ratio, odd

// The key of one parameter's random stream at one optimizer step.
constexpr uint64_t sr_key(uint64_t seed, uint64_t param_index, uint64_t step) {
  return mix64(mix64(mix64(seed + kGolden) + param_index * kGolden + 1) + step * kGolden + 2);
}

// 32 random bits for element `index` of the stream `key` (splitmix64 on a counter).
constexpr uint32_t sr_bits(uint64_t key, uint64_t index) {
  return static_cast<uint32_t>(mix64(key + (index + 1) * kGolden) >> 32);
}

// bf16 has fp32's exponent range, so the grid below the kept 7 mantissa bits is always the low
// 16 bits of the fp32 pattern, subnormals included. A carry into the exponent is the next
// binade (or inf above the largest finite value, which SR reaches with the probability RNE's
// overflow threshold would suggest). Uses the low 16 of `random`.
constexpr uint16_t stochastic_round_bf16(float x, uint32_t random) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return float_to_bf16_bits(x);  // inf, NaN
  return static_cast<uint16_t>((bits + (random & 0xffffu)) >> 16);
}

// float16: the number of dropped fp32 mantissa bits is 13 in f16's normal range and grows by
// one per binade below it (f16 subnormals are multiples of 2^-24). Values under 2^-24 round
// to 0 or 2^-24 by comparing |x| / 2^-24 with a uniform draw. Between 65504 and 65536 the upper
// neighbour is inf (65536 overflows); beyond, inf. Uses the low k bits of `random`, all 32
// below 2^-24.
constexpr uint16_t stochastic_round_f16(float x, uint32_t random) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t mag = bits & 0x7fffffffu;
  if (mag >= 0x7f800000u) return float_to_half_bits(x);  // inf, NaN
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const int exp = static_cast<int>(mag >> 23) - 127;  // fp32 subnormals count as tiny
  if (exp < -24) {
    // |x| * 2^24 is exact (a power-of-two scaling up) and below 1. Large random values round
    // up, as the carry does above.
    const double t = static_cast<double>(std::bit_cast<float>(mag)) * 0x1p24;
    const bool up = static_cast<double>(random) * 0x1p-32 + t >= 1.0;
    return sign | static_cast<uint16_t>(up ? 1u : 0u);
  }
  const int k = exp >= -14 ? 13 : 13 + (-14 - exp);
  const uint32_t drop = (1u << k) - 1u;
  const uint32_t rounded = (mag + (random & drop)) & ~drop;
  // `rounded` is an f16 value (or >= 65536, which becomes inf): the conversion is exact.
  return sign | float_to_half_bits(std::bit_cast<float>(rounded));
}

// dst[i] = SR(src[i]) to `to` (kBFloat16 or kFloat16), drawing sr_bits(key, first_index + i).
// Throws mantissa::Error for any other dtype.
void stochastic_round_buffer(const float* src, DType to, uint16_t* dst, int64_t n, uint64_t key,
                             uint64_t first_index);

}  // namespace mantissa::optim
