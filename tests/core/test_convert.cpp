// Bulk conversions: every SIMD path bit-identical to the scalar conversions, and the generic
// dtype-pair loop.
#include "mantissa/core/convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/convert_simd.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/core/error.h"
#include "mantissa/core/half.h"
#include "mantissa/kernels/kernel_paths.h"

namespace mantissa {
namespace {

using convert_detail::active_convert_level;
using convert_detail::force_convert_level;

float f32(uint32_t b) { return std::bit_cast<float>(b); }

// 4M float patterns: specials, every exponent with edge mantissas, then random bits (half of
// them uniform, half with exponents in the subnormal/normal range of the narrow formats).
const std::vector<float>& narrow_inputs() {
  static const std::vector<float> xs = [] {
    std::vector<float> v;
    const uint32_t specials[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
                                 0xffc00000, 0x7f800001, 0xffbfffff, 0x7fa12345, 0x00000001,
                                 0x807fffff, 0x00008000, 0x00018000, 0x007f8000, 0x7f7fffff,
                                 0x7f7f8000, 0x477ff000, 0x43e80000, 0x47700000, 0x3a800000};
    for (uint32_t s : specials) v.push_back(f32(s));
    for (uint32_t e = 0; e < 256; ++e) {
      for (uint32_t m : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u, 0x400000u, 0x7fffffu}) {
        v.push_back(f32((e << 23) | m));
        v.push_back(f32(0x80000000u | (e << 23) | m));
      }
    }
    std::mt19937_64 rng(7);
    while (v.size() < (size_t{4} << 20)) {
      uint32_t x = static_cast<uint32_t>(rng());
      if (v.size() % 2) x = (x & 0x807fffffu) | (static_cast<uint32_t>(rng() % 60 + 90) << 23);
      v.push_back(f32(x));
    }
    return v;
  }();
  return xs;
}

std::vector<uint16_t> all_16bit_patterns() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

template <typename T>
int64_t count_bit_mismatches(const std::vector<T>& got, const std::vector<T>& want) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) ++bad;
  }
  return bad;
}

class ConvertLevelTest : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    if (!force_convert_level(GetParam())) {
      GTEST_SKIP() << "CPU lacks " << simd_level_name(GetParam());
    }
  }
  void TearDown() override { force_convert_level(std::nullopt); }
};

TEST_P(ConvertLevelTest, WidenEvery16BitPattern) {
  ASSERT_EQ(active_convert_level(), GetParam());
  const std::vector<uint16_t> src = all_16bit_patterns();
  std::vector<float> got(src.size()), want(src.size());
  convert_bf16_to_f32(src.data(), got.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) want[i] = bf16_bits_to_float(src[i]);
  EXPECT_EQ(count_bit_mismatches(got, want), 0) << "bf16->f32";
  convert_f16_to_f32(src.data(), got.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) want[i] = half_bits_to_float(src[i]);
  EXPECT_EQ(count_bit_mismatches(got, want), 0) << "f16->f32";
}

TEST_P(ConvertLevelTest, NarrowMillionsOfFloats) {
  const std::vector<float>& xs = narrow_inputs();
  const auto n = static_cast<int64_t>(xs.size());
  std::vector<uint16_t> got16(xs.size()), want16(xs.size());
  convert_f32_to_bf16(xs.data(), got16.data(), n);
  for (size_t i = 0; i < xs.size(); ++i) want16[i] = float_to_bf16_bits(xs[i]);
  EXPECT_EQ(count_bit_mismatches(got16, want16), 0) << "f32->bf16";
  convert_f32_to_f16(xs.data(), got16.data(), n);
  for (size_t i = 0; i < xs.size(); ++i) want16[i] = float_to_half_bits(xs[i]);
  EXPECT_EQ(count_bit_mismatches(got16, want16), 0) << "f32->f16";

  std::vector<uint8_t> got8(xs.size()), want8(xs.size());
  for (Fp8Saturation mode : {Fp8Saturation::kSatFinite, Fp8Saturation::kNoSat}) {
    convert_f32_to_fp8(xs.data(), got8.data(), n, kFloat8_e4m3fn, mode);
    for (size_t i = 0; i < xs.size(); ++i) want8[i] = float_to_fp8_e4m3_bits(xs[i], mode);
    EXPECT_EQ(count_bit_mismatches(got8, want8), 0) << "f32->e4m3 " << static_cast<int>(mode);
    convert_f32_to_fp8(xs.data(), got8.data(), n, kFloat8_e5m2, mode);
    for (size_t i = 0; i < xs.size(); ++i) want8[i] = float_to_fp8_e5m2_bits(xs[i], mode);
    EXPECT_EQ(count_bit_mismatches(got8, want8), 0) << "f32->e5m2 " << static_cast<int>(mode);
  }
}

// Every length up to a few vectors, at unaligned offsets, with guard values after the end:
// tails must convert exactly n elements and touch nothing else.
TEST_P(ConvertLevelTest, OddLengthsAndOffsets) {
  const std::vector<float>& xs = narrow_inputs();
  constexpr uint16_t kGuard16 = 0xdead;
  constexpr uint8_t kGuard8 = 0xa5;
  for (int64_t off : {0, 1, 3}) {
    for (int64_t n = 0; n <= 67; ++n) {
      const float* src = xs.data() + off + 20;  // start just past the specials: varied data
      std::vector<uint16_t> d16(static_cast<size_t>(n + off + 4), kGuard16);
      convert_f32_to_bf16(src, d16.data() + off, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d16[off + i], float_to_bf16_bits(src[i])) << n;
      for (size_t i = off + n; i < d16.size(); ++i) ASSERT_EQ(d16[i], kGuard16) << n;
      std::fill(d16.begin(), d16.end(), kGuard16);
      convert_f32_to_f16(src, d16.data() + off, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d16[off + i], float_to_half_bits(src[i])) << n;
      for (size_t i = off + n; i < d16.size(); ++i) ASSERT_EQ(d16[i], kGuard16) << n;

      std::vector<float> df(static_cast<size_t>(n + off + 4), -7.0f);
      convert_bf16_to_f32(d16.data() + off, df.data() + off, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(df[off + i]),
                  std::bit_cast<uint32_t>(bf16_bits_to_float(d16[off + i])));
      }
      convert_f16_to_f32(d16.data() + off, df.data() + off, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(df[off + i]),
                  std::bit_cast<uint32_t>(half_bits_to_float(d16[off + i])));
      }
      for (size_t i = off + n; i < df.size(); ++i) ASSERT_EQ(df[i], -7.0f) << n;

      std::vector<uint8_t> d8(static_cast<size_t>(n + off + 4), kGuard8);
      convert_f32_to_fp8(src, d8.data() + off, n, kFloat8_e4m3fn);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d8[off + i], float_to_fp8_e4m3_bits(src[i]));
      for (size_t i = off + n; i < d8.size(); ++i) ASSERT_EQ(d8[i], kGuard8) << n;
      convert_f32_to_fp8(src, d8.data() + off, n, kFloat8_e5m2, Fp8Saturation::kNoSat);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(d8[off + i], float_to_fp8_e5m2_bits(src[i], Fp8Saturation::kNoSat));
      }
      for (size_t i = off + n; i < d8.size(); ++i) ASSERT_EQ(d8[i], kGuard8) << n;
    }
  }
}

