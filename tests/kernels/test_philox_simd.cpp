// Philox4x32-10 in SIMD lanes (kernels/cpu/mx/philox_avx2.h, philox_avx512.h) against the scalar
// generator (philox.h): every word of every lane, for the row casts' 16 counters that differ in
// word 0 (sr_counter: a 256-column group's blocks of one row) and the Hadamard columns' 8 that
// differ in word 1 (8 rows), under many seeds, offsets and rows, word 0 wrapping past 2^32 and
// word 1 at its top; and the bytes the casts take from them (philox.h's sr_byte). The casts'
// bytes rest on these words being philox.h's (reproducibility, exact resume).
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

// The stream contract (philox.h, sr_byte) as the SIMD casts read it: the 256-column group's words
// that SrWords8 / SrWords16 hold for a column (made for it, or kept from before), lane col % 16 of
// word sr_word_index(col), byte sr_byte_index(col), are sr_byte's, for columns asked for in order,
// across groups, and back.
std::vector<int64_t> stream_columns() {
  std::vector<int64_t> cols;
  for (int64_t c = 0; c < 1024; c += 3) cols.push_back(c);
  for (int64_t c :
       {int64_t{255}, int64_t{256}, int64_t{4095}, int64_t{17}, (int64_t{1} << 34) + 77})
    cols.push_back(c);
  return cols;
}

__attribute__((target("avx2,fma,f16c"))) void expect_avx2_stream(const Case& c) {
  philox_avx2::SrWords8 sr(c.seed);
  for (const int64_t col : stream_columns()) {
    const auto u = static_cast<uint64_t>(col);
    alignas(32) uint32_t lanes[8];
    sr.need(c.offset, c.row, col, col);
    const auto& w = sr.words(col);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), w[(u >> 3) & 1][sr_word_index(u)]);
    ASSERT_EQ(sr_byte_of(lanes[u & 7], u), sr_byte(c.seed, c.offset, c.row, u))
        << "column " << col << ", row " << c.row << ", seed " << c.seed;
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void expect_avx512_stream(const Case& c) {
  philox_avx512::SrWords16 sr(c.seed);
  for (const int64_t col : stream_columns()) {
    const auto u = static_cast<uint64_t>(col);
    alignas(64) uint32_t lanes[16];
    sr.need(c.offset, c.row, col, col);
    _mm512_store_si512(lanes, sr.words(col)[sr_word_index(u)]);
    ASSERT_EQ(sr_byte_of(lanes[u & 15], u), sr_byte(c.seed, c.offset, c.row, u))
        << "column " << col << ", row " << c.row << ", seed " << c.seed;
  }
}

TEST(PhiloxSimd, Avx2StreamGivesEachColumnsByte) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  const std::vector<Case> all = cases();
  for (size_t k = 0; k < 20; ++k) expect_avx2_stream(all[k]);
}

TEST(PhiloxSimd, Avx512StreamGivesEachColumnsByte) {
  if (simd_level() < SimdLevel::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL";
  const std::vector<Case> all = cases();
  for (size_t k = 0; k < 20; ++k) expect_avx512_stream(all[k]);
}

// sr_byte's layout: byte j of word k of counter block 16g + l for column 256g + 64j + 16k + l,
// so one counter's 16 bytes serve 16 columns and each byte is used once.
TEST(PhiloxSimd, StreamLayoutUsesEachByteOnce) {
  const uint64_t seed = 5, offset = 9, row = 3;
  for (uint64_t g : {uint64_t{0}, uint64_t{1}, uint64_t{1000}}) {
    for (uint64_t l = 0; l < 16; ++l) {
      const PhiloxCounter w = philox4x32_10(sr_counter(16 * g + l, row, offset), sr_key(seed));
      for (uint64_t k = 0; k < 4; ++k)
        for (uint64_t j = 0; j < 4; ++j)
          ASSERT_EQ(sr_byte(seed, offset, row, 256 * g + 64 * j + 16 * k + l),
                    static_cast<uint8_t>(w[k] >> (8 * j)));
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx
