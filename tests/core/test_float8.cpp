// FP8 E4M3 / E5M2 conversions against the rules and test vectors of docs/numerics.md ("FP8
// formats") and a brute-force reference.
#include "mantissa/core/float8.h"
#include "support/test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace mantissa {
namespace {

using namespace mantissa::testing;

using Mode = Fp8Saturation;
constexpr Mode kSat = Mode::kSatFinite;
constexpr Mode kNoSat = Mode::kNoSat;

float f32(uint32_t b) { return std::bit_cast<float>(b); }

// One row of the test-vector table (docs/numerics.md): input bits, then E4M3 sat/decoded/non-sat,
// E5M2 sat/decoded/non-sat.
struct Row {
  double x;
  uint32_t bits;
  uint8_t e4m3_sat;
  double e4m3_value;
  uint8_t e4m3_nosat;
  uint8_t e5m2_sat;
  double e5m2_value;
  uint8_t e5m2_nosat;
};

const Row kSpecRows[] = {
    {0.0, 0x00000000, 0x00, 0, 0x00, 0x00, 0, 0x00},
    {-0.0, 0x80000000, 0x80, -0.0, 0x80, 0x80, -0.0, 0x80},
    {1.0, 0x3F800000, 0x38, 1, 0x38, 0x3C, 1, 0x3C},
    {-1.0, 0xBF800000, 0xB8, -1, 0xB8, 0xBC, -1, 0xBC},
    {0.10000000149011612, 0x3DCCCCCD, 0x1D, 0.1015625, 0x1D, 0x2E, 0.09375, 0x2E},
    {0.30000001192092896, 0x3E99999A, 0x2A, 0.3125, 0x2A, 0x35, 0.3125, 0x35},
    {-2.5, 0xC0200000, 0xC2, -2.5, 0xC2, 0xC1, -2.5, 0xC1},
    {3.141590118408203, 0x40490FD0, 0x45, 3.25, 0x45, 0x42, 3, 0x42},
    {240.0, 0x43700000, 0x77, 240, 0x77, 0x5C, 256, 0x5C},
    {448.0, 0x43E00000, 0x7E, 448, 0x7E, 0x5F, 448, 0x5F},
    {449.0, 0x43E08000, 0x7E, 448, 0x7E, 0x5F, 448, 0x5F},
    {464.0, 0x43E80000, 0x7E, 448, 0x7E, 0x5F, 448, 0x5F},
    {464.0000915527344, 0x43E80003, 0x7E, 448, 0x7F, 0x5F, 448, 0x5F},
    {480.0, 0x43F00000, 0x7E, 448, 0x7F, 0x60, 512, 0x60},
    {1000000.0, 0x49742400, 0x7E, 448, 0x7F, 0x7B, 57344, 0x7C},
    {kInf, 0x7F800000, 0x7E, 448, 0x7F, 0x7B, 57344, 0x7C},
    {-kInf, 0xFF800000, 0xFE, -448, 0xFF, 0xFB, -57344, 0xFC},
    {kNaN, 0x7FC00000, 0x7F, kNaN, 0x7F, 0x7F, kNaN, 0x7F},
    {1.0625, 0x3F880000, 0x38, 1, 0x38, 0x3C, 1, 0x3C},
    {1.1875, 0x3F980000, 0x3A, 1.25, 0x3A, 0x3D, 1.25, 0x3D},
    {1.125, 0x3F900000, 0x39, 1.125, 0x39, 0x3C, 1, 0x3C},
    {1.375, 0x3FB00000, 0x3B, 1.375, 0x3B, 0x3E, 1.5, 0x3E},
    {0.015625, 0x3C800000, 0x08, 0.015625, 0x08, 0x24, 0.015625, 0x24},
    {0.013671875, 0x3C600000, 0x07, 0.013671875, 0x07, 0x23, 0.013671875, 0x23},
    {0.0146484375, 0x3C700000, 0x08, 0.015625, 0x08, 0x24, 0.015625, 0x24},
    {0.001953125, 0x3B000000, 0x01, 0.001953125, 0x01, 0x18, 0.001953125, 0x18},
    {0.0009765625, 0x3A800000, 0x00, 0, 0x00, 0x14, 0.0009765625, 0x14},
    {0.0009766601724550128, 0x3A800347, 0x01, 0.001953125, 0x01, 0x14, 0.0009765625, 0x14},
    {0.0029296875, 0x3B400000, 0x02, 0.00390625, 0x02, 0x1A, 0.0029296875, 0x1A},
    {57344.0, 0x47600000, 0x7E, 448, 0x7F, 0x7B, 57344, 0x7B},
    {61439.0, 0x476FFF00, 0x7E, 448, 0x7F, 0x7B, 57344, 0x7B},
    {61440.0, 0x47700000, 0x7E, 448, 0x7F, 0x7B, 57344, 0x7C},
    {6.103515625e-05, 0x38800000, 0x00, 0, 0x00, 0x04, 6.103515625e-05, 0x04},
    {1.52587890625e-05, 0x37800000, 0x00, 0, 0x00, 0x01, 1.52587890625e-05, 0x01},
    {7.62939453125e-06, 0x37000000, 0x00, 0, 0x00, 0x00, 0, 0x00},
    {2.288818359375e-05, 0x37C00000, 0x00, 0, 0x00, 0x02, 3.0517578125e-05, 0x02},
};

void expect_same_value(float got, double want, const char* what, uint32_t bits) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << std::hex << " x=" << bits;
  } else {
    EXPECT_EQ(static_cast<double>(got), want) << what << std::hex << " x=" << bits;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << what << std::hex << " x=" << bits;
  }
}

