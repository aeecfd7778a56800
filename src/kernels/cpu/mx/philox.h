#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
// counter-based generator cuRAND and PyTorch's CUDA generator use: four 32-bit words from a
// 128-bit counter and a 64-bit key, ten rounds. The stochastic rounding of the block formats
// draws each element's number from a counter made of its position (sr_word), so the result
// depends on (seed, offset, row, column) only: not on threads, SIMD level or chunking, and a
// resume that restores (seed, offset) draws the same numbers.
#include <array>
#include <cstdint>

namespace mantissa::kernels::mx {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

// Where element (row, col) of a stochastic rounding with (seed, offset) draws its number:
// columns go in groups of 64, and column 64g + 16k + l (l < 16) takes word k of counter block
// 16g + l, i.e. counter (16g + l, row, offset) under the key `seed` (the counter's words are
// 32 bits: rows below 2^32, columns below 2^34). The 16 elements of a 16-element block read one
// word of 16 consecutive counter blocks, which SIMD lanes compute side by side, and every
// counter's four words are used once.
inline PhiloxCounter sr_counter(uint64_t counter_block, uint64_t row, uint64_t offset) {
  return {static_cast<uint32_t>(counter_block), static_cast<uint32_t>(row),
          static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
}
inline PhiloxKey sr_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}
inline uint32_t sr_word(uint64_t seed, uint64_t offset, uint64_t row, uint64_t col) {
  return philox4x32_10(sr_counter(16 * (col >> 6) + (col & 15), row, offset),
                       sr_key(seed))[(col >> 4) & 3];
}

}  // namespace mantissa::kernels::mx