// A vector that holds a float32 subnormal in one lane and ordinary values elsewhere: the
// AVX-512 BF16 path must fix that lane up without disturbing the others.
TEST_P(ConvertLevelTest, Bf16SubnormalLanes) {
  std::vector<float> xs(64);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 1.0f + static_cast<float>(i) * 0x1p-9f;
  xs[3] = f32(0x007fffff);   // rounds up to the smallest normal bf16
  xs[17] = f32(0x80018000);  // tie -> even, negative
  xs[40] = f32(0x7f800001);  // signalling NaN
  xs[63] = f32(0x00000001);
  std::vector<uint16_t> got(xs.size());
  convert_f32_to_bf16(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(got[i], float_to_bf16_bits(xs[i])) << i;
  EXPECT_EQ(got[3], 0x0080);
  EXPECT_EQ(got[17], 0x8002);
  EXPECT_EQ(got[40], 0x7fc0);
}

// The streaming (non-temporal store) kernels give the plain kernels' bits at every length and
// destination offset (heads before the first 32-byte boundary, tails), and write nothing
// outside [0, n).
TEST(ConvertStreaming, SameBitsAsThePlainKernelsAtEveryOffset) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  namespace cd = convert_detail;
  const std::vector<float>& xs = narrow_inputs();
  constexpr uint16_t kGuard16 = 0xdead;
  for (int64_t off = 0; off < 17; ++off) {
    for (int64_t n : {0, 1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 257, 1000}) {
      const float* src = xs.data() + 20 + off;
      alignas(64) static uint16_t d16[1100 + 64], want16[1100 + 64];
      std::fill(std::begin(d16), std::end(d16), kGuard16);
      std::fill(std::begin(want16), std::end(want16), kGuard16);
      cd::f32_to_bf16_avx2_stream(src, d16 + off, n);
      cd::f32_to_bf16_avx2(src, want16 + off, n);
      ASSERT_EQ(std::memcmp(d16, want16, sizeof(d16)), 0) << "f32->bf16 off " << off << " n " << n;
      cd::f32_to_f16_avx2_stream(src, d16 + off, n);
      cd::f32_to_f16_avx2(src, want16 + off, n);
      ASSERT_EQ(std::memcmp(d16, want16, sizeof(d16)), 0) << "f32->f16 off " << off << " n " << n;

      alignas(64) static float df[1100 + 64], wantf[1100 + 64];
      std::fill(std::begin(df), std::end(df), -7.0f);
      std::fill(std::begin(wantf), std::end(wantf), -7.0f);
      cd::bf16_to_f32_avx2_stream(d16 + off, df + off, n);
      cd::bf16_to_f32_avx2(d16 + off, wantf + off, n);
      ASSERT_EQ(std::memcmp(df, wantf, sizeof(df)), 0) << "bf16->f32 off " << off << " n " << n;
      cd::f16_to_f32_avx2_stream(d16 + off, df + off, n);
      cd::f16_to_f32_avx2(d16 + off, wantf + off, n);
      ASSERT_EQ(std::memcmp(df, wantf, sizeof(df)), 0) << "f16->f32 off " << off << " n " << n;

      // FP8: one byte an element, so the offsets 0..16 and the lengths above cross the 32-byte
      // boundary in every way; both saturation modes.
      alignas(64) static uint8_t d8[1100 + 64], want8[1100 + 64];
      for (const Fp8Saturation mode : {Fp8Saturation::kSatFinite, Fp8Saturation::kNoSat}) {
        std::fill(std::begin(d8), std::end(d8), uint8_t{0xa5});
        std::fill(std::begin(want8), std::end(want8), uint8_t{0xa5});
        cd::f32_to_fp8_e4m3_avx2_stream(src, d8 + off, n, mode);
        cd::f32_to_fp8_e4m3_avx2(src, want8 + off, n, mode);
        ASSERT_EQ(std::memcmp(d8, want8, sizeof(d8)), 0) << "f32->e4m3 off " << off << " n " << n;
        cd::f32_to_fp8_e5m2_avx2_stream(src, d8 + off, n, mode);
        cd::f32_to_fp8_e5m2_avx2(src, want8 + off, n, mode);
        ASSERT_EQ(std::memcmp(d8, want8, sizeof(d8)), 0) << "f32->e5m2 off " << off << " n " << n;
      }
    }
  }
}