TEST(Float8Test, SpecTable) {
  for (const Row& r : kSpecRows) {
    const float x = f32(r.bits);
    if (!std::isnan(r.x)) {
      EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(r.x)), r.bits) << r.x;
    }
    EXPECT_EQ(float_to_fp8_e4m3_bits(x, kSat), r.e4m3_sat) << std::hex << r.bits;
    EXPECT_EQ(float_to_fp8_e4m3_bits(x), r.e4m3_sat) << std::hex << r.bits;  // default mode
    EXPECT_EQ(float_to_fp8_e4m3_bits(x, kNoSat), r.e4m3_nosat) << std::hex << r.bits;
    EXPECT_EQ(float_to_fp8_e5m2_bits(x, kSat), r.e5m2_sat) << std::hex << r.bits;
    EXPECT_EQ(float_to_fp8_e5m2_bits(x), r.e5m2_sat) << std::hex << r.bits;
    EXPECT_EQ(float_to_fp8_e5m2_bits(x, kNoSat), r.e5m2_nosat) << std::hex << r.bits;
    expect_same_value(fp8_e4m3_bits_to_float(r.e4m3_sat), r.e4m3_value, "e4m3", r.bits);
    expect_same_value(fp8_e5m2_bits_to_float(r.e5m2_sat), r.e5m2_value, "e5m2", r.bits);
    EXPECT_EQ(Float8E4M3(x).x, r.e4m3_sat);
    EXPECT_EQ(Float8E5M2(x).x, r.e5m2_sat);
  }
}

TEST(Float8Test, NaNInputLosesSignInBothModes) {
  for (uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffffffffu}) {
    for (Mode m : {kSat, kNoSat}) {
      EXPECT_EQ(float_to_fp8_e4m3_bits(f32(b), m), 0x7f);
      EXPECT_EQ(float_to_fp8_e5m2_bits(f32(b), m), 0x7f);
    }
  }
}

// The decoding table for E4M3 (S = 0), row E, column M.
const double kE4M3Table[16][8] = {
    {0, 0.001953125, 0.00390625, 0.005859375, 0.0078125, 0.009765625, 0.01171875, 0.013671875},
    {0.015625, 0.017578125, 0.01953125, 0.021484375, 0.0234375, 0.025390625, 0.02734375,
     0.029296875},
    {0.03125, 0.03515625, 0.0390625, 0.04296875, 0.046875, 0.05078125, 0.0546875, 0.05859375},
    {0.0625, 0.0703125, 0.078125, 0.0859375, 0.09375, 0.1015625, 0.109375, 0.1171875},
    {0.125, 0.140625, 0.15625, 0.171875, 0.1875, 0.203125, 0.21875, 0.234375},
    {0.25, 0.28125, 0.3125, 0.34375, 0.375, 0.40625, 0.4375, 0.46875},
    {0.5, 0.5625, 0.625, 0.6875, 0.75, 0.8125, 0.875, 0.9375},
    {1, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875},
    {2, 2.25, 2.5, 2.75, 3, 3.25, 3.5, 3.75},
    {4, 4.5, 5, 5.5, 6, 6.5, 7, 7.5},
    {8, 9, 10, 11, 12, 13, 14, 15},
    {16, 18, 20, 22, 24, 26, 28, 30},
    {32, 36, 40, 44, 48, 52, 56, 60},
    {64, 72, 80, 88, 96, 104, 112, 120},
    {128, 144, 160, 176, 192, 208, 224, 240},
    {256, 288, 320, 352, 384, 416, 448, kNaN},
};

