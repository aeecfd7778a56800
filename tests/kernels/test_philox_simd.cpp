// Philox4x32-10 in SIMD lanes (kernels/cpu/mx/philox_avx2.h, philox_avx512.h) against the scalar
// generator (philox.h): every word of every lane, for the row casts' 16 counters that differ in
// word 0 (sr_counter: a 64-column group's blocks of one row) and the Hadamard columns' 8 that
// differ in word 1 (8 rows), under many seeds, offsets and rows, word 0 wrapping past 2^32 and
// word 1 at its top. The casts' bytes rest on these words being philox.h's (reproducibility,
// exact resume).
#include <gtest/gtest.h>

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/mx/philox.h"
#include "kernels/cpu/mx/philox_avx2.h"
#include "kernels/cpu/mx/philox_avx512.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::mx {
namespace {

struct Case {
  uint64_t seed, offset, row, first_block;
};

// Seeds, offsets and rows from a fixed 64-bit mix; first blocks at 0, at 64-column groups, and
// where word 0 of the 16 counters wraps (its top bits are dropped, as sr_counter drops them).
std::vector<Case> cases() {
  std::vector<Case> out;
  uint64_t z = 0x243F6A8885A308D3ull;
  auto next = [&z] {
    z += 0x9E3779B97F4A7C15ull;
    uint64_t x = z;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  const uint64_t firsts[] = {
      0, 16, 1024, 0xFFFFFFF0ull, 0xFFFFFFF8ull, 0xFFFFFFFFull, 0x100000000ull, 0x3FFFFFFF0ull};
  for (int k = 0; k < 400; ++k) {
    const uint64_t r = next();
    out.push_back({next(), k % 3 == 0 ? 0 : next(), k % 5 == 0 ? 0xFFFFFFFFull : r & 0xFFFFFFFF,
                   k < 8 ? firsts[k] : 16 * (next() & 0xFFFFFFF)});
  }
  return out;
}

using Words16 = uint32_t[4][16];  // word k of counter block first_block + lane

void scalar_words(const Case& c, Words16& want) {
  for (int l = 0; l < 16; ++l) {
    const PhiloxCounter w =
        philox4x32_10(sr_counter(c.first_block + l, c.row, c.offset), sr_key(c.seed));
    for (int k = 0; k < 4; ++k) want[k][l] = w[k];
  }
}

__attribute__((target("avx2,fma,f16c"))) void avx2_words(const Case& c, Words16& got) {
  const philox_avx2::PhiloxKeys8 keys(c.seed);
  __m256i out[2][4];
  philox_avx2::philox16(keys, c.offset, c.row, c.first_block, out);
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(&got[k][8 * h]), out[h][k]);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void avx512_words(const Case& c,
                                                                       Words16& got) {
  const philox_avx512::PhiloxKeys16 keys(c.seed);
  __m512i out[4];
  philox_avx512::philox16(keys, c.offset, c.row, c.first_block, out);
  for (int k = 0; k < 4; ++k) _mm512_storeu_si512(got[k], out[k]);
}

// Counters (c0, c1 + lane, offset) for 8 lanes, word 1 wrapping where c1 is near 2^32.
__attribute__((target("avx2,fma,f16c"))) void avx2_words_in_word1(const Case& c, uint32_t c1,
                                                                  uint32_t (&got)[4][8]) {
  const philox_avx2::PhiloxKeys8 keys(c.seed);
  const __m256i rows = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(c1)),
                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i out[4];
  philox_avx2::philox8_lanes_in_word1(keys, static_cast<uint32_t>(c.first_block), rows,
                                      static_cast<uint32_t>(c.offset),
                                      static_cast<uint32_t>(c.offset >> 32), out);
  for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(got[k]), out[k]);
}

void expect_same(const Words16& want, const Words16& got, const Case& c) {
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 16; ++l)
      ASSERT_EQ(got[k][l], want[k][l])
          << "word " << k << " of block " << c.first_block << " + " << l << ", row " << c.row
          << ", offset " << c.offset << ", seed " << c.seed;
}

TEST(PhiloxSimd, Avx2SixteenBlocksOfARowGiveTheScalarWords) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  for (const Case& c : cases()) {
    Words16 want, got;
    scalar_words(c, want);
    avx2_words(c, got);
    expect_same(want, got, c);
  }
}

TEST(PhiloxSimd, Avx512SixteenBlocksOfARowGiveTheScalarWords) {
  if (simd_level() < SimdLevel::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL";
  for (const Case& c : cases()) {
    Words16 want, got;
    scalar_words(c, want);
    avx512_words(c, got);
    expect_same(want, got, c);
  }
}

TEST(PhiloxSimd, Avx2EightRowsOfABlockGiveTheScalarWords) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  for (const Case& c : cases()) {
    const uint32_t c1 = static_cast<uint32_t>(c.row) - (c.row % 7 == 0 ? 3 : 0);
    uint32_t got[4][8];
    avx2_words_in_word1(c, c1, got);
    for (uint32_t l = 0; l < 8; ++l) {
      const PhiloxCounter w =
          philox4x32_10({static_cast<uint32_t>(c.first_block), c1 + l,
                         static_cast<uint32_t>(c.offset), static_cast<uint32_t>(c.offset >> 32)},
                        sr_key(c.seed));
      for (int k = 0; k < 4; ++k) ASSERT_EQ(got[k][l], w[k]) << "word " << k << ", lane " << l;
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx
