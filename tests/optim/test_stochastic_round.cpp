// Stochastic rounding primitive (src/optim/stochastic_round.h): exact probabilities checked
// exhaustively over the random bits it uses, statistics of the hash stream, special values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "mantissa/core/error.h"
#include "optim/stochastic_round.h"

namespace mantissa::optim {
namespace {

double bf16_value(uint16_t b) { return bf16_bits_to_float(b); }
double f16_value(uint16_t h) { return half_bits_to_float(h); }

// Over all 2^16 values of the random bits, SR to bf16 rounds up exactly as often as the
// dropped bits say: the sum of the results is 2^16 * x exactly (unbiased, not just on average).
TEST(StochasticRound, Bf16IsExactlyUnbiasedOverAllRandomBits) {
  const float ulp1 = 0x1p-7f;  // bf16 spacing in [1, 2)
  for (float x : {1.0f + 0.3f * ulp1, 1.0f + 0.5f * ulp1, 1.0f + 0x1p-23f, -(1.0f + 0.7f * ulp1),
                  0.1f, -3.14159f, 1e-30f, 1e-40f /* fp32 subnormal */, 3.3e38f}) {
    const uint16_t lo = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
    double sum = 0;
    int up = 0;
    for (uint32_t r = 0; r < 65536; ++r) {
      const uint16_t b = stochastic_round_bf16(x, r);
      ASSERT_TRUE(b == lo || b == lo + 1) << x << " r=" << r;  // one of the two neighbours
      up += b != lo;
      sum += bf16_value(b);
    }
    EXPECT_EQ(up, static_cast<int>(std::bit_cast<uint32_t>(x) & 0xffffu)) << x;
    EXPECT_EQ(sum, 65536.0 * static_cast<double>(x)) << x;
  }
}

TEST(StochasticRound, Bf16KeepsExactValuesAndSpecials) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (uint32_t r : {0u, 1u, 0x7fffu, 0x8000u, 0xffffu, 0xffffffffu}) {
    const float bf16_max = std::bit_cast<float>(0x7f7f0000u);
    for (float x : {1.0f, -2.5f, 0.0f, -0.0f, 0x1p-133f /* bf16 subnormal */, bf16_max}) {
      const uint16_t b = stochastic_round_bf16(x, r);
      EXPECT_EQ(b, float_to_bf16_bits(x)) << x << " r=" << r;  // sign of zero included
    }
    EXPECT_EQ(stochastic_round_bf16(inf, r), 0x7f80);
    EXPECT_EQ(stochastic_round_bf16(-inf, r), 0xff80);
    EXPECT_TRUE(std::isnan(bf16_value(stochastic_round_bf16(nan, r))));
    EXPECT_TRUE(std::isnan(bf16_value(stochastic_round_bf16(-nan, r))));
  }
  // Between the largest finite bf16 and fp32's maximum, SR goes to inf for large enough bits.
  EXPECT_EQ(stochastic_round_bf16(3.4e38f, 0), 0x7f7f);
  EXPECT_EQ(stochastic_round_bf16(3.4e38f, 0xffff), 0x7f80);
}

// f16 drops 13 fp32 bits in its normal range and more below it (subnormal grid 2^-24).
TEST(StochasticRound, F16IsExactlyUnbiasedOverAllRandomBits) {
  struct Case {
    float x;
    int k;  // dropped fp32 mantissa bits
  };
  // 3e-5 lies in the binade 2^-16 (two below f16's smallest normal 2^-14), 1e-7 in 2^-24.
  for (Case c : {Case{1.0f + 0.3f * 0x1p-10f, 13}, Case{-1000.3f, 13}, Case{65510.0f, 13},
                 Case{3e-5f, 15}, Case{-1e-7f, 23}}) {
    double sum = 0;
    for (uint32_t r = 0; r < (1u << c.k); ++r) sum += f16_value(stochastic_round_f16(c.x, r));
    const double expected = static_cast<double>(c.x) * (1u << c.k);
    if (c.x == 65510.0f) {
      // 65504 or 65536, which f16 stores as inf: the mean is infinite, the count is exact.
      EXPECT_TRUE(std::isinf(sum));
      int up = 0;
      for (uint32_t r = 0; r < 8192; ++r) up += stochastic_round_f16(c.x, r) == 0x7c00;
      EXPECT_EQ(up, (65510 - 65504) * 8192 / 32);
    } else {
      EXPECT_EQ(sum, expected) << c.x;
    }
  }
}

TEST(StochasticRound, F16TinyValuesAndSpecials) {
  // Below 2^-24 the result is 0 or 2^-24 with probability |x| / 2^-24.
  const float x = 0.25f * 0x1p-24f;
  int up = 0;
  const int n = 1 << 16;
  for (int i = 0; i < n; ++i) up += stochastic_round_f16(-x, sr_bits(sr_key(7, 0, 1), i)) != 0x8000;
  EXPECT_NEAR(up / double(n), 0.25, 5 * std::sqrt(0.25 * 0.75 / n));
  EXPECT_EQ(stochastic_round_f16(-x, 0xffffffffu), 0x8001);  // -2^-24
  EXPECT_EQ(stochastic_round_f16(-x, 0xbfffffffu), 0x8000);  // -0, just below 3/4 of 2^32
  EXPECT_EQ(stochastic_round_f16(-x, 0xc0000000u), 0x8001);
  const float inf = std::numeric_limits<float>::infinity();
  for (uint32_t r : {0u, 0x1fffu, 0xffffffffu}) {
    for (float v : {1.0f, -2.5f, 0.0f, -0.0f, 0x1p-24f, 65504.0f, 6.1035156e-05f})
      EXPECT_EQ(stochastic_round_f16(v, r), float_to_half_bits(v)) << v << " r=" << r;
    EXPECT_EQ(stochastic_round_f16(inf, r), 0x7c00);
    EXPECT_EQ(stochastic_round_f16(-inf, r), 0xfc00);
    EXPECT_EQ(stochastic_round_f16(70000.0f, r), 0x7c00);  // beyond 65536: inf either way
    EXPECT_TRUE(std::isnan(f16_value(stochastic_round_f16(std::nanf(""), r))));
  }
}

// The hash stream: bits are uniform enough that the mean of SR over many elements is the value
// (within 5 standard errors), the same (key, index) gives the same bits, and keys differ per
// seed, parameter and step.
TEST(StochasticRound, HashStreamIsUnbiasedAndDeterministic) {
  const float x = 1.0f + 0.3f * 0x1p-7f;
  const int n = 200000;
  const uint64_t key = sr_key(42, 3, 17);
  std::vector<float> src(n, x);
  std::vector<uint16_t> dst(n);
  stochastic_round_buffer(src.data(), kBFloat16, dst.data(), n, key, 1000);
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += bf16_value(dst[i]);
    ASSERT_EQ(dst[i], stochastic_round_bf16(x, sr_bits(key, 1000 + i)));
  }
  const double p = (std::bit_cast<uint32_t>(x) & 0xffff) / 65536.0;
  const double se = 0x1p-7 * std::sqrt(p * (1 - p) / n);
  EXPECT_NEAR(sum / n, x, 5 * se);
  EXPECT_NE(sr_key(42, 3, 17), sr_key(43, 3, 17));
  EXPECT_NE(sr_key(42, 3, 17), sr_key(42, 4, 17));
  EXPECT_NE(sr_key(42, 3, 17), sr_key(42, 3, 18));
  EXPECT_NE(sr_bits(key, 0), sr_bits(key, 1));
  EXPECT_THROW(stochastic_round_buffer(src.data(), kFloat32, dst.data(), 1, key, 0), Error);
}

}  // namespace
}  // namespace mantissa::optim
