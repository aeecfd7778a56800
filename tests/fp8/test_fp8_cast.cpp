// FP8 cast kernels against ml_dtypes (tests/fp8/fp8_cast_fixture.h, made by
// scripts/fp8/make_cast_fixture.py): every code, every midpoint between neighbouring codes and
// the floats next to it, NaN, inf, saturation, subnormals and ties, at three scales; the AVX2
// path must give the scalar bits, and the amax/saturation/flush statistics must agree.
#include "kernels/cpu/fp8/fp8_cast.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fp8/fp8_cast_fixture.h"
#include "kernels/cpu/fp8/rowwise_cast.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/error.h"
#include "mantissa/core/float8.h"
#include "mantissa/core/half.h"
#include "support/simd_levels.h"

namespace mantissa::kernels::fp8 {
namespace {

bool have_avx2() { return simd_level() >= SimdLevel::kAvx2; }

using mantissa::testing::simd_levels_here;

TEST(Fp8CastKernel, MatchesMlDtypesAtEveryLevel) {
  std::map<float, std::vector<const mantissa::fp8::fixture::CastRow*>> by_scale;
  for (const auto& r : mantissa::fp8::fixture::kCastRows) by_scale[r.scale].push_back(&r);
  ASSERT_EQ(by_scale.size(), 3u);
  for (SimdLevel level : simd_levels_here()) {
    for (const auto& [scale, rows] : by_scale) {
      std::vector<float> x;
      for (const auto* r : rows) x.push_back(std::bit_cast<float>(r->x_bits));
      std::vector<uint8_t> e4(x.size()), e5(x.size());
      scaled_cast(x.data(), kFloat32, e4.data(), static_cast<int64_t>(x.size()), scale,
                  kFloat8_e4m3fn, level);
      scaled_cast(x.data(), kFloat32, e5.data(), static_cast<int64_t>(x.size()), scale,
                  kFloat8_e5m2, level);
      for (size_t i = 0; i < rows.size(); ++i) {
        ASSERT_EQ(e4[i], rows[i]->e4m3) << "level " << simd_level_name(level) << " x=" << x[i]
                                        << " scale=" << scale << " (E4M3)";
        ASSERT_EQ(e5[i], rows[i]->e5m2) << "level " << simd_level_name(level) << " x=" << x[i]
                                        << " scale=" << scale << " (E5M2)";
      }
    }
  }
}

TEST(Fp8CastKernel, SpecCornerCases) {
  // A few of the rules in docs/numerics.md "FP8 formats" spelled out (the fixture holds them all):
  // ties to even, the E4M3 464 tie, the E5M2 61440 overflow tie, underflow ties to zero, NaN loses
  // its sign.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float x[] = {1.0625f, 464.0f, 480.0f, 61440.0f, 0.0009765625f, -nan, -0.0f, -1e9f};
  const uint8_t e4[] = {0x38, 0x7e, 0x7e, 0x7e, 0x00, 0x7f, 0x80, 0xfe};
  const uint8_t e5[] = {0x3c, 0x5f, 0x60, 0x7b, 0x14, 0x7f, 0x80, 0xfb};
  for (SimdLevel level : simd_levels_here()) {
    uint8_t a[8], b[8];
    scaled_cast(x, kFloat32, a, 8, 1.0f, kFloat8_e4m3fn, level);
    scaled_cast(x, kFloat32, b, 8, 1.0f, kFloat8_e5m2, level);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(a[i], e4[i]) << i;
      EXPECT_EQ(b[i], e5[i]) << i;
    }
  }
}

TEST(Fp8CastKernel, StatisticsAmaxSaturationFlush) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // scale 2: 300 -> 600 saturates in E4M3; 1e-4 -> 2e-4 flushes; NaN ignored by amax.
  std::vector<float> x = {300.0f, -1e-4f, nan, 0.0f, 1.0f, -2.0f, 100.0f, 0.5f, 6e-4f, 7.0f};
  for (SimdLevel level : simd_levels_here()) {
    std::vector<uint8_t> q(x.size());
    CastStats st = scaled_cast(x.data(), kFloat32, q.data(), 10, 2.0f, kFloat8_e4m3fn, level);
    EXPECT_EQ(st.amax, 300.0f);
    EXPECT_EQ(st.saturated, 1);  // 600
    EXPECT_EQ(st.flushed, 1);    // -2e-4 is below 2^-10; 1.2e-3 rounds up to 2^-9
    x[1] = -inf;
    st = scaled_cast(x.data(), kFloat32, q.data(), 10, 2.0f, kFloat8_e4m3fn, level);
    EXPECT_EQ(st.amax, inf);
    EXPECT_EQ(st.saturated, 2);
    EXPECT_EQ(q[1], 0xfe);
    x[1] = -1e-4f;
  }
}

