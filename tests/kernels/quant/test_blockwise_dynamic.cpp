// 8-bit blockwise dynamic quantization against bitsandbytes: the maps bit for bit, the codes and
// absmax of quantize_blockwise byte for byte (fixture made by
// scripts/make_blockwise_dynamic_fixture.py), and the spec's test vectors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/quant/blockwise_dynamic.h"
#include "kernels/quant/blockwise_dynamic_fixture.h"

namespace q = mantissa::kernels::quant;
namespace fx = blockwise_dynamic_fixture;

namespace {

std::vector<float> floats(const uint32_t* bits, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(bits[i]);
  return out;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

template <size_t N, size_t B, size_t D>
void expect_matches_bitsandbytes(const uint32_t (&input)[N], const uint8_t (&codes)[N],
                                 const uint32_t (&absmax)[B], const uint32_t (&dequant)[D],
                                 int64_t blocksize, const float* code) {
  const std::vector<float> x = floats(input, N);
  std::vector<uint8_t> out(N, 0xAB);
  std::vector<float> amax(B, -1.0f);
  q::quantize_blockwise(x.data(), N, blocksize, code, out.data(), amax.data());
  int mismatches = 0;
  for (size_t i = 0; i < N; ++i)
    if (out[i] != codes[i] && ++mismatches <= 10)
      ADD_FAILURE() << "element " << i << " x=" << x[i] << ": code " << int(out[i])
                    << ", bitsandbytes " << int(codes[i]);
  EXPECT_EQ(mismatches, 0);
  for (size_t b = 0; b < B; ++b) EXPECT_EQ(bits(amax[b]), absmax[b]) << "block " << b;

  std::vector<float> back(N);
  q::dequantize_blockwise(out.data(), N, blocksize, code, amax.data(), back.data());
  for (size_t i = 0; i < D; ++i) EXPECT_EQ(bits(back[i]), dequant[i]) << "element " << i;
}

}  // namespace

TEST(BlockwiseDynamic, MapsAreBitsandbytesMapsBitForBit) {
  for (int i = 0; i < q::kDynamicMapSize; ++i) {
    EXPECT_EQ(bits(q::dynamic_map_signed()[i]), fx::kSignedMapBits[i]) << "signed " << i;
    EXPECT_EQ(bits(q::dynamic_map_unsigned()[i]), fx::kUnsignedMapBits[i]) << "unsigned " << i;
  }
}

TEST(BlockwiseDynamic, MapsAreSortedWithTheSpecLandmarks) {
  const float* s = q::dynamic_map_signed();
  const float* u = q::dynamic_map_unsigned();
  for (int i = 1; i < q::kDynamicMapSize; ++i) {
    EXPECT_LT(s[i - 1], s[i]) << i;
    EXPECT_LT(u[i - 1], u[i]) << i;
  }
  // Signed: 127 negative, 0 at 127, +1 at 255, asymmetric ends, smallest magnitude 5.5e-7.
  EXPECT_FLOAT_EQ(s[0], -0.99296875f);
  EXPECT_EQ(s[127], 0.0f);
  EXPECT_EQ(s[255], 1.0f);
  EXPECT_FLOAT_EQ(s[128], 5.5e-7f);
  for (int i = 0; i < 127; ++i) EXPECT_EQ(s[i], -s[254 - i]) << "mirror " << i;
  // Unsigned: 0 at index 0, first non-zero 3.25e-7, +1 at 255.
  EXPECT_EQ(u[0], 0.0f);
  EXPECT_FLOAT_EQ(u[1], 3.25e-7f);
  EXPECT_EQ(u[255], 1.0f);
}

TEST(BlockwiseDynamic, NearestIndexMatchesSpecTestVectors) {
  const float* s = q::dynamic_map_signed();
  const float* u = q::dynamic_map_unsigned();
  const std::pair<float, int> signed_cases[] = {
      {1.0f, 255},  {-1.0f, 0},    {0.5f, 219},  {-0.5f, 35}, {0.25f, 201}, {0.1f, 190},
      {0.01f, 158}, {0.001f, 142}, {1e-6f, 128}, {0.0f, 127}, {-0.0f, 127}};
  for (auto [x, index] : signed_cases) EXPECT_EQ(q::nearest_code_index(s, x), index) << x;
  const std::pair<float, int> unsigned_cases[] = {
      {1.0f, 255}, {0.5f, 183}, {0.1f, 126}, {0.001f, 30}, {0.0f, 0}};
  for (auto [x, index] : unsigned_cases) EXPECT_EQ(q::nearest_code_index(u, x), index) << x;
}

TEST(BlockwiseDynamic, NearestIndexBreaksTiesTowardTheLowerIndex) {
  const float* s = q::dynamic_map_signed();
  for (int i = 0; i + 1 < q::kDynamicMapSize; ++i) {
    const float mid = 0.5f * (s[i] + s[i + 1]);
    EXPECT_EQ(q::nearest_code_index(s, mid), i) << i;
    EXPECT_EQ(q::nearest_code_index(s, std::nextafter(mid, 2.0f)), i + 1) << i;
    EXPECT_EQ(q::nearest_code_index(s, s[i]), i) << i;
  }
  EXPECT_EQ(q::nearest_code_index(s, -3.0f), 0);
  EXPECT_EQ(q::nearest_code_index(s, 3.0f), 255);
}

TEST(BlockwiseDynamic, QuantizeSignedBlocksOf256MatchesBitsandbytes) {
  expect_matches_bitsandbytes(fx::kSigned256InputBits, fx::kSigned256Codes,
                              fx::kSigned256AbsmaxBits, fx::kSigned256DequantBits,
                              fx::kSigned256Blocksize, q::dynamic_map_signed());
}

TEST(BlockwiseDynamic, QuantizeUnsignedBlocksOf256MatchesBitsandbytes) {
  expect_matches_bitsandbytes(fx::kUnsigned256InputBits, fx::kUnsigned256Codes,
                              fx::kUnsigned256AbsmaxBits, fx::kUnsigned256DequantBits,
                              fx::kUnsigned256Blocksize, q::dynamic_map_unsigned());
}

TEST(BlockwiseDynamic, QuantizeSignedBlocksOf64MatchesBitsandbytes) {
  expect_matches_bitsandbytes(fx::kSigned64InputBits, fx::kSigned64Codes, fx::kSigned64AbsmaxBits,
                              fx::kSigned64DequantBits, fx::kSigned64Blocksize,
                              q::dynamic_map_signed());
}

TEST(BlockwiseDynamic, ZeroBlockGetsIndexZeroAndDequantizesToZero) {
  std::vector<float> x(300, 0.0f);
  x[290] = -2.0f;
  std::vector<uint8_t> out(300, 7);
  float absmax[2];
  q::quantize_blockwise(x.data(), 300, 256, q::dynamic_map_signed(), out.data(), absmax);
  EXPECT_EQ(absmax[0], 0.0f);
  EXPECT_EQ(absmax[1], 2.0f);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(out[i], 0) << i;
  EXPECT_EQ(out[290], 0);  // -2 / 2 = -1 -> the most negative entry
  // 0 in a non-zero block: bitsandbytes' bin for 0 starts at 1/65535 > 0, whose nearest entry
  // is 131 (2.1e-5), not the zero entry 127.
  EXPECT_EQ(out[291], 131);
  std::vector<float> back(300);
  q::dequantize_blockwise(out.data(), 300, 256, q::dynamic_map_signed(), absmax, back.data());
  for (int i = 0; i < 256; ++i) EXPECT_EQ(back[i], 0.0f) << i;
  EXPECT_FLOAT_EQ(back[290], -0.99296875f * 2.0f);
}

TEST(BlockwiseDynamic, BinnedCodesAreAsGoodAsTheExactNearestUpToOneBin) {
  // The 65,536-bin table can miss the exact nearest entry by at most the width of a bin
  // (2/65535 of absmax): near a midpoint, and near zero where the map is denser than the bins.
  const float* s = q::dynamic_map_signed();
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * i) * std::pow(10.0f, -3.0f * ((i * 7) % 11) / 10.0f);
  for (size_t b = 0; b < x.size(); b += 256) x[b] = 1.0f;  // absmax 1: scaled values are x
  std::vector<uint8_t> out(x.size());
  std::vector<float> absmax(x.size() / 256);
  q::quantize_blockwise(x.data(), x.size(), 256, s, out.data(), absmax.data());
  int differ = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int exact = q::nearest_code_index(s, x[i]);
    EXPECT_LE(std::fabs(s[out[i]] - x[i]), std::fabs(s[exact] - x[i]) + 2.0f / 65535) << i;
    differ += exact != out[i];
  }
  EXPECT_LT(differ, 100);
}
