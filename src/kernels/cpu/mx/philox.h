#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
// counter-based generator cuRAND and PyTorch's CUDA generator use: four 32-bit words from a
// 128-bit counter and a 64-bit key, ten rounds. The stochastic rounding of the block formats
// draws each element's 8 bits from a counter made of its position (sr_byte), so the result
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

// Where element (row, col) of a stochastic rounding with (seed, offset) draws its 8 random bits
// (the E2M1 rounding takes 8 bits an element, as the hardware's cvt.rs.satfinite.e2m1x4 takes one
// 32-bit word for four elements; mx_scalar.h's e2m1_code_stochastic): columns go in groups of
// 256, and column 256g + 64j + 16k + l (l < 16) takes byte j (bits 8j..8j+7) of word k of
// counter block 16g + l, i.e. of counter (16g + l, row, offset) under the key `seed` (the
// counter's words are 32 bits: rows below 2^32, columns below 2^36). The 16 elements of a
// 16-element block read one byte of one word of 16 consecutive counter blocks, which SIMD lanes
// compute side by side (one shift and one AND take the byte out of the word's lanes); one
// Philox call of 16 blocks serves 256 columns, and every counter's 16 bytes are used once.
inline PhiloxCounter sr_counter(uint64_t counter_block, uint64_t row, uint64_t offset) {
  return {static_cast<uint32_t>(counter_block), static_cast<uint32_t>(row),
          static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
}
inline PhiloxKey sr_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}
// The 16 counter blocks of the 256-column group holding `col` start at sr_group_block(col); the
// element's byte is sr_byte_of(word k = sr_word_index(col), col).
inline uint64_t sr_group_block(uint64_t col) { return 16 * (col >> 8); }
inline int sr_word_index(uint64_t col) { return static_cast<int>((col >> 4) & 3); }
inline int sr_byte_index(uint64_t col) { return static_cast<int>((col >> 6) & 3); }
inline uint8_t sr_byte_of(uint32_t word, uint64_t col) {
  return static_cast<uint8_t>(word >> (8 * sr_byte_index(col)));
}
inline uint8_t sr_byte(uint64_t seed, uint64_t offset, uint64_t row, uint64_t col) {
  return sr_byte_of(philox4x32_10(sr_counter(sr_group_block(col) + (col & 15), row, offset),
                                  sr_key(seed))[sr_word_index(col)],
                    col);
}

}  // namespace mantissa::kernels::mx