// bf16 and fp16 sources widen exactly, then cast as float32 does.
TEST(Fp8CastKernel, ReducedFloatSourcesMatchScalarConversion) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  std::vector<uint16_t> src(1037);
  for (auto& b : src) b = static_cast<uint16_t>(bits(rng));
  for (DType dt : {kBFloat16, kFloat16}) {
    for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
      const float scale = 3.25f;
      std::vector<uint8_t> want(src.size());
      float amax = 0.0f;
      for (size_t i = 0; i < src.size(); ++i) {
        const float v = dt == kBFloat16 ? bf16_bits_to_float(src[i]) : half_bits_to_float(src[i]);
        if (std::fabs(v) > amax) amax = std::fabs(v);  // NaN (signalling too) ignored
        want[i] = f8 == kFloat8_e4m3fn ? float_to_fp8_e4m3_bits(v * scale)
                                       : float_to_fp8_e5m2_bits(v * scale);
      }
      for (SimdLevel level : simd_levels_here()) {
        std::vector<uint8_t> got(src.size());
        const CastStats st = scaled_cast(src.data(), dt, got.data(),
                                         static_cast<int64_t>(src.size()), scale, f8, level);
        EXPECT_EQ(got, want) << dt.name() << " " << f8.name() << " " << simd_level_name(level);
        EXPECT_EQ(st.amax, amax) << dt.name() << " " << f8.name() << " " << simd_level_name(level);
      }
    }
  }
}

TEST(Fp8CastKernel, ThreadedLongBufferEqualsOneScalarPass) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 40.0f);
  std::vector<float> x(300001);
  for (auto& v : x) v = nd(rng);
  x[123456] = 1e5f;
  std::vector<uint8_t> a(x.size()), b(x.size());
  const CastStats ref = detail::scaled_cast_scalar(
      x.data(), kFloat32, a.data(), static_cast<int64_t>(x.size()), 1.5f, kFloat8_e4m3fn);
  const CastStats got = scaled_cast(x.data(), kFloat32, b.data(), static_cast<int64_t>(x.size()),
                                    1.5f, kFloat8_e4m3fn);
  EXPECT_EQ(a, b);
  EXPECT_EQ(got.amax, ref.amax);
  EXPECT_EQ(got.saturated, ref.saturated);
  EXPECT_EQ(got.flushed, ref.flushed);
  EXPECT_EQ(ref.amax, 1e5f);
}

// The amax pass before a cast (kernels::fp8::amax) equals a plain loop over the stored values,
// the scalar body and the amax a cast of the same buffer reports, at every level, for float32,
// bfloat16 and float16 sources: the largest magnitude placed at every lane and in the scalar
// tail, NaN of either sign (passed over, even as the largest bits, and flagged), inf,
// subnormals, -0 and all-zero buffers, several chunks.
TEST(Fp8AmaxKernel, EqualsScalarAndTheCastsAmaxAtEveryLevel) {
  const float kInf = std::numeric_limits<float>::infinity();
  const float kNan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    auto encode = [&](const std::vector<float>& v) {
      std::vector<uint32_t> f32;
      std::vector<uint16_t> h16;
      for (float x : v) {
        f32.push_back(std::bit_cast<uint32_t>(x));
        h16.push_back(dt == kBFloat16 ? float_to_bf16_bits(x) : float_to_half_bits(x));
      }
      return std::make_pair(f32, h16);
    };
    auto check = [&](const std::vector<float>& v, const char* what) {
      const auto [f32, h16] = encode(v);
      float want = 0.0f;  // max |x| of the values as stored, NaN passed over
      bool want_nan = false;
      for (size_t i = 0; i < v.size(); ++i) {
        const float x = dt == kFloat32    ? v[i]
                        : dt == kBFloat16 ? bf16_bits_to_float(h16[i])
                                          : half_bits_to_float(h16[i]);
        want_nan = want_nan || std::isnan(x);
        if (!std::isnan(x)) want = std::max(want, std::fabs(x));
      }
      const void* src = dt == kFloat32 ? static_cast<const void*>(f32.data()) : h16.data();
      const auto n = static_cast<int64_t>(v.size());
      const Amax ref = detail::amax_scalar(src, dt, n);
      EXPECT_EQ(ref.amax, want) << what << " " << dt.name();
      EXPECT_EQ(ref.nan, want_nan) << what << " " << dt.name();
      std::vector<uint8_t> codes(v.size());
      EXPECT_EQ(
          std::bit_cast<uint32_t>(ref.amax),
          std::bit_cast<uint32_t>(scaled_cast(src, dt, codes.data(), n, 1.0f, kFloat8_e4m3fn).amax))
          << what << " " << dt.name();
      for (SimdLevel level : simd_levels_here()) {
        const Amax got = amax(src, dt, n, level);
        ASSERT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(ref.amax))
            << what << " " << dt.name() << " at " << simd_level_name(level) << " n " << n;
        ASSERT_EQ(got.nan, ref.nan)
            << what << " " << dt.name() << " at " << simd_level_name(level) << " n " << n;
      }
    };
    // The largest value at each position of up to 130 elements (vector lanes of 8, 16, 32 and
    // 64, steps of two vectors, and a tail).
    for (int64_t n : {1, 7, 8, 15, 16, 31, 32, 33, 64, 75, 130}) {
      for (int64_t at = 0; at < n; ++at) {
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v) x = std::fabs(nd(rng)) < 1.0f ? 0.5f : -0.25f;
        v[at] = at % 2 ? -6.5f : 6.5f;
        check(v, "position");
        v[at] = at % 2 ? -kNan : kNan;  // NaN above inf in the bits: never the amax
        check(v, "nan");
        v[at] = at % 2 ? -kInf : kInf;
        check(v, "inf");
      }
    }
    check(std::vector<float>(40, 0.0f), "zeros");
    check(std::vector<float>(40, -0.0f), "negative zeros");
    check(std::vector<float>(40, kNan), "all NaN");
    const float tiny = dt == kFloat16 ? 0x1p-24f : 0x1p-133f;  // the smallest subnormal of each
    std::vector<float> sub(40, tiny);
    sub[37] = -3 * tiny;
    check(sub, "subnormals");
    check({}, "empty");
    // Several chunks of the threaded pass, the largest in the ragged last one.
    std::vector<float> big(200003);
    for (auto& x : big) x = nd(rng);
    big[200001] = -40.0f;
    big[5] = kNan;
    check(big, "chunks");
  }
}