TEST(Float8Test, E4M3DecodesEveryCodePerTable) {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const double want = kE4M3Table[(c >> 3) & 15][c & 7] * ((c & 0x80) ? -1 : 1);
    const float got = fp8_e4m3_bits_to_float(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(got)) << c;
      EXPECT_EQ(std::signbit(got), c >= 0x80) << c;
    } else {
      ++finite;
      EXPECT_EQ(static_cast<double>(got), want) << c;
      EXPECT_EQ(std::signbit(got), c >= 0x80) << c;  // 0x80 is -0
      EXPECT_FALSE(std::isinf(got)) << c;
    }
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x08), 0x1p-6f);
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(static_cast<float>(Float8E4M3::from_bits(0xb8)), -1.0f);
  EXPECT_EQ(Float8E4M3::kMax, 448.0f);
}

TEST(Float8Test, E5M2DecodesEveryCodePerFormula) {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const int e = (c >> 2) & 31;
    const int m = c & 3;
    const double sign = (c & 0x80) ? -1 : 1;
    const float got = fp8_e5m2_bits_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(std::signbit(got), c >= 0x80) << c;
    if (e == 31) {
      if (m == 0) {
        EXPECT_TRUE(std::isinf(got)) << c;  // 0x7C, 0xFC
      } else {
        EXPECT_TRUE(std::isnan(got)) << c;  // 0x7D-0x7F, 0xFD-0xFF
      }
      continue;
    }
    ++finite;
    const double want =
        e == 0 ? sign * m * std::ldexp(1.0, -16) : sign * (1 + m / 4.0) * std::ldexp(1.0, e - 15);
    EXPECT_EQ(static_cast<double>(got), want) << c;
  }
  EXPECT_EQ(finite, 248);
  // E5M2 anchors (docs/numerics.md, "FP8 formats").
  const std::pair<int, double> anchors[] = {
      {0x3C, 1},       {0x3D, 1.25},        {0x3E, 1.5},    {0x3F, 1.75},  {0x40, 2},
      {0x5F, 448},     {0x60, 512},         {0x78, 32768},  {0x7A, 49152}, {0x7B, 57344},
      {0x04, 0x1p-14}, {0x03, 3 * 0x1p-16}, {0x01, 0x1p-16}};
  for (auto [code, value] : anchors) {
    EXPECT_EQ(fp8_e5m2_bits_to_float(static_cast<uint8_t>(code)), value) << code;
  }
  EXPECT_EQ(Float8E5M2::kMax, 57344.0f);
}

bool e4m3_is_nan(int c) { return (c & 0x7f) == 0x7f; }
bool e5m2_is_special(int c) { return (c & 0x7c) == 0x7c; }

TEST(Float8Test, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t b = static_cast<uint8_t>(c);
    for (Mode m : {kSat, kNoSat}) {
      if (!e4m3_is_nan(c)) {
        EXPECT_EQ(float_to_fp8_e4m3_bits(fp8_e4m3_bits_to_float(b), m), b) << c;
      }
      if (!e5m2_is_special(c)) {
        EXPECT_EQ(float_to_fp8_e5m2_bits(fp8_e5m2_bits_to_float(b), m), b) << c;
      }
    }
  }
  // E5M2 infinities: saturate, or stay infinite without saturation.
  EXPECT_EQ(float_to_fp8_e5m2_bits(fp8_e5m2_bits_to_float(0x7c), kSat), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2_bits(fp8_e5m2_bits_to_float(0xfc), kNoSat), 0xfc);
}

// Brute-force reference (independent of float8.cpp): the positive finite values of a format in
// code order, plus the first value past the top (where RNE would land on overflow). Nearest
// value, ties to the even code; landing on or beyond the extra entry is overflow.
struct Fp8Ref {
  std::vector<double> values;  // index = code
  uint8_t max_code;
  uint8_t nosat_overflow;

  uint8_t encode(float f, Mode mode) const {
    if (std::isnan(f)) return 0x7f;
    const uint8_t sign = std::signbit(f) ? 0x80 : 0;
    const double x = std::fabs(static_cast<double>(f));
    uint32_t code;
    if (x >= values.back()) {
      code = static_cast<uint32_t>(values.size() - 1);
    } else {
      const auto hi =
          static_cast<uint32_t>(std::upper_bound(values.begin(), values.end(), x) - values.begin());
      const uint32_t lo = hi - 1;
      const double mid = (values[lo] + values[hi]) / 2;
      code = values[lo] == x ? lo : x < mid ? lo : x > mid ? hi : ((lo & 1) == 0 ? lo : hi);
    }
    if (code > max_code) return sign | (mode == kSat ? max_code : nosat_overflow);
    return static_cast<uint8_t>(sign | code);
  }
};

