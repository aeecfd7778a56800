// The one-pass conversions between bf16/f16 NCHW activations and float32 in oneDNN's channel
// blocks (kernels/cpu/onednn/blocked_convert.h): every element lands where the nChw<B>c layout
// puts it, widened exactly, and comes back rounded with Tensor::to's bits, specials included
// (NaN, infinities, subnormals, halfway cases, values past f16's range). The SIMD path and the
// scalar one (portable.avx2_only_cpu) are both held to the scalar conversions' bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/onednn/blocked_convert.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/error.h"
#include "mantissa/core/half.h"

namespace mantissa::kernels {
namespace {

int64_t blocked_index(int64_t img, int64_t ch, int64_t s, int64_t c, int64_t hw, int64_t block) {
  return ((img * (c / block) + ch / block) * hw + s) * block + ch % block;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Random floats of every magnitude and sign, with specials and rounding edge cases mixed in.
std::vector<float> awkward_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            bits_float(0x7f800001u),  // signalling NaN
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            1e-40f,             // f32 subnormal
                            6.0e-8f,            // f16 subnormal range
                            65519.0f,           // rounds to f16 max
                            65520.0f,           // rounds to f16 inf
                            1.0f + 1.0f / 256,  // bf16 halfway, ties to even
                            bits_float(0x3f808000u),
                            bits_float(0x7f7fffffu)};  // f32 max: bf16 rounds to inf
  for (size_t i = 0; i < n; ++i) {
    if (gen() % 5 == 0) {
      v[i] = specials[gen() % std::size(specials)];
    } else {
      const float m = std::uniform_real_distribution<float>(-2.0f, 2.0f)(gen);
      v[i] = std::ldexp(m, static_cast<int>(gen() % 50) - 30);
    }
  }
  return v;
}

uint16_t round_bits(DType low, float f) {
  return low == kBFloat16 ? float_to_bf16_bits(f) : float_to_half_bits(f);
}
float widen_bits(DType low, uint16_t b) {
  return low == kBFloat16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
}
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct Case {
  int64_t n, c, hw, block;
};
// hw 13 and 30: a tail after the eight-position steps; 64: none; c 48 in blocks of 16: three
// blocks, each two eight-channel halves.
const Case kCases[] = {
    {2, 8, 13, 8}, {1, 16, 64, 8}, {2, 16, 30, 16}, {3, 48, 13, 16}, {1, 24, 1, 8}};

TEST(Conv2dBlockedConvert, WidenPutsEveryValueWhereTheLayoutSays) {
  for (DType low : {kBFloat16, kFloat16}) {
    for (const Case& k : kCases) {
      SCOPED_TRACE(std::string(low.name()) + " c " + std::to_string(k.c) + " hw " +
                   std::to_string(k.hw) + " block " + std::to_string(k.block));
      const size_t numel = static_cast<size_t>(k.n * k.c * k.hw);
      const std::vector<float> f = awkward_floats(numel, 7 + static_cast<uint32_t>(k.c));
      std::vector<uint16_t> src(numel);
      for (size_t i = 0; i < numel; ++i) src[i] = round_bits(low, f[i]);
      std::vector<float> dst(numel, bits_float(0x7fc0dead));
      ASSERT_TRUE(blocked_convert_applies(low, k.c, k.block));
      widen_to_blocked(low, src.data(), dst.data(), k.n, k.c, k.hw, k.block);
      for (int64_t img = 0; img < k.n; ++img)
        for (int64_t ch = 0; ch < k.c; ++ch)
          for (int64_t s = 0; s < k.hw; ++s) {
            const uint16_t b = src[static_cast<size_t>((img * k.c + ch) * k.hw + s)];
            const float got =
                dst[static_cast<size_t>(blocked_index(img, ch, s, k.c, k.hw, k.block))];
            ASSERT_EQ(float_bits(got), float_bits(widen_bits(low, b)))
                << "image " << img << " channel " << ch << " position " << s;
          }
    }
  }
}

TEST(Conv2dBlockedConvert, RoundGivesTheScalarConversionsBits) {
  for (DType low : {kBFloat16, kFloat16}) {
    for (const Case& k : kCases) {
      SCOPED_TRACE(std::string(low.name()) + " c " + std::to_string(k.c) + " hw " +
                   std::to_string(k.hw) + " block " + std::to_string(k.block));
      const size_t numel = static_cast<size_t>(k.n * k.c * k.hw);
      const std::vector<float> blocked = awkward_floats(numel, 99 + static_cast<uint32_t>(k.hw));
      std::vector<uint16_t> dst(numel, 0xabcd);
      round_from_blocked(low, blocked.data(), dst.data(), k.n, k.c, k.hw, k.block);
      for (int64_t img = 0; img < k.n; ++img)
        for (int64_t ch = 0; ch < k.c; ++ch)
          for (int64_t s = 0; s < k.hw; ++s) {
            const float f =
                blocked[static_cast<size_t>(blocked_index(img, ch, s, k.c, k.hw, k.block))];
            ASSERT_EQ(dst[static_cast<size_t>((img * k.c + ch) * k.hw + s)], round_bits(low, f))
                << "image " << img << " channel " << ch << " position " << s << " value " << f;
          }
    }
  }
}

TEST(Conv2dBlockedConvert, TakesOnlyWholeBlocksOfBf16OrF16) {
  EXPECT_TRUE(blocked_convert_applies(kBFloat16, 32, 16));
  EXPECT_TRUE(blocked_convert_applies(kFloat16, 8, 8));
  EXPECT_FALSE(blocked_convert_applies(kBFloat16, 12, 8));   // padded channels
  EXPECT_FALSE(blocked_convert_applies(kBFloat16, 24, 16));  // padded channels
  EXPECT_FALSE(blocked_convert_applies(kBFloat16, 1, 8));    // a first layer's image
  EXPECT_FALSE(blocked_convert_applies(kFloat32, 16, 8));
  EXPECT_FALSE(blocked_convert_applies(kFloat16, 16, 4));
  std::vector<uint16_t> src(12 * 4);
  std::vector<float> dst(16 * 4);
  EXPECT_THROW(widen_to_blocked(kBFloat16, src.data(), dst.data(), 1, 12, 4, 8), Error);
}

}  // namespace
}  // namespace mantissa::kernels