// A [rows, cols] matrix of every kind of value (normal, saturating, flushed, NaN of both signs,
// inf, -0), as float32 bits and as bfloat16/float16 bits.
struct MixedMatrix {
  std::vector<uint32_t> f32;
  std::vector<uint16_t> h16;
  const void* data(DType dt) const {
    return dt == kFloat32 ? static_cast<const void*>(f32.data()) : h16.data();
  }
  float at(DType dt, int64_t i) const {
    const auto k = static_cast<size_t>(i);
    return dt == kFloat32    ? std::bit_cast<float>(f32[k])
           : dt == kBFloat16 ? bf16_bits_to_float(h16[k])
                             : half_bits_to_float(h16[k]);
  }
};

// with_nan false: the NaNs left out (normal values in their places).
MixedMatrix mixed_matrix(DType dt, int64_t n, uint32_t seed, bool with_nan = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::uniform_int_distribution<int> kind(0, 19);
  MixedMatrix m;
  for (int64_t i = 0; i < n; ++i) {
    float x = nd(rng);
    switch (kind(rng)) {
      case 0:
        if (with_nan) x = std::numeric_limits<float>::quiet_NaN();
        break;
      case 1:
        if (with_nan) x = -std::numeric_limits<float>::quiet_NaN();
        break;
      case 2:
        x = i % 2 ? std::numeric_limits<float>::infinity() : -1e30f;
        break;
      case 3:
        x = -0.0f;
        break;
      case 4:
        x *= 1e-6f;
        break;  // flushed at small scales
      case 5:
        x *= 3000.0f;
        break;  // saturating
      default:
        break;
    }
    m.f32.push_back(std::bit_cast<uint32_t>(x));
    m.h16.push_back(dt == kBFloat16 ? float_to_bf16_bits(x) : float_to_half_bits(x));
  }
  return m;
}

// column_amax of m (rows x cols of dt) equals a plain loop down each column (largest |x| with
// NaN passed over, and whether a NaN was there) at every level.
void expect_column_amax_of_a_plain_loop(const MixedMatrix& m, DType dt, int64_t rows,
                                        int64_t cols) {
  for (SimdLevel level : simd_levels_here()) {
    std::vector<Amax> got(static_cast<size_t>(cols));
    column_amax(m.data(dt), dt, rows, cols, got.data(), level);
    for (int64_t c = 0; c < cols; ++c) {
      float want = 0.0f;
      bool nan = false;
      for (int64_t r = 0; r < rows; ++r) {
        const float x = m.at(dt, r * cols + c);
        nan = nan || std::isnan(x);
        if (!std::isnan(x)) want = std::max(want, std::fabs(x));
      }
      const auto& g = got[static_cast<size_t>(c)];
      ASSERT_EQ(std::bit_cast<uint32_t>(g.amax), std::bit_cast<uint32_t>(want))
          << dt.name() << " " << rows << "x" << cols << " column " << c << " at "
          << simd_level_name(level);
      ASSERT_EQ(g.nan, nan) << dt.name() << " column " << c << " at " << simd_level_name(level);
    }
  }
}

// For widths that fill whole vectors and leave tails, with and without NaNs (the AVX2 body takes
// the largest bits alone first and keeps them where no column holds a NaN).
TEST(Fp8AmaxKernel, ColumnAmaxEqualsAPlainLoopAtEveryLevel) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16})
    for (int64_t rows : {1, 3, 37})
      for (int64_t cols : {1, 7, 8, 9, 17, 40})
        for (bool with_nan : {true, false})
          expect_column_amax_of_a_plain_loop(
              mixed_matrix(dt, rows * cols, static_cast<uint32_t>(rows * cols), with_nan), dt, rows,
              cols);
}

// A matrix large enough that its rows are split into bands over threads (three here, whatever
// the machine has; 301 rows do not divide evenly): the merged maxima are the plain loop's, with
// a column's largest value in the first row, another's in the last, and NaNs in the last band
// only.
TEST(Fp8AmaxKernel, ColumnAmaxOverBandsOfRowsEqualsAPlainLoop) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  const int64_t rows = 301, cols = 257;
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    for (bool with_nan : {true, false})
      expect_column_amax_of_a_plain_loop(mixed_matrix(dt, rows * cols, 7, with_nan), dt, rows,
                                         cols);
    MixedMatrix m = mixed_matrix(dt, rows * cols, 8, false);
    const auto put = [&](int64_t i, float x) {
      m.f32[static_cast<size_t>(i)] = std::bit_cast<uint32_t>(x);
      m.h16[static_cast<size_t>(i)] =
          dt == kBFloat16 ? float_to_bf16_bits(x) : float_to_half_bits(x);
    };
    put(3, -60000.0f);
    put((rows - 1) * cols + 4, 50000.0f);
    put((rows - 1) * cols + 5, std::numeric_limits<float>::quiet_NaN());
    put((rows - 2) * cols + cols - 1, std::numeric_limits<float>::quiet_NaN());
    expect_column_amax_of_a_plain_loop(m, dt, rows, cols);
  }
  omp_set_num_threads(threads);
}