// A bulk conversion with an output past the streaming threshold (at level avx2 it takes the
// streaming kernels, split over the threads) still gives the scalar conversions' bits.
TEST(ConvertStreaming, BulkConversionsPastTheThresholdKeepTheBits) {
  const int64_t n = convert_detail::streaming_convert_min_bytes() / 2 + 37;  // 16-bit outputs
  ASSERT_GE(n, int64_t{4} << 20);
  const std::vector<float>& xs = narrow_inputs();
  std::vector<float> src(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) src[i] = xs[static_cast<size_t>(i) % xs.size()];
  std::vector<uint16_t> d16(static_cast<size_t>(n));
  convert_f32_to_bf16(src.data(), d16.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d16[i], float_to_bf16_bits(src[i])) << i;
  std::vector<float> df(static_cast<size_t>(n));
  convert_bf16_to_f32(d16.data(), df.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(df[i]), std::bit_cast<uint32_t>(bf16_bits_to_float(d16[i])));
  convert_f32_to_f16(src.data(), d16.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(d16[i], float_to_half_bits(src[i])) << i;
  convert_f16_to_f32(d16.data(), df.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(df[i]), std::bit_cast<uint32_t>(half_bits_to_float(d16[i])));
  // FP8 streams from 5 bytes an element (source and output) past the threshold.
  const int64_t n8 = convert_detail::streaming_convert_min_bytes() / 5 + 41;
  std::vector<uint8_t> d8(static_cast<size_t>(n8));
  for (const DType fp8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    convert_f32_to_fp8(src.data(), d8.data(), n8, fp8);
    for (int64_t i = 0; i < n8; ++i)
      ASSERT_EQ(d8[i], fp8 == kFloat8_e4m3fn ? float_to_fp8_e4m3_bits(src[i])
                                             : float_to_fp8_e5m2_bits(src[i]))
          << fp8.name() << " " << i;
  }
  // Which kernel the level takes: the streaming forms exist at avx2 only.
  EXPECT_EQ(convert_detail::f32_to_bf16_streaming_kernel() != nullptr,
            active_convert_level() == SimdLevel::kAvx2);
}

INSTANTIATE_TEST_SUITE_P(Levels, ConvertLevelTest,
                         ::testing::Values(SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512,
                                           SimdLevel::kAvx512Bf16),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

TEST(ConvertTest, ForcingALevelTheCpuLacksIsRefused) {
  const SimdLevel max = simd_level();
  EXPECT_TRUE(force_convert_level(SimdLevel::kScalar));
  EXPECT_EQ(active_convert_level(), SimdLevel::kScalar);
  if (max != SimdLevel::kAvx512Bf16) {
    EXPECT_FALSE(force_convert_level(SimdLevel::kAvx512Bf16));
    EXPECT_EQ(active_convert_level(), SimdLevel::kScalar);
  }
  EXPECT_TRUE(force_convert_level(std::nullopt));
  EXPECT_EQ(active_convert_level(), max);
}

TEST(ConvertTest, Fp8DecodeMatchesScalarForEveryCode) {
  std::vector<uint8_t> codes(256 * 3 + 5);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 37 + 11);
  std::vector<float> out(codes.size());
  for (DType t : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    convert_fp8_to_f32(codes.data(), out.data(), static_cast<int64_t>(codes.size()), t);
    for (size_t i = 0; i < codes.size(); ++i) {
      const float want =
          t == kFloat8_e4m3fn ? fp8_e4m3_bits_to_float(codes[i]) : fp8_e5m2_bits_to_float(codes[i]);
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want)) << i;
    }
  }
}

// ---- convert_buffer over all dtype pairs ----

constexpr DType kAllTypes[] = {kFloat64,       kFloat32,     kFloat16, kBFloat16,
                               kFloat8_e4m3fn, kFloat8_e5m2, kInt64,   kInt32,
                               kUInt8,         kInt8,        kBool};

// Random bytes valid for `t`: bool bytes are 0/1; int64 stays within +-2^53 so float64 holds it.
std::vector<uint8_t> random_buffer(DType t, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> buf(static_cast<size_t>(n) * t.itemsize());
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  if (t == kBool) {
    for (auto& b : buf) b &= 1;
  } else if (t == kInt64) {
    auto* p = reinterpret_cast<int64_t*>(buf.data());
    for (int64_t i = 0; i < n; ++i) p[i] >>= 11 + (i % 40);  // many magnitudes
  } else if (t == kFloat64) {
    // Doubles within the float range, with some exact small integers.
    auto* p = reinterpret_cast<double*>(buf.data());
    for (int64_t i = 0; i < n; ++i) {
      if (i % 3 == 0) p[i] = std::ldexp(static_cast<double>(rng() >> 11) / 0x1p53, (i % 300) - 150);
      if (i % 3 == 1) p[i] = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000);
    }
  } else if (t == kFloat32) {
    auto* p = reinterpret_cast<float*>(buf.data());
    for (int64_t i = 0; i < n; i += 3)
      p[i] = static_cast<float>(static_cast<int>(rng() % 601) - 300);
  }
  return buf;
}