const Fp8Ref& e4m3_ref() {
  static const Fp8Ref r = [] {
    Fp8Ref ref{{}, 0x7e, 0x7f};
    for (int c = 0; c <= 0x7e; ++c) ref.values.push_back(kE4M3Table[c >> 3][c & 7]);
    ref.values.push_back(480);  // 1.875 * 2^8: the value code 0x7F would have
    return ref;
  }();
  return r;
}

const Fp8Ref& e5m2_ref() {
  static const Fp8Ref r = [] {
    Fp8Ref ref{{}, 0x7b, 0x7c};
    for (int c = 0; c <= 0x7b; ++c) {
      const int e = c >> 2, m = c & 3;
      ref.values.push_back(e == 0 ? m * std::ldexp(1.0, -16)
                                  : (1 + m / 4.0) * std::ldexp(1.0, e - 15));
    }
    ref.values.push_back(65536);
    return ref;
  }();
  return r;
}

void check_against_reference(float f, int64_t& mismatches) {
  for (Mode m : {kSat, kNoSat}) {
    const uint8_t a = float_to_fp8_e4m3_bits(f, m), ra = e4m3_ref().encode(f, m);
    const uint8_t b = float_to_fp8_e5m2_bits(f, m), rb = e5m2_ref().encode(f, m);
    if ((a != ra || b != rb) && mismatches++ < 10) {
      ADD_FAILURE() << std::hex << "x=" << std::bit_cast<uint32_t>(f) << " mode "
                    << static_cast<int>(m) << " e4m3 " << int{a} << " vs " << int{ra} << ", e5m2 "
                    << int{b} << " vs " << int{rb};
    }
  }
}

TEST(Float8Test, MidpointsBetweenAdjacentCodes) {
  int64_t mismatches = 0;
  for (const Fp8Ref* ref : {&e4m3_ref(), &e5m2_ref()}) {
    for (size_t c = 0; c + 1 < ref->values.size(); ++c) {
      const float mid = static_cast<float>((ref->values[c] + ref->values[c + 1]) / 2);
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
        check_against_reference(x, mismatches);
        check_against_reference(-x, mismatches);
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  // The midpoints themselves go to the even code.
  EXPECT_EQ(float_to_fp8_e4m3_bits(0.5f * (1.0f + 1.125f)), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3_bits(0.5f * (1.125f + 1.25f)), 0x3a);
  EXPECT_EQ(float_to_fp8_e5m2_bits(0.5f * (1.25f + 1.5f)), 0x3e);
}

TEST(Float8Test, RandomFloatsMatchReference) {
  std::mt19937_64 rng(42);
  int64_t mismatches = 0;
  for (int i = 0; i < 400'000; ++i) {
    uint32_t x = static_cast<uint32_t>(rng());
    // Most draws near the fp8 ranges (2^-20 .. 2^17), the rest anywhere.
    if (i % 4 != 0) x = (x & 0x807fffffu) | ((107u + static_cast<uint32_t>(rng() % 38)) << 23);
    check_against_reference(f32(x), mismatches);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Float8Test, FloatSubnormalsAndExtremes) {
  for (uint32_t b : {0x00000001u, 0x007fffffu, 0x00400000u}) {
    for (Mode m : {kSat, kNoSat}) {
      EXPECT_EQ(float_to_fp8_e4m3_bits(f32(b), m), 0x00);
      EXPECT_EQ(float_to_fp8_e4m3_bits(f32(b | 0x80000000u), m), 0x80);
      EXPECT_EQ(float_to_fp8_e5m2_bits(f32(b), m), 0x00);
      EXPECT_EQ(float_to_fp8_e5m2_bits(f32(b | 0x80000000u), m), 0x80);
    }
  }
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(float_to_fp8_e4m3_bits(big, kSat), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-big, kSat), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-big, kNoSat), 0xff);
  EXPECT_EQ(float_to_fp8_e5m2_bits(-big, kSat), 0xfb);
  EXPECT_EQ(float_to_fp8_e5m2_bits(-big, kNoSat), 0xfc);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-464.0f, kNoSat), 0xfe);  // tie keeps 448
  EXPECT_EQ(float_to_fp8_e4m3_bits(-465.0f, kNoSat), 0xff);
  EXPECT_EQ(float_to_fp8_e5m2_bits(-61440.0f, kNoSat), 0xfc);
}

}  // namespace
}  // namespace mantissa