// scaled_cast_columns gives each element the code and statistics of a one-element scalar cast
// by its column's scale, at every level, both formats, for widths with and without tails and
// scales that saturate, flush, are NaN or 0.
TEST(Fp8CastKernel, ColumnScalesEqualOneScalarCastPerElementAtEveryLevel) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16})
    for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2})
      for (int64_t cols : {1, 7, 8, 17, 40, 100}) {
        const int64_t rows = 5;
        const MixedMatrix m = mixed_matrix(dt, rows * cols, static_cast<uint32_t>(cols * 7 + 1));
        std::vector<float> scales(static_cast<size_t>(cols));
        for (int64_t c = 0; c < cols; ++c)
          scales[static_cast<size_t>(c)] = c % 11 == 3 ? std::numeric_limits<float>::quiet_NaN()
                                           : c % 11 == 5
                                               ? 0.0f
                                               : std::ldexp(1.37f, static_cast<int>(c % 9) - 4);
        std::vector<uint8_t> want(static_cast<size_t>(rows * cols));
        CastStats ref;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t i = r * cols + c;
            const float x = m.at(dt, i);
            const CastStats s = detail::scaled_cast_scalar(
                &x, kFloat32, &want[static_cast<size_t>(i)], 1, scales[static_cast<size_t>(c)], f8);
            ref.amax = std::max(ref.amax, s.amax);
            ref.saturated += s.saturated;
            ref.flushed += s.flushed;
          }
        for (SimdLevel level : simd_levels_here()) {
          std::vector<uint8_t> got(want.size(), 0xAB);
          const CastStats st =
              scaled_cast_columns(m.data(dt), dt, got.data(), rows, cols, scales.data(), f8, level);
          ASSERT_EQ(got, want) << dt.name() << " " << f8.name() << " cols " << cols << " at "
                               << simd_level_name(level);
          EXPECT_EQ(std::bit_cast<uint32_t>(st.amax), std::bit_cast<uint32_t>(ref.amax));
          EXPECT_EQ(st.saturated, ref.saturated) << dt.name() << " at " << simd_level_name(level);
          EXPECT_EQ(st.flushed, ref.flushed) << dt.name() << " at " << simd_level_name(level);
        }
      }
}

// The cast that also widens (each chunk's codes widened while in cache) writes the codes,
// statistics and widened bf16 bits of a plain cast followed by dequantize(..., bf16, 1), at every
// level, for both formats, threaded (several chunks, a ragged last one) and for NaN, inf,
// saturating and flushed inputs.
TEST(Fp8CastKernel, WidenedCastEqualsCastThenDequantize) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 30.0f);
  std::vector<float> x(200003);
  for (auto& v : x) v = nd(rng);
  x[3] = NAN;
  x[70000] = -INFINITY;
  x[70001] = 1e30f;
  x[140000] = 1e-30f;
  x[140001] = -0.0f;
  const int64_t n = static_cast<int64_t>(x.size());
  for (DType fp8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    for (SimdLevel level : simd_levels_here()) {
      std::vector<uint8_t> a(x.size()), b(x.size());
      std::vector<uint16_t> want(x.size()), got(x.size(), 0xBEEF);
      const CastStats ref = scaled_cast(x.data(), kFloat32, a.data(), n, 2.0f, fp8, level);
      dequantize(a.data(), fp8, want.data(), kBFloat16, n, 1.0f, level);
      const CastStats st =
          scaled_cast_widened(x.data(), kFloat32, b.data(), got.data(), n, 2.0f, fp8, level);
      EXPECT_EQ(a, b) << simd_level_name(level);
      EXPECT_EQ(want, got) << simd_level_name(level);
      EXPECT_EQ(st.amax, ref.amax);
      EXPECT_EQ(st.saturated, ref.saturated);
      EXPECT_EQ(st.flushed, ref.flushed);
      EXPECT_GT(ref.saturated, 0);
      EXPECT_GT(ref.flushed, 0);
    }
  }
  // Every code: the values of all 256 codes cast with scale 1 give every code back (NaN codes
  // give 0x7f), so the widening of each one, subnormals and the largest included, is checked.
  for (DType fp8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    std::vector<float> all(256 * 3);
    for (int c = 0; c < 256 * 3; ++c) all[c] = detail::decode_table(fp8)[c % 256];
    const int64_t m = static_cast<int64_t>(all.size());
    for (SimdLevel level : simd_levels_here()) {
      std::vector<uint8_t> a(all.size()), b(all.size());
      std::vector<uint16_t> want(all.size()), got(all.size());
      scaled_cast(all.data(), kFloat32, a.data(), m, 1.0f, fp8, level);
      dequantize(a.data(), fp8, want.data(), kBFloat16, m, 1.0f, level);
      scaled_cast_widened(all.data(), kFloat32, b.data(), got.data(), m, 1.0f, fp8, level);
      EXPECT_EQ(a, b) << simd_level_name(level);
      EXPECT_EQ(want, got) << simd_level_name(level) << " " << fp8.name();
    }
  }
  EXPECT_THROW(scaled_cast_widened(x.data(), kFloat32, std::vector<uint8_t>(4).data(), nullptr, 4,
                                   1.0f, kFloat8_e4m3fn),
               Error);
}

