// Exhaustive and reference-based checks of the fp16 and bf16 scalar conversions.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "mantissa/core/bfloat16.h"
#include "mantissa/core/half.h"

namespace mantissa {
namespace {

float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// Value of the non-negative code c in a binary format with `mant` mantissa bits and exponent
// bias `bias`, computed from the IEEE definition (independent of the code under test). The
// all-ones-exponent code with zero mantissa comes out as 2^(emax+1): the "overflow" point.
double code_value(uint32_t c, int mant, int bias) {
  const uint32_t m = c & ((1u << mant) - 1);
  const int e = static_cast<int>(c >> mant);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias - mant);
  return std::ldexp(static_cast<double>((1u << mant) + m), e - bias - mant);
}

// Brute-force reference: nearest value on a sorted grid, ties to the even code. The last grid
// entry is the overflow point, so anything at or past it maps to the infinity code.
struct Grid {
  std::vector<double> values;
  uint32_t nearest(double x) const {  // x >= 0
    const uint32_t top = static_cast<uint32_t>(values.size() - 1);
    if (x >= values[top]) return top;
    const uint32_t hi =
        static_cast<uint32_t>(std::upper_bound(values.begin(), values.end(), x) - values.begin());
    const uint32_t lo = hi - 1;
    if (values[lo] == x) return lo;
    const double mid = (values[lo] + values[hi]) / 2;  // exact: few significant bits
    if (x < mid) return lo;
    if (x > mid) return hi;
    return (lo & 1u) == 0 ? lo : hi;
  }
};

Grid make_grid(uint32_t inf_code, int mant, int bias) {
  Grid g;
  for (uint32_t c = 0; c <= inf_code; ++c) g.values.push_back(code_value(c, mant, bias));
  return g;
}

const Grid& half_grid() {
  static const Grid g = make_grid(0x7c00, 10, 15);
  return g;
}
const Grid& bf16_grid() {
  static const Grid g = make_grid(0x7f80, 7, 127);
  return g;
}

// Reference narrowing for finite and infinite inputs (NaN is checked separately).
uint16_t ref_narrow(float f, const Grid& grid, uint16_t sign_bit) {
  const uint16_t sign = std::signbit(f) ? sign_bit : 0;
  return static_cast<uint16_t>(sign | grid.nearest(std::fabs(static_cast<double>(f))));
}

// Float bit patterns: half uniform over all 2^32, half with exponents near the interesting
// range (subnormal to overflow of the narrow formats) and random mantissas.
std::vector<uint32_t> random_patterns(size_t n, uint32_t lo_exp, uint32_t hi_exp, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = static_cast<uint32_t>(rng());
    if (i % 2 == 0) {
      out[i] = r;
    } else {
      const uint32_t exp = lo_exp + static_cast<uint32_t>(rng() % (hi_exp - lo_exp + 1));
      out[i] = (r & 0x807fffffu) | (exp << 23);
    }
  }
  return out;
}

// ---------------------------------------------------------------- fp16

TEST(HalfTest, EveryPatternWidensToItsValueAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float f = half_bits_to_float(b);
    const bool neg = (h & 0x8000u) != 0;
    const uint32_t mag = h & 0x7fffu;
    if (mag > 0x7c00u) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), neg) << std::hex << h;
      ASSERT_NE(bits(f) & 0x00400000u, 0u) << "widened NaN must be quiet " << std::hex << h;
      const uint16_t back = float_to_half_bits(f);
      ASSERT_EQ(back & 0xfc00u, h & 0xfc00u) << std::hex << h;  // sign, NaN exponent
      ASSERT_NE(back & 0x0200u, 0u) << std::hex << h;           // quiet
      ASSERT_EQ(back & 0x01ffu, h & 0x01ffu) << std::hex << h;  // payload kept
      continue;
    }
    const double expected = (neg ? -1.0 : 1.0) * code_value(mag, 10, 15);
    if (mag == 0x7c00u) {
      ASSERT_TRUE(std::isinf(f) && std::signbit(f) == neg) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), expected) << std::hex << h;
      ASSERT_EQ(std::signbit(f), neg) << std::hex << h;  // -0 stays -0
    }
    ASSERT_EQ(float_to_half_bits(f), b) << std::hex << h;
    ASSERT_EQ(Half(f).x, b);
    ASSERT_EQ(bits(static_cast<float>(Half::from_bits(b))), bits(f));
  }
}