// Going through float64 is lossless for every source here, and float64 -> narrow rounds once,
// so the direct conversion must equal the two-step one bit for bit, for every pair.
TEST(ConvertTest, EveryPairAgreesWithRouteThroughFloat64) {
  const int64_t n = 3001;
  for (DType from : kAllTypes) {
    const std::vector<uint8_t> src = random_buffer(from, n, 17 + from.itemsize());
    std::vector<double> wide(n);
    convert_buffer(src.data(), from, wide.data(), kFloat64, n);
    for (DType to : kAllTypes) {
      if (to == from) continue;  // a byte copy (NaN payloads untouched), tested below
      // Integer narrowing wraps (static_cast), while out-of-range float -> int does not.
      if (from.is_integral() && to.is_integral()) continue;
      for (Fp8Saturation mode : {Fp8Saturation::kSatFinite, Fp8Saturation::kNoSat}) {
        std::vector<uint8_t> direct(n * to.itemsize()), twostep(n * to.itemsize());
        convert_buffer(src.data(), from, direct.data(), to, n, mode);
        convert_buffer(wide.data(), kFloat64, twostep.data(), to, n, mode);
        // A float result may differ in NaN quietness (float -> double quiets a signalling
        // NaN; the bf16 -> f32 shift does not); anything else must match bit for bit.
        if (to == kFloat32 || to == kFloat64) {
          for (int64_t i = 0; i < n; ++i) {
            const double a = to == kFloat32 ? reinterpret_cast<const float*>(direct.data())[i]
                                            : reinterpret_cast<const double*>(direct.data())[i];
            const double b = to == kFloat32 ? reinterpret_cast<const float*>(twostep.data())[i]
                                            : reinterpret_cast<const double*>(twostep.data())[i];
            if (std::isnan(a) && std::isnan(b) && std::signbit(a) == std::signbit(b)) {
              std::memcpy(direct.data() + i * to.itemsize(), twostep.data() + i * to.itemsize(),
                          to.itemsize());
            }
          }
        }
        ASSERT_EQ(direct, twostep) << from.name() << " -> " << to.name();
      }
    }
  }
}

template <typename To, typename From>
std::vector<To> convert_vec(const std::vector<From>& src, DType from, DType to) {
  std::vector<To> out(src.size());
  convert_buffer(src.data(), from, out.data(), to, static_cast<int64_t>(src.size()));
  return out;
}