TEST(Fp8DequantizeKernel, MatchesMlDtypesAtEveryLevel) {
  for (SimdLevel level : simd_levels_here()) {
    for (const auto& r : mantissa::fp8::fixture::kDequantRows) {
      const DType f8 = r.e5m2 ? kFloat8_e5m2 : kFloat8_e4m3fn;
      // A 33-element buffer, so the SIMD bodies (8 and 32 codes per step), not only their
      // scalar tails, run.
      uint8_t codes[33];
      for (auto& c : codes) c = r.code;
      float f[33];
      uint16_t h[33];
      dequantize(codes, f8, f, kFloat32, 33, r.scale_inv, level);
      dequantize(codes, f8, h, kBFloat16, 33, r.scale_inv, level);
      ASSERT_EQ(std::bit_cast<uint32_t>(f[0]), r.f32_bits) << int(r.code);
      ASSERT_EQ(std::bit_cast<uint32_t>(f[32]), r.f32_bits) << int(r.code);
      ASSERT_EQ(h[0], r.bf16_bits) << int(r.code);
      ASSERT_EQ(h[32], r.bf16_bits) << int(r.code);
    }
  }
}

TEST(Fp8DequantizeKernel, Avx2NaNBitsEqualScalar) {
  if (!have_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    std::vector<float> a(256), b(256);
    std::vector<uint16_t> c(256), d(256);
    detail::dequantize_scalar(codes.data(), f8, a.data(), kFloat32, 256, 0.3f);
    detail::dequantize_avx2(codes.data(), f8, b.data(), kFloat32, 256, 0.3f);
    detail::dequantize_scalar(codes.data(), f8, c.data(), kBFloat16, 256, 0.3f);
    detail::dequantize_avx2(codes.data(), f8, d.data(), kBFloat16, 256, 0.3f);
    for (int i = 0; i < 256; ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << i;
      EXPECT_EQ(c[i], d[i]) << i;
    }
  }
}

// Every code, both formats, both outputs, at scale_inv 1 (the bf16 output copies the table's
// bits) and 0.3 (scaled, then rounded): the AVX-512 body equals the scalar one bit for bit.
TEST(Fp8DequantizeKernel, Avx512EveryCodeEqualsScalar) {
  if (simd_level() < SimdLevel::kAvx512) GTEST_SKIP() << "no AVX-512 (F, BW, VL) on this CPU";
  std::vector<uint8_t> codes(256 + 7);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 37 + 5);
  const int64_t n = static_cast<int64_t>(codes.size());
  for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    for (float s : {1.0f, 0.3f}) {
      std::vector<float> a(n), b(n);
      std::vector<uint16_t> c(n), d(n);
      detail::dequantize_scalar(codes.data(), f8, a.data(), kFloat32, n, s);
      detail::dequantize_avx512(codes.data(), f8, b.data(), kFloat32, n, s);
      detail::dequantize_scalar(codes.data(), f8, c.data(), kBFloat16, n, s);
      detail::dequantize_avx512(codes.data(), f8, d.data(), kBFloat16, n, s);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
            << "code " << int(codes[i]) << " scale_inv " << s;
        ASSERT_EQ(c[i], d[i]) << "code " << int(codes[i]) << " scale_inv " << s;
      }
    }
  }
}

// Casting every 4099th float32 bit pattern (NaN, inf, subnormals included) from float32,
// bfloat16 and float16 sources, with one scale for all and with a scale per element, at each
// SIMD level this CPU has: codes and statistics equal the scalar cast's. Scales of 0 and inf
// turn finite values into zeros, infinities and (0 * inf) NaN. The length leaves a partial
// vector and a scalar tail after the wide loops.
TEST(Fp8CastKernel, SweepOfBitPatternsEqualsScalarAtEveryLevel) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4099)
    x.push_back(std::bit_cast<float>(uint32_t(b)));
  const int64_t n = static_cast<int64_t>(x.size());
  ASSERT_NE(n % 32, 0);
  std::vector<uint16_t> xb(n), xh(n);
  for (int64_t i = 0; i < n; ++i) {
    xb[i] = float_to_bf16_bits(x[i]);
    xh[i] = float_to_half_bits(x[i]);
  }
  const float inf = std::numeric_limits<float>::infinity();
  using CastFn = CastStats (*)(const void*, DType, uint8_t*, int64_t, float, DType);
  using CastEachFn = CastStats (*)(const void*, DType, uint8_t*, int64_t, const float*, DType);
  std::vector<std::pair<CastFn, CastEachFn>> bodies = {
      {detail::scaled_cast_avx2, detail::scaled_cast_each_avx2}};
  if (simd_level() >= SimdLevel::kAvx512)
    bodies.push_back({detail::scaled_cast_avx512, detail::scaled_cast_each_avx512});
  auto expect_equal = [](const CastStats& r, const CastStats& g, const std::string& what) {
    EXPECT_EQ(std::bit_cast<uint32_t>(r.amax), std::bit_cast<uint32_t>(g.amax)) << what;
    EXPECT_EQ(r.saturated, g.saturated) << what;
    EXPECT_EQ(r.flushed, g.flushed) << what;
  };
  std::vector<float> scales(n);
  for (int64_t i = 0; i < n; ++i) scales[i] = std::ldexp(1.0f, static_cast<int>(i % 41) - 20);
  for (size_t level = 0; level < bodies.size(); ++level) {
    const auto [cast, cast_each] = bodies[level];
    for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
      for (DType src : {kFloat32, kBFloat16, kFloat16}) {
        const void* p = src == kFloat32    ? static_cast<const void*>(x.data())
                        : src == kBFloat16 ? static_cast<const void*>(xb.data())
                                           : static_cast<const void*>(xh.data());
        for (float scale : {1.0f, 448.0f / 3.0f, 1.0f / 1024, 0.0f, inf}) {
          const std::string what =
              fmt::format("level {} {} from {} scale {}", level == 0 ? "avx2" : "avx512", f8.name(),
                          src.name(), scale);
          std::vector<uint8_t> a(n), b(n);
          const CastStats r = detail::scaled_cast_scalar(p, src, a.data(), n, scale, f8);
          const CastStats g = cast(p, src, b.data(), n, scale, f8);
          ASSERT_EQ(a, b) << what;
          expect_equal(r, g, what);
        }
        const std::string what = fmt::format("level {} {} from {} per-element scales",
                                             level == 0 ? "avx2" : "avx512", f8.name(), src.name());
        std::vector<uint8_t> a(n), b(n);
        const CastStats r = detail::scaled_cast_each_scalar(p, src, a.data(), n, scales.data(), f8);
        const CastStats g = cast_each(p, src, b.data(), n, scales.data(), f8);
        ASSERT_EQ(a, b) << what;
        expect_equal(r, g, what);
      }
    }
  }
}