// Midpoint between code c and c+1 (positive codes), as a float (exact).
float half_midpoint(uint32_t c) {
  return static_cast<float>((code_value(c, 10, 15) + code_value(c + 1, 10, 15)) / 2);
}

TEST(HalfTest, TiesToEvenAtSeveralExponents) {
  // Codes whose neighbours differ across subnormals, min normal, 1.0, large and top binades.
  for (uint32_t base : {0x0000u, 0x0400u, 0x0800u, 0x3800u, 0x3c00u, 0x5000u, 0x7800u}) {
    for (uint32_t m : {0u, 1u, 2u, 3u, 511u, 512u, 1021u, 1022u}) {
      const uint32_t c = base + m;
      const float mid = half_midpoint(c);
      const uint16_t even = static_cast<uint16_t>((c & 1u) == 0 ? c : c + 1);
      EXPECT_EQ(float_to_half_bits(mid), even) << std::hex << c;
      EXPECT_EQ(float_to_half_bits(-mid), even | 0x8000u) << std::hex << c;
      // One float ulp either side of the tie decides it.
      EXPECT_EQ(float_to_half_bits(std::nextafter(mid, 0.0f)), c) << std::hex << c;
      EXPECT_EQ(float_to_half_bits(std::nextafter(mid, 1e30f)), c + 1) << std::hex << c;
    }
  }
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f), 0x3c00);      // tie 1.0 vs next -> even
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even upper
  EXPECT_EQ(float_to_half_bits(2047.5f), 0x6800);              // tie 2047/2048 -> 2048
}

