// The bf16 register tile (kernels/cpu/gemm/bf16_pair_tile.h): where this CPU's VDPBF16PS passes
// the probe, the tile and its promoting form on packed panels give the fp32 register tile's
// bits on the same values (odd and even K, one step to a whole slice, sums that cancel), and the
// packing refuses values the tile cannot take.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/gemm/bf16_pair_tile.h"
#include "kernels/cpu/gemm/fp32_register_tile.h"

namespace mantissa::kernels {
namespace {

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

// A bf16 value 1.xxxxxxx * 2^e, e in [-range, range], either sign; zero one time in eight.
float random_bf16(std::mt19937& rng, int range) {
  const uint32_t r = rng();
  if (r % 8 == 0) return r & 8 ? -0.0f : 0.0f;
  const float m = 1.0f + static_cast<float>((r >> 4) & 0x7F) / 128.0f;
  return (r & 0x800 ? -1.0f : 1.0f) *
         std::ldexp(m, static_cast<int>((r >> 12) % (2 * range + 1)) - range);
}

const Bf16PairTile* tile_here() { return bf16_pair_tile(simd_level()); }

TEST(Bf16PairTile, ProbeAnswersOnlyWhereTheCpuHasAvx512Bf16) {
  if (!cpu_features().avx512_bf16) {
    EXPECT_FALSE(bf16_pair_dot_matches_fma());
    EXPECT_EQ(bf16_pair_tile(SimdLevel::kAvx512Bf16), nullptr);
    GTEST_SKIP() << "this CPU (as MANTISSA_DISABLE_SIMD leaves it) lacks AVX-512 BF16";
  }
  // The level caps the tile: below AVX-512 BF16 there is none.
  EXPECT_EQ(bf16_pair_tile(SimdLevel::kAvx512), nullptr);
  if (!bf16_pair_dot_matches_fma())
    GTEST_SKIP() << "this CPU's VDPBF16PS does not give the two-fma chain's bits";
  EXPECT_NE(tile_here(), nullptr);
}

TEST(Bf16PairTile, GivesTheFp32TilesBits) {
  const Bf16PairTile* bt = tile_here();
  if (!bt) GTEST_SKIP() << "no bf16 tile here (AVX-512 BF16 missing or the probe failed)";
  const Fp32RegisterTile ft = fp32_register_tile(SimdLevel::kAvx512);
  ASSERT_EQ(ft.rows, bt->rows);
  ASSERT_EQ(ft.cols, bt->cols);
  const int R = bt->rows, C = bt->cols;
  std::mt19937 rng(3);
  for (const int64_t kl : {1, 2, 3, 7, 64, 127, 128, 255, 256}) {
    SCOPED_TRACE(kl);
    const int64_t kp = (kl + 1) / 2;
    std::vector<float> a(R * kl), b(kl * C);
    for (auto& x : a) x = random_bf16(rng, 12);
    for (auto& x : b) x = random_bf16(rng, 12);
    // Row 0 cancels: its products with column 0 sum to zero before the last step.
    for (int64_t k = 0; k + 1 < kl; k += 2) {
      a[k + 1] = -a[k];
      b[(k + 1) * C] = b[k * C];
    }
    std::vector<uint32_t> a16(R * kp), b16(kp * C);
    ASSERT_TRUE(pack_pair_rows(a.data(), kl, R, kl, a16.data(), kp));
    ASSERT_TRUE(pack_pair_strip(b.data(), C, C, kl, b16.data()));
    std::vector<float> start(R * C);
    for (auto& x : start) x = random_bf16(rng, 14) * 1.0009765625f;  // not a bf16 value
    for (const bool zero : {true, false}) {
      std::vector<float> want = start, got = start;
      ft.fn(a.data(), kl, b.data(), C, kl, want.data(), C, zero);
      bt->fn(a16.data(), kp, b16.data(), C, kp, got.data(), C, zero);
      EXPECT_EQ(bits_of(got), bits_of(want)) << "zero " << zero;
    }
    std::vector<float> sa(R), sb(C);
    for (auto& x : sa) x = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -3);
    for (auto& x : sb) x = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, 2);
    for (const bool first : {true, false}) {
      std::vector<float> want = start, got = start;
      ft.promote(a.data(), kl, b.data(), C, kl, sa.data(), sb.data(), want.data(), C, first);
      bt->promote(a16.data(), kp, b16.data(), C, kp, sa.data(), sb.data(), got.data(), C, first);
      EXPECT_EQ(bits_of(got), bits_of(want)) << "first " << first;
    }
  }
}

TEST(Bf16PairTile, PackingRefusesValuesTheTileCannotTake) {
  if (!tile_here()) GTEST_SKIP() << "no bf16 tile here (AVX-512 BF16 missing or the probe failed)";
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(), 1.0f + 0x1p-10f,  // not bf16
                       0x1p-130f};                                               // subnormal
  for (const float x : bad) {
    for (const int64_t at : {0, 5, 36}) {
      std::vector<float> v(2 * 37, 1.5f);
      v[at] = x;
      std::vector<uint32_t> d(2 * 19), s(19 * 32);
      EXPECT_FALSE(pack_pair_rows(v.data(), 37, 2, 37, d.data(), 19)) << x << " at " << at;
      std::vector<float> strip(37 * 32, -2.0f);
      strip[at * 32 + 3] = x;
      EXPECT_FALSE(pack_pair_strip(strip.data(), 32, 32, 37, s.data())) << x << " at " << at;
      // Columns past `valid` are not checked.
      EXPECT_TRUE(pack_pair_strip(strip.data(), 32, 3, 37, s.data())) << x << " at " << at;
    }
  }
  std::vector<float> v = {1.0f, -0.0f, 0.0f, 0x1p-126f, -3.0f};
  std::vector<uint32_t> d(3);
  EXPECT_TRUE(pack_pair_rows(v.data(), 5, 1, 5, d.data(), 3));
  EXPECT_EQ(d[0], 0x3F808000u);  // (1, -0): k in the high half
  EXPECT_EQ(d[1], 0x00000080u);  // (0, 2^-126)
  EXPECT_EQ(d[2], 0xC0408000u);  // (-3, the padding -0)
}

}  // namespace
}  // namespace mantissa::kernels