// The largest finite bfloat16 magnitude (bits) whose product with `scale` stays within the
// format's max: the largest amax a buffer may have for the table cast under that scale.
uint16_t largest_within(float scale, DType f8) {
  const float max = f8 == kFloat8_e4m3fn ? 448.0f : 57344.0f;
  uint16_t a = 0x7F7F;
  while (a > 0 && std::fabs(bf16_bits_to_float(a) * scale) > max) --a;
  return a;
}

// scaled_cast_after_amax (given the amax pass of the same bfloat16 or float32 buffer) gives
// scaled_cast_scalar's codes, saturated and flushed counts and amax, at every level this CPU has;
// and so does scaled_cast_widened_after_amax, whose bfloat16 copies are dequantize_scalar's of
// those codes.
template <typename T>
void expect_after_amax_is_scalar(const std::vector<T>& x, float scale, DType f8,
                                 const std::string& what) {
  const DType dtype = std::is_same_v<T, float> ? kFloat32 : kBFloat16;
  const auto n = static_cast<int64_t>(x.size());
  const Amax known = amax(x.data(), dtype, n);
  std::vector<uint8_t> want(x.size()), got(x.size());
  const CastStats r = detail::scaled_cast_scalar(x.data(), dtype, want.data(), n, scale, f8);
  std::vector<uint16_t> want_wide(x.size()), got_wide(x.size());
  detail::dequantize_scalar(want.data(), f8, want_wide.data(), kBFloat16, n, 1.0f);
  for (SimdLevel level : simd_levels_here()) {
    for (bool widened : {false, true}) {
      std::fill(got.begin(), got.end(), uint8_t{0x55});
      std::fill(got_wide.begin(), got_wide.end(), uint16_t{0x5555});
      const CastStats g =
          widened ? scaled_cast_widened_after_amax(x.data(), dtype, got.data(), got_wide.data(), n,
                                                   scale, f8, known, level)
                  : scaled_cast_after_amax(x.data(), dtype, got.data(), n, scale, f8, known, level);
      const std::string at = what + " at " + simd_level_name(level) + (widened ? " widened" : "");
      ASSERT_EQ(want, got) << at;
      if (widened) ASSERT_EQ(want_wide, got_wide) << at;
      EXPECT_EQ(std::bit_cast<uint32_t>(r.amax), std::bit_cast<uint32_t>(g.amax)) << at;
      EXPECT_EQ(r.saturated, g.saturated) << at;
      EXPECT_EQ(r.flushed, g.flushed) << at;
    }
  }
}

// Every bfloat16 value whose product stays within the format (both signs, zeros, subnormals,
// the largest such value itself), under power-of-2 and other scales, shuffled (the 128-value
// steps with a subnormal or flushed code, which the vector body hands to scaled_cast, among
// those without) and in order of magnitude (long runs of each), with a short last step.
TEST(Fp8CastKernel, AfterAmaxEqualsScalarForEveryBfloat16AtEveryLevel) {
  std::mt19937 rng(63);
  for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    const float max = f8 == kFloat8_e4m3fn ? 448.0f : 57344.0f;
    // Scales with the table (the current recipe's for amaxes 16.375, 1, 3, 2^-100 (E4M3) and
    // 1e30; powers of 2) and without (products that reach no normal code before bfloat16's
    // subnormals, a scale of 2^127).
    const std::vector<std::pair<float, bool>> scales = {
        {max / 16.375f, true}, {max, true},
        {max / 3.0f, true},    {max / 0x1p-100f, f8 == kFloat8_e4m3fn},
        {max / 1e30f, true},   {1.0f, true},
        {0x1p-3f, true},       {0x1p10f, true},
        {1.5f, true},          {3.7e-3f, true},
        {0x1.8p126f, false},   {0x1p127f, false}};
    for (const auto& [scale, usable] : scales) {
      const uint16_t top = largest_within(scale, f8);
      std::vector<uint16_t> x;
      for (uint32_t a = 0; a <= top; ++a) {
        x.push_back(static_cast<uint16_t>(a));
        x.push_back(static_cast<uint16_t>(a | 0x8000));
      }
      const std::string what = fmt::format("{} scale {}", f8.name(), scale);
      const Amax known = amax(x.data(), kBFloat16, static_cast<int64_t>(x.size()));
      EXPECT_EQ(detail::bf16_table_cast(scale, f8, known).usable, usable) << what;
      std::shuffle(x.begin(), x.end(), rng);
      x.resize(x.size() - 37);
      expect_after_amax_is_scalar(x, scale, f8, what + " shuffled");
      std::sort(x.begin(), x.end(),
                [](uint16_t a, uint16_t b) { return (a & 0x7FFF) < (b & 0x7FFF); });
      expect_after_amax_is_scalar(x, scale, f8, what + " by magnitude");
    }
  }
}