TEST(ConvertTest, IntegerFloatBoolSemantics) {
  const std::vector<float> f = {2.7f, -2.7f, 0.0f, -0.0f, 0.5f, 255.0f, 256.0f, -1.0f};
  EXPECT_EQ(convert_vec<int32_t>(f, kFloat32, kInt32),
            (std::vector<int32_t>{2, -2, 0, 0, 0, 255, 256, -1}));
  EXPECT_EQ(convert_vec<int64_t>(f, kFloat32, kInt64),
            (std::vector<int64_t>{2, -2, 0, 0, 0, 255, 256, -1}));
  // As compiled code does on x86: through int32, keeping the low byte.
  EXPECT_EQ(convert_vec<uint8_t>(f, kFloat32, kUInt8),
            (std::vector<uint8_t>{2, 254, 0, 0, 0, 255, 0, 255}));
  EXPECT_EQ(convert_vec<uint8_t>(f, kFloat32, kBool),
            (std::vector<uint8_t>{1, 1, 0, 0, 1, 1, 1, 1}));
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(convert_vec<uint8_t>(nan, kFloat32, kBool), std::vector<uint8_t>{1});

  const std::vector<uint8_t> b = {0, 1, 1, 0};
  EXPECT_EQ(convert_vec<float>(b, kBool, kFloat32), (std::vector<float>{0, 1, 1, 0}));
  EXPECT_EQ(convert_vec<uint16_t>(b, kBool, kBFloat16),
            (std::vector<uint16_t>{0, 0x3f80, 0x3f80, 0}));
  const std::vector<int32_t> ints = {-3, 300, 16777217};
  EXPECT_EQ(convert_vec<float>(ints, kInt32, kFloat32), (std::vector<float>{-3, 300, 16777216}));
  EXPECT_EQ(convert_vec<int8_t>(ints, kInt32, kInt8), (std::vector<int8_t>{-3, 44, 1}));
  EXPECT_EQ(convert_vec<uint8_t>(ints, kInt32, kBool), (std::vector<uint8_t>{1, 1, 1}));
  const std::vector<int8_t> i8 = {-1, 127};
  EXPECT_EQ(convert_vec<uint16_t>(i8, kInt8, kFloat16), (std::vector<uint16_t>{0xbc00, 0x57f0}));
}

TEST(ConvertTest, NarrowingFromDoubleAndInt64RoundsOnce) {
  // 1 + 2^-8 + 2^-30 lies just above a bf16 tie; rounding to float first would land on the tie
  // and then round down to 1.0.
  const std::vector<double> d = {1.0 + 0x1p-8 + 0x1p-30, 1.0 + 0x1p-11 + 0x1p-40, 65520.0 - 0x1p-20,
                                 464.0 + 0x1p-30};
  const auto bf = convert_vec<uint16_t>(d, kFloat64, kBFloat16);
  EXPECT_EQ(bf[0], 0x3f81);
  const auto h = convert_vec<uint16_t>(d, kFloat64, kFloat16);
  EXPECT_EQ(h[1], 0x3c01);
  EXPECT_EQ(h[2], 0x7bff);  // below the overflow tie stays finite
  std::vector<uint8_t> e4(d.size());
  convert_buffer(d.data(), kFloat64, e4.data(), kFloat8_e4m3fn, 4, Fp8Saturation::kNoSat);
  EXPECT_EQ(e4[3], 0x7f);  // just above 464 overflows without saturation
  const std::vector<int64_t> big = {(int64_t{1} << 25) + (int64_t{1} << 17) + 1,
                                    -((int64_t{1} << 40) + (int64_t{1} << 32) + 1)};
  const auto bfi = convert_vec<uint16_t>(big, kInt64, kBFloat16);
  EXPECT_EQ(bf16_bits_to_float(bfi[0]), 0x1p25f + 0x1p18f);
  EXPECT_EQ(bf16_bits_to_float(bfi[1]), -(0x1p40f + 0x1p33f));
  const std::vector<int64_t> extremes = {std::numeric_limits<int64_t>::min(),
                                         std::numeric_limits<int64_t>::max()};
  const auto fe = convert_vec<float>(extremes, kInt64, kFloat32);
  EXPECT_EQ(fe[0], -0x1p63f);
  EXPECT_EQ(fe[1], 0x1p63f);
  const auto be = convert_vec<uint16_t>(extremes, kInt64, kBFloat16);
  EXPECT_EQ(be[0], 0xdf00);
  EXPECT_EQ(be[1], 0x5f00);
}

