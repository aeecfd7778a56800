#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
// counter-based generator cuRAND and PyTorch's CUDA generator use: four 32-bit words from a
// 128-bit counter and a 64-bit key, ten rounds. The stochastic rounding of the block formats
// draws element i's number from counter (i / 4, offset), word i % 4, under the key `seed`, so
// the result depends on (seed, offset, i) only: not on threads, SIMD level or chunking, and a
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

// The random word of element `index` of a stream (seed, offset).
inline uint32_t philox_word(uint64_t seed, uint64_t offset, uint64_t index) {
  const uint64_t block = index >> 2;
  const PhiloxCounter out =
      philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                     static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return out[index & 3];
}

}  // namespace mantissa::kernels::mx