// The cases around the table cast: NaN or inf in the buffer, all zeros, a subnormal amax, values
// whose products are the format's max, a scale under which the amax's product rounds above it,
// lengths with every kind of short last step and several threads' chunks, and the codes
// streamed past the caches.
TEST(Fp8CastKernel, AfterAmaxEdgeCasesEqualScalarAtEveryLevel) {
  std::mt19937 rng(64);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const auto randn_bf16 = [&](int64_t n) {
    std::vector<uint16_t> x(static_cast<size_t>(n));
    for (auto& v : x) v = float_to_bf16_bits(nd(rng));
    return x;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    const float max = f8 == kFloat8_e4m3fn ? 448.0f : 57344.0f;
    const auto current = [max](const std::vector<uint16_t>& x) {
      const Amax a = amax(x.data(), kBFloat16, static_cast<int64_t>(x.size()));
      return a.amax > 0.0f && std::isfinite(max / a.amax) ? max / a.amax : 1.0f;
    };
    for (int64_t n : {0, 1, 31, 127, 128, 129, 255, 300, 65536 + 129, 3 * 65536 + 77}) {
      std::vector<uint16_t> x = randn_bf16(n);
      for (int64_t i = 0; i < n; i += 5) x[static_cast<size_t>(i)] = i % 2 ? 0x8000 : 0;
      expect_after_amax_is_scalar(x, current(x), f8, fmt::format("{} n {}", f8.name(), n));
    }
    std::vector<uint16_t> x = randn_bf16(1000);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf}) {
      std::vector<uint16_t> y = x;
      y[500] = float_to_bf16_bits(bad);
      expect_after_amax_is_scalar(y, current(x), f8, fmt::format("{} with {}", f8.name(), bad));
    }
    expect_after_amax_is_scalar(std::vector<uint16_t>(1000, 0x8000), 1.0f, f8, "zeros");
    std::vector<uint16_t> sub(1000);
    for (auto& v : sub) v = static_cast<uint16_t>(rng() % 0x80 | (rng() % 2 ? 0x8000 : 0));
    expect_after_amax_is_scalar(sub, current(sub), f8, "subnormal amax");
    // Products at the max: a power-of-2 scale and the current recipe's scale of that amax.
    std::vector<uint16_t> at_max = x;
    at_max[7] = float_to_bf16_bits(max / 16);
    at_max[300] = float_to_bf16_bits(-max / 16);
    for (float scale : {16.0f, current(at_max)})
      expect_after_amax_is_scalar(at_max, scale, f8, fmt::format("at the max, scale {}", scale));
    // An amax whose product with max / amax rounds above max: those values saturate.
    for (uint32_t a = 0x4200;; ++a) {  // from 32, above every value of x
      const float v = bf16_bits_to_float(static_cast<uint16_t>(a));
      if (v * (max / v) <= max) continue;
      std::vector<uint16_t> y = x;
      y[11] = static_cast<uint16_t>(a);
      y[999] = static_cast<uint16_t>(a | 0x8000);
      const Amax known = amax(y.data(), kBFloat16, 1000);
      ASSERT_EQ(known.amax, v);
      EXPECT_FALSE(detail::bf16_table_cast(max / v, f8, known).usable);
      expect_after_amax_is_scalar(y, max / v, f8, fmt::format("{} saturating {}", f8.name(), v));
      break;
    }
  }
  if (simd_level() < SimdLevel::kAvx2) return;
  // Streamed codes: the vector body with stream on, into a 32-byte aligned buffer.
  std::vector<uint16_t> x = randn_bf16(4096 + 100);
  x[1000] = 1;  // a subnormal: its step goes through scaled_cast
  const auto n = static_cast<int64_t>(x.size());
  const Amax known = amax(x.data(), kBFloat16, n);
  for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    const float scale = (f8 == kFloat8_e4m3fn ? 448.0f : 57344.0f) / known.amax;
    const detail::Bf16TableCast table = detail::bf16_table_cast(scale, f8, known);
    ASSERT_TRUE(table.usable);
    std::vector<uint8_t> want(x.size());
    const CastStats r = detail::scaled_cast_scalar(x.data(), kBFloat16, want.data(), n, scale, f8);
    alignas(64) static uint8_t got[4096 + 100];
    const CastStats g = detail::bf16_table_cast_avx2(x.data(), got, n, scale, f8, table, true);
    EXPECT_EQ(want, std::vector<uint8_t>(got, got + n)) << f8.name();
    EXPECT_EQ(r.flushed, g.flushed) << f8.name();
    EXPECT_EQ(r.saturated, g.saturated) << f8.name();
  }
}