TEST(ConvertTest, NarrowToNarrowGoesThroughFloat) {
  const std::vector<uint16_t> all = all_16bit_patterns();
  const auto bf = convert_vec<uint16_t>(all, kFloat16, kBFloat16);
  const auto h = convert_vec<uint16_t>(all, kBFloat16, kFloat16);
  std::vector<uint8_t> e5(all.size());
  convert_buffer(all.data(), kFloat16, e5.data(), kFloat8_e5m2, 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    ASSERT_EQ(bf[i], float_to_bf16_bits(half_bits_to_float(static_cast<uint16_t>(i))));
    ASSERT_EQ(h[i], float_to_half_bits(bf16_bits_to_float(static_cast<uint16_t>(i))));
    ASSERT_EQ(e5[i], float_to_fp8_e5m2_bits(half_bits_to_float(static_cast<uint16_t>(i))));
  }
  // fp8 -> fp16 is exact for both formats.
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  std::vector<uint16_t> wide(256);
  convert_buffer(codes.data(), kFloat8_e5m2, wide.data(), kFloat16, 256);
  for (int i = 0; i < 256; ++i) {
    if ((i & 0x7f) <= 0x7c) {
      ASSERT_EQ(wide[i], i << 8) << i;  // E5M2 is the high byte of fp16
    }
  }
}

TEST(ConvertTest, SameDtypeCopiesBytes) {
  const std::vector<uint16_t> src = {0x7c01, 0x1234, 0xffff};  // NaN payloads copied as-is
  EXPECT_EQ(convert_vec<uint16_t>(src, kFloat16, kFloat16), src);
}

TEST(ConvertTest, BadArgumentsThrow) {
  float f = 1.0f;
  uint16_t h = 0;
  uint8_t b = 0;
  EXPECT_THROW(convert_buffer(&f, kFloat32, &h, kFloat16, -1), Error);
  EXPECT_THROW(convert_buffer(nullptr, kFloat32, &h, kFloat16, 1), Error);
  EXPECT_NO_THROW(convert_buffer(nullptr, kFloat32, nullptr, kFloat16, 0));
  EXPECT_THROW(convert_f32_to_fp8(&f, &b, 1, kFloat16), Error);
  EXPECT_THROW(convert_fp8_to_f32(&b, &f, 1, kInt8), Error);
}

// ---- CPU features ----

TEST(CpuFeaturesTest, DescribeListsEveryFeature) {
  const std::string s = describe_cpu_features();
  for (const char* name :
       {"avx2:", "fma:", "f16c:", "avx512f:", "avx512bw:", "avx512vl:", "avx512_bf16:",
        "avx512_fp16:", "avx512_vnni:", "avx512_vbmi:", "amx_bf16:"}) {
    EXPECT_NE(s.find(name), std::string::npos) << name;
  }
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(&f, &cpu_features());  // detected once
  if (f.avx512_bf16 || f.avx512bw || f.avx512vl) {
    EXPECT_TRUE(f.avx512f);
  }
}

// Intel's VDPBF16PS runs at half its fp32 FMA rate, AMD's Zen 4 at twice; AMX replaces it.
TEST(CpuFeaturesTest, Bf16DotProductsPayOnAmdAndWithAmxOnly) {
  CpuFeatures f;
  f.avx2 = f.fma = f.f16c = f.avx512f = f.avx512bw = f.avx512vl = f.avx512_bf16 = true;
  EXPECT_FALSE(bf16_dot_products_pay(f, "GenuineIntel"));  // Cooper Lake, SPR without AMX
  EXPECT_TRUE(bf16_dot_products_pay(f, "AuthenticAMD"));   // Zen 4, Zen 5
  f.amx_bf16 = true;
  EXPECT_TRUE(bf16_dot_products_pay(f, "GenuineIntel"));  // Sapphire Rapids with AMX
}

// On such an Intel core cpu_features() reports AVX-512 BF16 off (so every kernel family takes
// the AVX-512-without-BF16 paths) and info says why; elsewhere nothing is set aside.
TEST(CpuFeaturesTest, SetAsideAvx512Bf16IsReportedOffAndExplained) {
  const std::string s = describe_cpu_features();
  if (avx512_bf16_set_aside()) {
    EXPECT_FALSE(cpu_features().avx512_bf16);
    EXPECT_FALSE(has_native_bf16());
    EXPECT_EQ(simd_level(), SimdLevel::kAvx512);
    EXPECT_NE(s.find("avx512_bf16: yes, not used (an Intel core without AMX"), std::string::npos)
        << s;
    EXPECT_EQ(cpu_identity().vendor, "GenuineIntel");
    EXPECT_FALSE(cpu_features().amx_bf16);
  } else {
    EXPECT_EQ(s.find("not used"), std::string::npos) << s;
    const char* forced = std::getenv("MANTISSA_USE_AVX512_BF16");
    const bool intel_without_amx =
        cpu_identity().vendor == "GenuineIntel" && !cpu_features().amx_bf16;
    if (cpu_features().avx512_bf16 && intel_without_amx) {
      ASSERT_NE(forced, nullptr) << "an Intel core without AMX kept AVX-512 BF16 unasked";
      EXPECT_STREQ(forced, "1");
    }
  }
}