TEST(HalfTest, SubnormalsAndUnderflow) {
  for (uint32_t k = 1; k < 1024; ++k) {
    EXPECT_EQ(float_to_half_bits(std::ldexp(static_cast<float>(k), -24)), k);
  }
  EXPECT_EQ(float_to_half_bits(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);   // tie with 0 -> 0 (even)
  EXPECT_EQ(float_to_half_bits(-0x1p-25f), 0x8000);  // keeps the sign
  EXPECT_EQ(float_to_half_bits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half_bits(1.5f * 0x1p-24f), 0x0002);     // tie 1 vs 2 -> 2
  EXPECT_EQ(float_to_half_bits(2.5f * 0x1p-24f), 0x0002);     // tie 2 vs 3 -> 2
  EXPECT_EQ(float_to_half_bits(1023.5f * 0x1p-24f), 0x0400);  // tie into min normal
  EXPECT_EQ(float_to_half_bits(0x1p-14f), 0x0400);            // min normal
  EXPECT_EQ(float_to_half_bits(f32(0x00000001)), 0x0000);     // float subnormals vanish
  EXPECT_EQ(float_to_half_bits(f32(0x807fffff)), 0x8000);
  EXPECT_EQ(half_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_bits_to_float(0x83ff), -1023 * 0x1p-24f);
}

TEST(HalfTest, OverflowZerosInfNaN) {
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);  // max finite
  EXPECT_EQ(float_to_half_bits(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // tie with 65536 -> even = inf
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(1e30f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_half_bits(f32(0x7fc00000)), 0x7e00);
  EXPECT_EQ(float_to_half_bits(f32(0xffc00000)), 0xfe00);
  EXPECT_EQ(float_to_half_bits(f32(0x7f800001)), 0x7e00);  // signalling -> quiet
  EXPECT_EQ(float_to_half_bits(f32(0x7fbfe000)), 0x7fff);  // top payload bits kept
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(0.1f), 0x2e66);
}

TEST(HalfTest, MatchesBruteForceReferenceOnRandomFloats) {
  const std::vector<uint32_t> xs = random_patterns(2'000'000, 127 - 27, 127 + 17, 1234);
  const Grid& grid = half_grid();
  int64_t mismatches = 0;
  for (uint32_t x : xs) {
    const float f = f32(x);
    const uint16_t got = float_to_half_bits(f);
    if (std::isnan(f)) {
      const uint16_t want =
          static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
      if (got != want) ++mismatches;
      continue;
    }
    const uint16_t want = ref_narrow(f, grid, 0x8000);
    if (got != want && mismatches++ < 10) {
      ADD_FAILURE() << std::hex << "x=" << x << " got " << got << " want " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// ---------------------------------------------------------------- bf16

TEST(BFloat16Test, EveryPatternWidensExactlyAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float f = bf16_bits_to_float(b);
    ASSERT_EQ(bits(f), h << 16);
    ASSERT_EQ(bits(static_cast<float>(BFloat16::from_bits(b))), h << 16);
    const uint16_t back = float_to_bf16_bits(f);
    if ((h & 0x7fffu) > 0x7f80u) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_EQ(back & 0xff80u, h & 0xff80u) << std::hex << h;  // sign and NaN exponent
      ASSERT_NE(back & 0x0040u, 0u) << std::hex << h;           // quiet
      ASSERT_EQ(back & 0x003fu, h & 0x003fu) << std::hex << h;  // payload kept
    } else {
      ASSERT_EQ(back, b) << std::hex << h;
      ASSERT_EQ(BFloat16(f).x, b);
    }
  }
}

TEST(BFloat16Test, DirectedCases) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);             // tie -> even
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);         // tie -> even (up)
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);  // above tie
  EXPECT_EQ(float_to_bf16_bits(-1.0f - 0x1p-8f), 0xbf80);
  EXPECT_EQ(float_to_bf16_bits(f32(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(float_to_bf16_bits(f32(0x7f7f8000)), 0x7f80);  // tie past max -> inf
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  // float32 subnormals are rounded, not flushed.
  EXPECT_EQ(float_to_bf16_bits(f32(0x00008000)), 0x0000);  // tie -> 0
  EXPECT_EQ(float_to_bf16_bits(f32(0x00008001)), 0x0001);
  EXPECT_EQ(float_to_bf16_bits(f32(0x00018000)), 0x0002);  // tie -> even
  EXPECT_EQ(float_to_bf16_bits(f32(0x007fffff)), 0x0080);  // rounds up to min normal
  EXPECT_EQ(float_to_bf16_bits(f32(0x80000001)), 0x8000);
  EXPECT_EQ(float_to_bf16_bits(f32(0x7fc00000)), 0x7fc0);
  EXPECT_EQ(float_to_bf16_bits(f32(0xff800001)), 0xffc0);  // signalling -> quiet, sign kept
  EXPECT_EQ(float_to_bf16_bits(f32(0x7fa12345)), 0x7fe1);
  EXPECT_EQ(float_to_bf16_bits(f32(0x7fffffff)), 0x7fff);
  EXPECT_EQ(float_to_bf16_bits(3.14159265f), 0x4049);
}

TEST(BFloat16Test, MatchesBruteForceReferenceOnRandomFloats) {
  const std::vector<uint32_t> xs = random_patterns(2'000'000, 0, 254, 99);
  const Grid& grid = bf16_grid();
  int64_t mismatches = 0;
  for (uint32_t x : xs) {
    const float f = f32(x);
    const uint16_t got = float_to_bf16_bits(f);
    if (std::isnan(f)) {
      if (got != static_cast<uint16_t>((x >> 16) | 0x40u)) ++mismatches;
      continue;
    }
    const uint16_t want = ref_narrow(f, grid, 0x8000);
    if (got != want && mismatches++ < 10) {
      ADD_FAILURE() << std::hex << "x=" << x << " got " << got << " want " << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(BFloat16Test, EveryMidpointTiesToEven) {
  const Grid& grid = bf16_grid();
  for (uint32_t c = 0; c + 1 < 0x7f80u; ++c) {
    const float mid = static_cast<float>((grid.values[c] + grid.values[c + 1]) / 2);
    const uint16_t even = static_cast<uint16_t>((c & 1u) == 0 ? c : c + 1);
    ASSERT_EQ(float_to_bf16_bits(mid), even) << std::hex << c;
    ASSERT_EQ(float_to_bf16_bits(-mid), even | 0x8000u) << std::hex << c;
  }
}

}  // namespace
}  // namespace mantissa