// The float32 casts after the amax pass (rowwise_cast.h's cast_f32_scaled where the scale is at
// least 1): random mantissas at every exponent whose product is within the format, ties of
// E4M3's rounding, products with subnormal and flushed codes, zeros of both signs, float32
// subnormals, NaN and inf, scales below 1, an amax whose product rounds above the max, and
// lengths with every kind of short last step and several threads' chunks.
TEST(Fp8CastKernel, Float32AfterAmaxEqualsScalarAtEveryLevel) {
  std::mt19937 rng(65);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const auto as_float = [](uint64_t bits) {
    return std::bit_cast<float>(static_cast<uint32_t>(bits));
  };
  const auto mixed = [&](int64_t n, float scale) {
    // One value in 512 has a subnormal or flushed product: most 64-value steps have none.
    std::vector<float> x(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t kind = rng() % 1024;
      const uint32_t sign = rng() % 2 ? 0x80000000u : 0u;
      if (kind == 0) {  // products below E4M3's normals: subnormal or flushed codes
        x[i] = as_float(sign | (rng() & 0x007FFFFFu)) * 0x1p100f / scale * 0x1p-100f +
               as_float(sign | 0x3C800000u) * static_cast<float>(rng() % 3) / scale;
      } else if (kind < 300) {  // random mantissas, products from 2^-6 to 2^6
        x[i] = as_float(sign | ((121 + rng() % 12) << 23) | (rng() & 0x007FFFFFu)) / scale;
      } else if (kind < 600) {  // ties and their neighbours at E4M3's three mantissa bits
        const uint32_t tie = ((121 + rng() % 10) << 23) | ((rng() % 16) << 19) | (1u << 19);
        x[i] = as_float(sign | (tie + rng() % 3 - 1)) / scale;
      } else if (kind == 600) {
        x[i] = as_float(sign | (rng() % 4 == 0 ? 0u : rng() % 0x800000u));
      } else if (kind < 700) {
        x[i] = sign ? -0.0f : 0.0f;
      } else {
        x[i] = nd(rng);
      }
    }
    return x;
  };
  const auto current = [](const std::vector<float>& x, float max) {
    const Amax a = amax(x.data(), kFloat32, static_cast<int64_t>(x.size()));
    return a.amax > 0.0f && std::isfinite(max / a.amax) ? max / a.amax : 1.0f;
  };
  for (DType f8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    const float max = f8 == kFloat8_e4m3fn ? 448.0f : 57344.0f;
    for (int64_t n : {0, 1, 63, 64, 65, 1000, 65536 + 129, 3 * 65536 + 77}) {
      std::vector<float> x = mixed(n, 16.0f);
      expect_after_amax_is_scalar(x, current(x, max), f8, fmt::format("{} n {}", f8.name(), n));
    }
    for (float scale : {1.0f, 1.5f, 3.7f, 0x1p20f, 0.75f, 0x1p-20f}) {
      std::vector<float> x = mixed(5000, scale);
      const float top = max / scale;
      for (float& v : x) v = std::fabs(v) > top ? std::copysign(top, v) : v;
      expect_after_amax_is_scalar(x, scale, f8, fmt::format("{} scale {}", f8.name(), scale));
    }
    std::vector<float> x = mixed(1000, 16.0f);
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      std::vector<float> y = x;
      y[500] = bad;
      expect_after_amax_is_scalar(y, current(x, max), f8,
                                  fmt::format("{} with {}", f8.name(), bad));
    }
    // An amax whose product with max / amax rounds above max: those values saturate.
    for (uint32_t a = std::bit_cast<uint32_t>(32.0f);; ++a) {
      const float v = std::bit_cast<float>(a);
      if (v * (max / v) <= max) continue;
      std::vector<float> y = x;
      y[11] = v;
      y[999] = -v;
      expect_after_amax_is_scalar(y, max / v, f8, fmt::format("{} saturating {}", f8.name(), v));
      break;
    }
  }
  if (simd_level() < SimdLevel::kAvx2) return;
  // Streamed codes, into a 32-byte aligned buffer.
  const std::vector<float> x = mixed(4096 + 100, 16.0f);
  const auto n = static_cast<int64_t>(x.size());
  const float scale = current(x, 448.0f);
  std::vector<uint8_t> want(x.size());
  const CastStats r =
      detail::scaled_cast_scalar(x.data(), kFloat32, want.data(), n, scale, kFloat8_e4m3fn);
  alignas(64) static uint8_t got[4096 + 100];
  CastStats g;
  ASSERT_TRUE(cast_f32_scaled(x.data(), got, n, scale, amax(x.data(), kFloat32, n).amax, &g, true));
  EXPECT_EQ(want, std::vector<uint8_t>(got, got + n));
  EXPECT_EQ(r.flushed, g.flushed);
  EXPECT_EQ(r.saturated, g.saturated);
}

TEST(Fp8CastKernel, RejectsBadDtypes) {
  float x = 1.0f;
  uint8_t q = 0;
  EXPECT_THROW(scaled_cast(&x, kFloat64, &q, 1, 1.0f, kFloat8_e4m3fn), mantissa::Error);
  EXPECT_THROW(scaled_cast(&x, kFloat32, &q, 1, 1.0f, kBFloat16), mantissa::Error);
  EXPECT_THROW(dequantize(&q, kFloat8_e4m3fn, &x, kFloat16, 1, 1.0f), mantissa::Error);
}

}  // namespace
}  // namespace mantissa::kernels::fp8