TEST(CpuFeaturesTest, DisableList) {
  CpuFeatures all;
  all.avx2 = all.fma = all.f16c = all.avx512f = all.avx512bw = all.avx512vl = true;
  all.avx512_bf16 = all.avx512_fp16 = all.avx512_vnni = all.avx512_vbmi = all.amx_bf16 = true;
  CpuFeatures f = disable_simd_features(all, "avx512_bf16");
  EXPECT_FALSE(f.avx512_bf16);
  EXPECT_FALSE(f.amx_bf16);  // no CPU has AMX without AVX-512 BF16
  EXPECT_TRUE(f.avx512f && f.avx2 && f.avx512bw);
  f = disable_simd_features(all, "amx_bf16");  // a Zen 4
  EXPECT_FALSE(f.amx_bf16);
  EXPECT_TRUE(f.avx512_bf16 && f.avx512_vnni);
  f = disable_simd_features(all, " AVX512-BF16 , f16c");
  EXPECT_FALSE(f.avx512_bf16 || f.f16c);
  EXPECT_FALSE(f.avx512f || f.avx512_vnni);  // no CPU has AVX-512 without F16C
  EXPECT_TRUE(f.avx2 && f.fma);
  f = disable_simd_features(all, "avx512f");
  EXPECT_FALSE(f.avx512f || f.avx512bw || f.avx512vl || f.avx512_bf16 || f.avx512_fp16 ||
               f.avx512_vnni || f.avx512_vbmi);
  EXPECT_FALSE(f.amx_bf16);
  EXPECT_TRUE(f.avx2 && f.fma && f.f16c);
  f = disable_simd_features(all, "avx512-vnni");
  EXPECT_FALSE(f.avx512_vnni);
  EXPECT_TRUE(f.avx512f && f.avx512_bf16);
  f = disable_simd_features(all, "avx512_vbmi");
  EXPECT_FALSE(f.avx512_vbmi);
  EXPECT_TRUE(f.avx512f && f.avx512_vnni);
  f = disable_simd_features(all, "all");
  EXPECT_FALSE(f.avx2 || f.fma || f.f16c || f.avx512f || f.amx_bf16);
  f = disable_simd_features(all, "");
  EXPECT_TRUE(f.avx2 && f.avx512_bf16);
  f = disable_simd_features(all, "sse9000,avx2");  // unknown names are skipped
  EXPECT_FALSE(f.avx2);
  EXPECT_TRUE(f.fma && f.f16c);
  // Nor without AVX2 or FMA: the level falls to the portable paths, oneDNN's to SSE4.1.
  EXPECT_FALSE(f.avx512f || f.avx512bw || f.avx512_vnni || f.avx512_bf16 || f.amx_bf16);
  f = disable_simd_features(all, "fma");
  EXPECT_FALSE(f.avx512f || f.avx512_vnni);
  EXPECT_TRUE(f.avx2 && f.f16c);
}

TEST(CpuFeaturesTest, MaxLevelFollowsFeatures) {
  const CpuFeatures& f = cpu_features();
  const SimdLevel max = simd_level();
  if (f.avx512f && f.avx512bw && f.avx512vl) {
    EXPECT_EQ(max, f.avx512_bf16 ? SimdLevel::kAvx512Bf16 : SimdLevel::kAvx512);
  } else {
    EXPECT_EQ(max, f.avx2 && f.fma && f.f16c ? SimdLevel::kAvx2 : SimdLevel::kScalar);
  }
}

}  // namespace
}  // namespace mantissa
