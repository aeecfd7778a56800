// The block formats (MXFP8, MXFP4, NVFP4) against torchao's bytes (the fixtures of
// scripts/make_mx_fixtures.py) at every SIMD level this CPU has, the levels against each other
// on long inputs with NaN, infinities and short blocks, NVFP4's stochastic rounding (unbiased,
// reproducible from its seed) and the API's checks.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "kernels/cpu/mx/philox.h"
#include "mantissa/core/error.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/io/safetensors.h"
#include "support/nvfp4_cast_check.h"
#include "support/simd_levels.h"
#include "support/test_util.h"

namespace mantissa::formats {
namespace {

namespace km = kernels::mx;
using namespace mantissa::testing;

const std::map<std::string, Tensor>& fixtures() {
  static const std::map<std::string, Tensor> m = [] {
    std::map<std::string, Tensor> out;
    const std::string path =
        std::string(MANTISSA_FIXTURES_DIR) + "/formats/mx_fixtures.safetensors";
    for (auto& [k, t] : io::load_safetensors(path).tensors) out[k] = t.contiguous();
    return out;
  }();
  return m;
}

const Tensor& fixture(const std::string& key) {
  const auto it = fixtures().find(key);
  if (it == fixtures().end()) throw std::runtime_error("fixture has no " + key);
  return it->second;
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  std::vector<T> v(t.nbytes() / sizeof(T));
  std::memcpy(v.data(), t.data_ptr(), t.nbytes());
  return v;
}

// Bit-equal float32 vectors, any NaN equal to any NaN (torch and mantissa may give different
// NaN payloads on the way back; the codes and scales themselves are compared byte for byte).
::testing::AssertionResult same_values(const std::vector<float>& got,
                                       const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " != " << want[i];
  }
  return ::testing::AssertionSuccess();
}

struct Source {
  const void* data;
  DType dtype;
  int64_t rows, cols;
};
Source source_of(const Tensor& x) { return {x.data_ptr(), x.dtype(), x.size(0), x.size(1)}; }

constexpr float kE4m3MaxForTests = 448.0f;

const char* kMxCases[] = {"edge", "cut", "small", "unit", "large", "bf16"};
const std::pair<const char*, km::Element> kElements[] = {
    {"e4m3", km::Element::kE4m3}, {"e5m2", km::Element::kE5m2}, {"e2m1", km::Element::kE2m1}};
const std::pair<const char*, km::E8m0Rounding> kModes[] = {{"floor", km::E8m0Rounding::kFloor},
                                                           {"rceil", km::E8m0Rounding::kRceil}};

TEST(BlockFormats, MxMatchesTorchaoAtEveryLevel) {
  int compared = 0;
  for (const char* name : kMxCases) {
    const Source x = source_of(fixture(std::string(name) + ".x"));
    for (auto [elem_name, elem] : kElements) {
      for (auto [mode_name, mode] : kModes) {
        const std::string key = std::string(name) + "." + elem_name + "." + mode_name;
        const auto want_codes = values_of<uint8_t>(fixture(key + ".codes"));
        const auto want_scales = values_of<uint8_t>(fixture(key + ".scales"));
        const auto want_deq = values_of<float>(fixture(key + ".deq"));
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(key + " at " + simd_level_name(level));
          std::vector<uint8_t> codes(want_codes.size(), 0xAB), scales(want_scales.size(), 0xAB);
          km::mx_quantize(x.data, x.dtype, x.rows, x.cols, elem, mode, codes.data(), scales.data(),
                          level);
          EXPECT_EQ(codes, want_codes);
          EXPECT_EQ(scales, want_scales);
          std::vector<float> deq(static_cast<size_t>(x.rows * x.cols));
          km::mx_dequantize(want_codes.data(), want_scales.data(), x.rows, x.cols, elem, deq.data(),
                            level);
          EXPECT_TRUE(same_values(deq, want_deq));
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 6 * 3 * 2 * static_cast<int>(simd_levels_here().size()));
}

const char* kNvfp4Cases[] = {"nv_edge",  "nv_zero", "nv_nan",   "nv_inf",    "nv_cut",
                             "nv_small", "nv_unit", "nv_large", "nv_spread", "nv_bf16"};

TEST(BlockFormats, Nvfp4MatchesTorchaoAtEveryLevel) {
  for (const char* name : kNvfp4Cases) {
    const Source x = source_of(fixture(std::string(name) + ".x"));
    const std::string key = std::string(name) + ".nvfp4";
    const auto want_codes = values_of<uint8_t>(fixture(key + ".codes"));
    const auto want_scales = values_of<uint8_t>(fixture(key + ".scales"));
    const auto want_ts = values_of<float>(fixture(key + ".tensor_scale"));
    const auto want_deq = values_of<float>(fixture(key + ".deq"));
    for (SimdLevel level : simd_levels_here()) {
      SCOPED_TRACE(key + " at " + simd_level_name(level));
      km::Nvfp4Encoding e;
      e.tensor_scale = km::nvfp4_tensor_scale(x.data, x.dtype, x.rows * x.cols, level);
      EXPECT_TRUE(same_values({e.tensor_scale}, want_ts));
      std::vector<uint8_t> codes(want_codes.size(), 0xAB), scales(want_scales.size(), 0xAB);
      km::nvfp4_quantize(x.data, x.dtype, x.rows, x.cols, e, codes.data(), scales.data(), level);
      EXPECT_EQ(codes, want_codes);
      EXPECT_EQ(scales, want_scales);
      std::vector<float> deq(static_cast<size_t>(x.rows * x.cols));
      km::nvfp4_dequantize(want_codes.data(), want_scales.data(), x.rows, x.cols, want_ts[0],
                           deq.data(), level);
      EXPECT_TRUE(same_values(deq, want_deq));
    }
  }
}

TEST(BlockFormats, Nvfp4TilesMatchTheReferenceAtEveryLevel) {
  for (const char* name : {"w2d", "w2d_cut"}) {
    const Source x = source_of(fixture(std::string(name) + ".x"));
    const std::string key = std::string(name) + ".nvfp4_2d";
    const auto want_codes = values_of<uint8_t>(fixture(key + ".codes"));
    const auto want_scales = values_of<uint8_t>(fixture(key + ".scales"));
    const auto want_ts = values_of<float>(fixture(key + ".tensor_scale"));
    for (SimdLevel level : simd_levels_here()) {
      SCOPED_TRACE(key + " at " + simd_level_name(level));
      km::Nvfp4Encoding e;
      e.tensor_scale = km::nvfp4_tensor_scale(x.data, x.dtype, x.rows * x.cols, level);
      e.tiles_16x16 = true;
      EXPECT_TRUE(same_values({e.tensor_scale}, want_ts));
      std::vector<uint8_t> codes(want_codes.size(), 0xAB), scales(want_scales.size(), 0xAB);
      km::nvfp4_quantize(x.data, x.dtype, x.rows, x.cols, e, codes.data(), scales.data(), level);
      EXPECT_EQ(codes, want_codes);
      EXPECT_EQ(scales, want_scales);
    }
  }
}

// RCEIL takes ceil(log2(amax / max)) exactly, as cvt.rp.satfinite.ue8m0 (TransformerEngine,
// cuBLAS) does: a ratio one ulp above 2^5 gives 2^6 (code 133). torchao's eager CPU fallback
// rounds log2 in float32 and gives 2^5 (132) there; the fixtures hold no such ratio.
TEST(BlockFormats, RceilIsTheExactCeiling) {
  const float just_above = 0x1.000002p5f * kE4m3MaxForTests;
  ASSERT_EQ(just_above / kE4m3MaxForTests, 0x1.000002p5f);
  for (SimdLevel level : simd_levels_here()) {
    std::vector<float> x(32, 0.0f);
    x[7] = -just_above;
    std::vector<uint8_t> codes(32), scale(1);
    km::mx_quantize(x.data(), kFloat32, 1, 32, km::Element::kE4m3, km::E8m0Rounding::kRceil,
                    codes.data(), scale.data(), level);
    EXPECT_EQ(scale[0], 133) << simd_level_name(level);
    EXPECT_EQ(codes[7], 0xF6) << simd_level_name(level);  // -just_above / 64 rounds to -224
    x[7] = 0x1p5f * kE4m3MaxForTests;  // exactly 2^5 * 448: 2^5 (132), code 448 = 0x7E
    km::mx_quantize(x.data(), kFloat32, 1, 32, km::Element::kE4m3, km::E8m0Rounding::kRceil,
                    codes.data(), scale.data(), level);
    EXPECT_EQ(scale[0], 132);
    EXPECT_EQ(codes[7], 0x7E);
  }
}

// The public API gives the kernels' bytes and checks what it is given.
TEST(BlockFormats, ApiQuantizesAndDequantizes) {
  const Tensor& xt = fixture("unit.x");
  const std::span<const float> x(xt.data<float>(), static_cast<size_t>(xt.numel()));
  const BlockQuantized q = quantize_mxfp8(x, xt.size(0), xt.size(1));
  EXPECT_EQ(q.layout.format, FormatId::kMxfp8E4m3);
  EXPECT_EQ(q.codes, values_of<uint8_t>(fixture("unit.e4m3.floor.codes")));
  EXPECT_EQ(q.scales, values_of<uint8_t>(fixture("unit.e4m3.floor.scales")));
  EXPECT_TRUE(same_values(dequantize(q), values_of<float>(fixture("unit.e4m3.floor.deq"))));
  const BlockQuantized r =
      quantize_mxfp4(x, xt.size(0), xt.size(1), {.rounding = E8m0Rounding::kRceil});
  EXPECT_EQ(r.codes, values_of<uint8_t>(fixture("unit.e2m1.rceil.codes")));
  EXPECT_EQ(r.layout.row_code_bytes(), 48);
  EXPECT_EQ(r.layout.row_scales(), 3);

  const Tensor& bt = fixture("nv_bf16.x");
  const std::span<const BFloat16> b(static_cast<const BFloat16*>(bt.data_ptr()),
                                    static_cast<size_t>(bt.numel()));
  const BlockQuantized n = quantize_nvfp4(b, bt.size(0), bt.size(1));
  EXPECT_EQ(n.codes, values_of<uint8_t>(fixture("nv_bf16.nvfp4.codes")));
  EXPECT_EQ(n.scales, values_of<uint8_t>(fixture("nv_bf16.nvfp4.scales")));
  EXPECT_EQ(n.tensor_scale, values_of<float>(fixture("nv_bf16.nvfp4.tensor_scale"))[0]);
  EXPECT_TRUE(same_values(dequantize(n), values_of<float>(fixture("nv_bf16.nvfp4.deq"))));

  // Into caller-owned buffers, with a given per-tensor scale.
  const BlockLayout l{.format = FormatId::kNvfp4, .rows = bt.size(0), .cols = bt.size(1)};
  std::vector<uint8_t> codes(static_cast<size_t>(l.code_bytes())), scales(l.scale_bytes());
  EXPECT_EQ(quantize_into(l, b, codes, scales, {}, {.tensor_scale = n.tensor_scale}),
            n.tensor_scale);
  EXPECT_EQ(codes, n.codes);

  expect_error([&] { (void)quantize_mxfp8(x, 3, 5); }, {"needs 15 values, got 768"});
  expect_error([&] { (void)quantize_mxfp8(x, 8, 96, FormatId::kMxfp4); },
               {"quantize_mxfp8 takes mxfp8-e4m3 or mxfp8-e5m2, got mxfp4"});
  expect_error(
      [&] { dequantize_into({.format = FormatId::kNf4, .rows = 1, .cols = 4}, {}, {}, 1, {}); },
      {"format nf4 is not a block format"});
  std::vector<float> out(768);
  expect_error([&] { dequantize_into(q.layout, std::span(q.codes).first(10), q.scales, 1, out); },
               {"mxfp8-e4m3 [8, 96] has 768 code bytes, got 10"});
}

// Long inputs (threaded), with NaN, infinities, zeros, subnormals and short last blocks: every
// SIMD level gives the scalar bytes, for every element, scale mode and source dtype.
std::vector<float> rough_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-140, 120), pick(0, 199);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    v = normal(gen) * std::ldexp(1.0f, exp(gen) / 8);
    const int p = pick(gen);
    if (p == 0) v = std::nanf("");
    if (p == 1) v = -INFINITY;
    if (p == 2) v = INFINITY;
    if (p < 12 && p > 2) v = 0.0f;
    if (p == 12) v = std::ldexp(normal(gen), -135);
    if (p == 13) v = -std::nanf("");
  }
  return x;
}

TEST(BlockFormats, EveryLevelGivesTheScalarBytes) {
  const int64_t rows = 37, cols = 2061;  // 64 full MX blocks and one of 13 per row; > 2^16
  const std::vector<float> x = rough_values(rows * cols, 11);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16_bits(x[i]);
  int compared = 0;
  for (const void* src :
       {static_cast<const void*>(x.data()), static_cast<const void*>(xb.data())}) {
    const DType dtype = src == x.data() ? kFloat32 : kBFloat16;
    for (auto [elem_name, elem] : kElements) {
      for (auto [mode_name, mode] : kModes) {
        const int64_t nc = rows * km::code_bytes(elem, cols), ns = rows * ((cols + 31) / 32);
        std::vector<uint8_t> ref_c(nc), ref_s(ns);
        km::mx_quantize(src, dtype, rows, cols, elem, mode, ref_c.data(), ref_s.data(),
                        SimdLevel::kScalar);
        std::vector<float> ref_d(x.size());
        km::mx_dequantize(ref_c.data(), ref_s.data(), rows, cols, elem, ref_d.data(),
                          SimdLevel::kScalar);
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(std::string(elem_name) + "." + mode_name + " " + std::string(dtype.name()) +
                       " at " + simd_level_name(level));
          std::vector<uint8_t> c(nc), s(ns);
          km::mx_quantize(src, dtype, rows, cols, elem, mode, c.data(), s.data(), level);
          EXPECT_EQ(c, ref_c);
          EXPECT_EQ(s, ref_s);
          std::vector<float> d(x.size());
          km::mx_dequantize(ref_c.data(), ref_s.data(), rows, cols, elem, d.data(), level);
          EXPECT_EQ(0, std::memcmp(d.data(), ref_d.data(), d.size() * sizeof(float)));
          ++compared;
        }
      }
    }
    // NVFP4 with a finite per-tensor scale (the rough values' NaN would make every block NaN),
    // per 1x16 block and per 16x16 tile, rounded to nearest and stochastically (from an index
    // not a multiple of 4: rows of odd length).
    for (int variant = 0; variant < 3; ++variant) {
      const bool tiles = variant == 1;
      km::Nvfp4Encoding e;
      e.tensor_scale = 3.0e30f / km::kNvfp4TensorScaleDivisor;
      e.tiles_16x16 = tiles;
      if (variant == 2) {
        e.rounding = km::Fp4Rounding::kStochastic;
        e.seed = 0x123456789abcdefull;
        e.offset = 0xfedcba987654321ull;
      }
      const int64_t nc = rows * ((cols + 1) / 2), ns = rows * ((cols + 15) / 16);
      std::vector<uint8_t> ref_c(nc), ref_s(ns);
      km::nvfp4_quantize(src, dtype, rows, cols, e, ref_c.data(), ref_s.data(), SimdLevel::kScalar);
      std::vector<float> ref_d(x.size());
      km::nvfp4_dequantize(ref_c.data(), ref_s.data(), rows, cols, e.tensor_scale, ref_d.data(),
                           SimdLevel::kScalar);
      for (SimdLevel level : simd_levels_here()) {
        SCOPED_TRACE(std::string("nvfp4 ") + std::string(dtype.name()) + " variant " +
                     std::to_string(variant) + " at " + simd_level_name(level));
        std::vector<uint8_t> c(nc), s(ns);
        km::nvfp4_quantize(src, dtype, rows, cols, e, c.data(), s.data(), level);
        EXPECT_EQ(c, ref_c);
        EXPECT_EQ(s, ref_s);
        std::vector<float> d(x.size());
        km::nvfp4_dequantize(ref_c.data(), ref_s.data(), rows, cols, e.tensor_scale, d.data(),
                             level);
        EXPECT_EQ(0, std::memcmp(d.data(), ref_d.data(), d.size() * sizeof(float)));
        const float ts = km::nvfp4_tensor_scale(src, dtype, rows * cols, level);
        EXPECT_TRUE(std::isnan(ts));  // the rough values hold NaN
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 2 * (3 * 2 + 3) * static_cast<int>(simd_levels_here().size()));
}

// The SIMD casts take eight blocks' scales at once. Every kind of block amax, at every place in
// such a group of eight: all zeros, ratios amax / elem_max that are float32 subnormals (the
// rceil code from the mantissa's bit width), a subnormal amax, NaN, infinity, an exact power of
// two times the element max, the largest float; each level gives the scalar bytes.
TEST(BlockFormats, EveryKindOfBlockScaleInAGroupOfEight) {
  const float kinds[] = {0.0f,     0x1.8p-131f,      0x1p-140f,       NAN,
                         INFINITY, 448.0f * 0x1p-3f, 0x1.fffffep127f, 0x1.8p-118f};
  constexpr int kKinds = 8;
  const int64_t rows = kKinds, cols = 8 * 32 * 2 + 32;  // two groups of eight, one block more
  std::vector<float> x(static_cast<size_t>(rows * cols));
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> frac(-1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float amax = kinds[(r + b) % kKinds];
      for (int64_t k = 0; k < 32; ++k) {
        float v = std::isfinite(amax) ? amax * frac(gen) : frac(gen);
        if (k == (r + 3 * b) % 32) v = (b % 2) ? -amax : amax;  // the amax itself, either sign
        x[static_cast<size_t>(r * cols + b * 32 + k)] = v;
      }
    }
  }
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16_bits(x[i]);
  int compared = 0;
  for (const void* src :
       {static_cast<const void*>(x.data()), static_cast<const void*>(xb.data())}) {
    const DType dtype = src == x.data() ? kFloat32 : kBFloat16;
    for (auto [elem_name, elem] : kElements) {
      for (auto [mode_name, mode] : kModes) {
        const int64_t nc = rows * km::code_bytes(elem, cols), ns = rows * (cols / 32);
        std::vector<uint8_t> ref_c(nc), ref_s(ns);
        km::mx_quantize(src, dtype, rows, cols, elem, mode, ref_c.data(), ref_s.data(),
                        SimdLevel::kScalar);
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(std::string(elem_name) + "." + mode_name + " " + std::string(dtype.name()) +
                       " at " + simd_level_name(level));
          std::vector<uint8_t> c(nc), s(ns);
          km::mx_quantize(src, dtype, rows, cols, elem, mode, c.data(), s.data(), level);
          EXPECT_EQ(c, ref_c);
          EXPECT_EQ(s, ref_s);
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 2 * 3 * 2 * static_cast<int>(simd_levels_here().size()));
  // The subnormal ratios' rceil codes: 1.5 * 2^-131 / 448 lies below 2^-127 (clamped to code 0),
  // 1.5 * 2^-118 / 448 between 2^-127 and 2^-126 (code 1).
  std::vector<uint8_t> c(km::code_bytes(km::Element::kE4m3, cols)), sc(cols / 32);
  for (SimdLevel level : simd_levels_here()) {
    km::mx_quantize(x.data() + 1 * cols, kFloat32, 1, cols, km::Element::kE4m3,
                    km::E8m0Rounding::kRceil, c.data(), sc.data(), level);
    EXPECT_EQ(sc[0], 0) << simd_level_name(level);
    km::mx_quantize(x.data() + 7 * cols, kFloat32, 1, cols, km::Element::kE4m3,
                    km::E8m0Rounding::kRceil, c.data(), sc.data(), level);
    EXPECT_EQ(sc[0], 1) << simd_level_name(level);
  }
}

// The bfloat16 casts to FP8 in 16-bit lanes (row-wise, and the transposed cast's columns): every
// bfloat16 bit pattern (NaN, infinities, subnormals, both zeros included) in blocks whose amax
// is one of several magnitudes (multipliers from 2^126 down to 2^-127; elements saturating
// under the floor, flushed, or with subnormal codes), so each element meets both the 16-bit
// lanes and the float32 path they hand over to. Every level gives the scalar codes, scales and
// statistics, along rows and through the transposed cast (whose row count leaves a short
// block and whose column count a short strip).
TEST(BlockFormats, Bf16LanesGiveTheScalarBytesForEveryValue) {
  const float amaxes[] = {1.0f,     448.0f,          3e-5f,       0x1p-120f,
                          0x1p100f, 57344.0f * 1.5f, 0x1.8p-130f, 1.2e38f};
  const int64_t qc = 17 * 32 + 7;  // two groups of eight blocks, one block, a short block
  std::vector<uint16_t> q;         // the cast's rows, qc each
  uint32_t pattern = 0;
  for (const float amax : amaxes) {
    for (uint32_t done = 0; done < 65536;) {
      for (int64_t c = 0; c < qc; ++c, ++done)
        q.push_back(c % 32 == (q.size() / qc) % 32 ? float_to_bf16_bits(c % 2 ? -amax : amax)
                                                   : static_cast<uint16_t>(pattern++ & 0xFFFF));
    }
  }
  const int64_t qr = static_cast<int64_t>(q.size()) / qc;
  std::vector<uint16_t> t(q.size());  // q^T: the transposed cast's source
  for (int64_t r = 0; r < qr; ++r)
    for (int64_t c = 0; c < qc; ++c) t[c * qr + r] = q[r * qc + c];
  const auto same_stats = [](const km::MxCastStats& a, const km::MxCastStats& b) {
    return std::memcmp(&a.amax, &b.amax, sizeof(float)) == 0 &&
           std::memcmp(&a.scale, &b.scale, sizeof(float)) == 0 && a.saturated == b.saturated &&
           a.flushed == b.flushed && std::memcmp(&a.peak, &b.peak, sizeof(double)) == 0;
  };
  int compared = 0;
  for (const km::Element elem : {km::Element::kE4m3, km::Element::kE5m2}) {
    for (auto [mode_name, mode] : kModes) {
      const int64_t nc = qr * qc, ns = qr * ((qc + 31) / 32);
      std::vector<uint8_t> ref_c(nc), ref_s(ns);
      km::MxCastStats ref_st;
      km::mx_quantize(q.data(), kBFloat16, qr, qc, elem, mode, ref_c.data(), ref_s.data(),
                      SimdLevel::kScalar, &ref_st);
      EXPECT_GT(ref_st.flushed, 0);
      if (mode == km::E8m0Rounding::kFloor) EXPECT_GT(ref_st.saturated, 0);
      for (SimdLevel level : simd_levels_here()) {
        SCOPED_TRACE(std::string(elem == km::Element::kE4m3 ? "e4m3." : "e5m2.") + mode_name +
                     " at " + simd_level_name(level));
        for (const bool transposed : {false, true}) {
          std::vector<uint8_t> c(nc, 0xAB), sc(ns, 0xAB);
          km::MxCastStats st;
          // The column cast of q^T, its codes and scales (q^T's layout) moved to q's.
          const auto columns = [&](km::MxCastStats* out) {
            std::vector<uint8_t> tc(nc, 0xEF), ts(ns, 0xEF);
            km::mx_quantize_columns(t.data(), kBFloat16, qc, qr, elem, mode, tc.data(), ts.data(),
                                    level, out);
            const int64_t nb = (qc + 31) / 32;
            for (int64_t r = 0; r < qr; ++r) {
              for (int64_t k = 0; k < qc; ++k) c[r * qc + k] = tc[k * qr + r];
              for (int64_t b = 0; b < nb; ++b) sc[r * nb + b] = ts[b * qr + r];
            }
          };
          if (transposed)
            columns(&st);
          else
            km::mx_quantize(q.data(), kBFloat16, qr, qc, elem, mode, c.data(), sc.data(), level,
                            &st);
          EXPECT_EQ(c, ref_c) << "transposed " << transposed;
          EXPECT_EQ(sc, ref_s) << "transposed " << transposed;
          EXPECT_TRUE(same_stats(st, ref_st)) << "transposed " << transposed;
          // Without statistics: the same bytes.
          std::vector<uint8_t> c2(nc, 0xCD), sc2(ns, 0xCD);
          if (transposed) {
            columns(nullptr);
            c2 = c;
            sc2 = sc;
          } else {
            km::mx_quantize(q.data(), kBFloat16, qr, qc, elem, mode, c2.data(), sc2.data(), level);
          }
          EXPECT_EQ(c2, ref_c) << "transposed " << transposed;
          EXPECT_EQ(sc2, ref_s) << "transposed " << transposed;
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 2 * 2 * 2 * static_cast<int>(simd_levels_here().size()));
}

// The row casts on the source's bits (FP8 and E2M1): every bfloat16 bit pattern, as bfloat16 and
// widened to float32 with several low halves (zero, the lowest bit, the top bit alone, all ones:
// exact, just off and on rounding ties), in blocks whose amax is one of several magnitudes (as
// above: saturating, flushed, subnormal codes, NaN, infinity), with zero blocks and a short last
// block; every level gives the scalar codes, scales and statistics.
// Rows of kEveryValueCols elements holding every bfloat16 bit pattern, as float32 with several
// low halves (zero, the lowest bit, the top bit alone, all ones: exact, just off and on rounding
// ties) and as bfloat16 (those of low half 0), in blocks whose amax is one of several
// magnitudes (saturating, flushed, subnormal codes, NaN, infinity), with zero blocks.
constexpr int64_t kEveryValueCols = 17 * 32 + 7;  // two groups of eight, a block, a short block
void every_value_rows(std::vector<float>& q, std::vector<uint16_t>& qb) {
  const float amaxes[] = {1.0f,     448.0f,          3e-5f,       0x1p-120f,
                          0x1p100f, 57344.0f * 1.5f, 0x1.8p-130f, 1.2e38f};
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x8000u, 0xFFFFu};
  const int64_t qc = kEveryValueCols;
  uint32_t pattern = 0;
  for (const float amax : amaxes) {
    for (const uint32_t low : lows) {
      for (uint32_t done = 0; done < 65536;) {
        const bool zero_block = (q.size() / qc) % 5 == 4;  // the row's block 3 all zero
        for (int64_t c = 0; c < qc; ++c, ++done) {
          float v = std::bit_cast<float>(((pattern++ & 0xFFFFu) << 16) | low);
          if (c % 32 == (q.size() / qc) % 32) v = c % 2 ? -amax : amax;
          if (zero_block && c / 32 == 3) v = c % 7 ? 0.0f : -0.0f;
          q.push_back(v);
          if (low == 0) qb.push_back(float_to_bf16_bits(v));
        }
      }
    }
  }
}

TEST(BlockFormats, RowCastsOnTheBitsGiveTheScalarBytesForEveryValue) {
  const int64_t qc = kEveryValueCols;
  std::vector<float> q;      // the cast's float32 rows, qc each
  std::vector<uint16_t> qb;  // its bfloat16 rows
  every_value_rows(q, qb);
  const auto same_stats = [](const km::MxCastStats& a, const km::MxCastStats& b) {
    return std::memcmp(&a.amax, &b.amax, sizeof(float)) == 0 &&
           std::memcmp(&a.scale, &b.scale, sizeof(float)) == 0 && a.saturated == b.saturated &&
           a.flushed == b.flushed && std::memcmp(&a.peak, &b.peak, sizeof(double)) == 0;
  };
  int compared = 0;
  for (const DType dtype : {kFloat32, kBFloat16}) {
    const void* src = dtype == kFloat32 ? static_cast<const void*>(q.data()) : qb.data();
    const int64_t qr = static_cast<int64_t>(dtype == kFloat32 ? q.size() : qb.size()) / qc;
    for (auto [elem_name, elem] : kElements) {
      for (auto [mode_name, mode] : kModes) {
        const int64_t nc = qr * km::code_bytes(elem, qc), ns = qr * ((qc + 31) / 32);
        std::vector<uint8_t> ref_c(nc), ref_s(ns);
        km::MxCastStats ref_st;
        km::mx_quantize(src, dtype, qr, qc, elem, mode, ref_c.data(), ref_s.data(),
                        SimdLevel::kScalar, &ref_st);
        EXPECT_GT(ref_st.flushed, 0);
        if (mode == km::E8m0Rounding::kFloor) EXPECT_GT(ref_st.saturated, 0);
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(std::string(elem_name) + "." + mode_name + " " + std::string(dtype.name()) +
                       " at " + simd_level_name(level));
          std::vector<uint8_t> c(nc, 0xAB), sc(ns, 0xAB);
          km::MxCastStats st;
          km::mx_quantize(src, dtype, qr, qc, elem, mode, c.data(), sc.data(), level, &st);
          EXPECT_EQ(c, ref_c);
          EXPECT_EQ(sc, ref_s);
          EXPECT_TRUE(same_stats(st, ref_st));
          std::vector<uint8_t> c2(nc, 0xCD), sc2(ns, 0xCD);
          km::mx_quantize(src, dtype, qr, qc, elem, mode, c2.data(), sc2.data(), level);
          EXPECT_EQ(c2, ref_c);
          EXPECT_EQ(sc2, ref_s);
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 2 * 3 * 2 * static_cast<int>(simd_levels_here().size()));
}

// A cast whose codes outgrow the caches stores them past the caches (MxKernels::
// encode_streamed): each level's streamed segment gives the codes, scales and statistics of its
// plain one, for every value above (one segment of all the rows, its last block short), with
// the codes on a 32-byte boundary (the streamed stores) and 16 bytes off it (the plain ones).
TEST(BlockFormats, StreamedRowCastsGiveThePlainBytes) {
  std::vector<float> q;
  std::vector<uint16_t> qb;
  every_value_rows(q, qb);
  const auto same_runs = [](const km::MxStatsRun& a, const km::MxStatsRun& b) {
    return std::memcmp(&a.best, &b.best, sizeof(float)) == 0 &&
           std::memcmp(&a.scaled_best, &b.scaled_best, sizeof(float)) == 0 &&
           std::memcmp(&a.scale, &b.scale, sizeof(float)) == 0 && a.saturated == b.saturated &&
           a.flushed == b.flushed && std::memcmp(&a.peak, &b.peak, sizeof(double)) == 0;
  };
  int compared = 0;
  for (const DType dtype : {kFloat32, kBFloat16}) {
    const void* src = dtype == kFloat32 ? static_cast<const void*>(q.data()) : qb.data();
    const int64_t n = static_cast<int64_t>(dtype == kFloat32 ? q.size() : qb.size()) - 5;
    for (auto [elem_name, elem] : kElements) {
      for (auto [mode_name, mode] : kModes) {
        const int64_t nc = km::code_bytes(elem, n), ns = (n + 31) / 32;
        for (SimdLevel level : simd_levels_here()) {
          const km::detail::MxKernels& k = km::detail::kernels_for(level);
          if (!k.encode_streamed) continue;
          SCOPED_TRACE(std::string(elem_name) + "." + mode_name + " " + std::string(dtype.name()) +
                       " at " + simd_level_name(level));
          std::vector<uint8_t> ref_c(nc), ref_s(ns);
          const km::MxStatsRun ref =
              k.encode_stats(src, dtype, n, elem, mode, ref_c.data(), ref_s.data());
          for (const int64_t skew : {0, 16}) {
            std::vector<uint8_t> buf(nc + 64, 0xAB), sc(ns, 0xAB);
            uint8_t* c = buf.data() + (32 - reinterpret_cast<uintptr_t>(buf.data()) % 32) + skew;
            const km::MxStatsRun run =
                k.encode_streamed(src, dtype, n, elem, mode, c, sc.data(), true);
            EXPECT_EQ(0, std::memcmp(c, ref_c.data(), nc)) << "skew " << skew;
            EXPECT_EQ(sc, ref_s) << "skew " << skew;
            EXPECT_TRUE(same_runs(run, ref)) << "skew " << skew;
            std::vector<uint8_t> sc2(ns, 0xCD);
            std::fill(buf.begin(), buf.end(), 0xCD);
            k.encode_streamed(src, dtype, n, elem, mode, c, sc2.data(), false);
            EXPECT_EQ(0, std::memcmp(c, ref_c.data(), nc)) << "skew " << skew;
            EXPECT_EQ(sc2, ref_s) << "skew " << skew;
          }
          ++compared;
        }
      }
    }
  }
  if (simd_level() >= SimdLevel::kAvx2) EXPECT_GT(compared, 0);
}

// NVFP4's vector casts against the scalar body for every bfloat16 value: rows of 341 elements
// (a group of 16 blocks, 5 blocks that make no group, a short block of 5), one element of each
// block an anchor that sets its scale (6 gives the factor 1, so the values themselves are
// rounded, every tie included), rounded to nearest and stochastically, with and without the
// statistics, per 1x16 block and per 16x16 tile (the scale from the tile's amax); float32
// sources hold the same values with low bits from a hash (ties broken).
TEST(BlockFormats, Nvfp4EveryValueGivesTheScalarBytes) {
  const float anchors[] = {6.0f, 1.0f, 2688.0f, 3e-5f, 0x1p-120f, 0x1p100f, 1.2e38f};
  const int64_t qc = 21 * 16 + 5;
  std::vector<uint16_t> q;
  uint32_t pattern = 0;
  for (const float anchor : anchors) {
    for (uint32_t done = 0; done < 65536;) {
      for (int64_t c = 0; c < qc; ++c) {
        const int64_t row = static_cast<int64_t>(q.size()) / qc;
        if (c % 16 == (row + c / 16) % 16) {
          q.push_back(float_to_bf16_bits(c % 2 ? -anchor : anchor));
        } else {
          q.push_back(static_cast<uint16_t>(pattern++ & 0xFFFF));
          ++done;
        }
      }
    }
  }
  const int64_t qr = static_cast<int64_t>(q.size()) / qc;
  std::vector<float> f(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    const uint32_t low = static_cast<uint32_t>(i * 2654435761u) >> 16;
    const uint32_t b = static_cast<uint32_t>(q[i]) << 16;
    // NaN and infinity keep their bits; a number gains low bits (0 stays 0).
    f[i] = std::bit_cast<float>(
        (b & 0x7F800000u) == 0x7F800000u || (b & 0x7FFFFFFFu) == 0 ? b : b | (i % 3 ? low : 0u));
  }
  int compared = 0;
  for (const bool bf16 : {true, false}) {
    const void* src = bf16 ? static_cast<const void*>(q.data()) : f.data();
    const DType dtype = bf16 ? kBFloat16 : kFloat32;
    // Tensor scales: the factor 1 of the anchor 6; a factor no power of 2; factors past
    // float's range (infinite) beside finite ones.
    for (const float tensor_scale : {1.0f, 0.37f, 1e-37f})
      for (const bool sr : {false, true})
        for (const bool tiles : {false, true}) {
          km::Nvfp4Encoding e;
          e.tensor_scale = tensor_scale;
          e.tiles_16x16 = tiles;
          e.rounding = sr ? km::Fp4Rounding::kStochastic : km::Fp4Rounding::kNearest;
          e.seed = 0x1234567890ull;
          e.offset = 3;
          const testing::Nvfp4Cast want =
              testing::nvfp4_cast_at(src, dtype, qr, qc, e, SimdLevel::kScalar);
          EXPECT_GT(want.stats.flushed, 0);
          EXPECT_GT(want.stats.saturated, 0);
          for (SimdLevel level : simd_levels_here()) {
            SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + (sr ? " stochastic" : " nearest") +
                         (tiles ? " 16x16" : " 1x16") + " at " + simd_level_name(level) +
                         ", tensor scale " + std::to_string(tensor_scale));
            testing::expect_nvfp4_cast(src, dtype, qr, qc, e, level, want);
            ++compared;
          }
        }
  }
  EXPECT_EQ(compared, 2 * 3 * 2 * 2 * static_cast<int>(simd_levels_here().size()));
}

// NVFP4 rounded to nearest against the scalar body on edge blocks (bfloat16: codes by compares
// against thresholds each thread makes per tensor scale and scale code; float32 as well): all zero,
// holding infinity or NaN, all subnormal, at +-6 * 448 * tensor scale and around it, a block of one
// tiny value among zeros beside huge ones (scale codes far apart in one group), rows of several
// groups (each group's scales taken a group ahead), the padded last group and a short block, per
// 1x16 block and per 16x16 tile, with and without statistics; under tensor scales that come back
// after others (the thresholds of one tensor scale must not serve another).
TEST(BlockFormats, Nvfp4EdgeBlocksGiveTheScalarBytes) {
  // Rows of three groups of 16 blocks (six of 8), 3 blocks that make no group, a short block.
  const int64_t rows = 48, cols = 16 * 16 * 3 + 3 * 16 + 7;
  const float scales_in_turn[] = {1.0f, 0.37f, 1e-37f, 1.0f, 3.1e-3f, 0.37f, 2e30f};
  int compared = 0;
  for (const float ts : scales_in_turn) {
    std::vector<uint16_t> q(static_cast<size_t>(rows * cols));
    uint32_t h = 0x9E3779B9u;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        h = h * 1664525u + 1013904223u;
        const int kind = static_cast<int>((r + c / 16) % 9);
        const float top = 2688.0f * ts;  // amax / 6 / ts = 448
        const uint16_t sign = (h >> 7) & 0x8000u;
        float v;
        switch (kind) {
          case 0:
            v = 0.0f;
            break;
          case 1:
            v = c % 16 == 3 ? std::numeric_limits<float>::infinity() : top * (h >> 8) * 0x1p-24f;
            break;
          case 2:
            v = c % 16 == 9 ? std::numeric_limits<float>::quiet_NaN() : top * (h >> 8) * 0x1p-24f;
            break;
          case 3:
            v = bf16_bits_to_float(static_cast<uint16_t>(1 + (h >> 9) % 0x7F));  // subnormal
            break;
          case 4:
            v = c % 16 == 0 ? top : top * (0.9f + (h >> 8) * 0x1p-24f * 0.2f);
            break;
          case 5:
            v = c % 16 == 5 ? top * 0x1p-30f : 0.0f;
            break;
          case 6:
            v = top;
            break;
          default:
            v = top * std::ldexp(static_cast<float>(h >> 8) * 0x1p-24f, -static_cast<int>(h % 24));
        }
        q[static_cast<size_t>(r * cols + c)] =
            static_cast<uint16_t>(float_to_bf16_bits(v) | (v != v ? 0 : sign));
      }
    std::vector<float> w(q.size());
    for (size_t i = 0; i < q.size(); ++i) w[i] = bf16_bits_to_float(q[i]);
    for (const bool bf16 : {true, false})
      for (const bool tiles : {false, true}) {
        const void* src = bf16 ? static_cast<const void*>(q.data()) : w.data();
        const DType dtype = bf16 ? kBFloat16 : kFloat32;
        km::Nvfp4Encoding e;
        e.tensor_scale = ts;
        e.tiles_16x16 = tiles;
        const testing::Nvfp4Cast want =
            testing::nvfp4_cast_at(src, dtype, rows, cols, e, SimdLevel::kScalar);
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(std::string(bf16 ? "bf16 " : "f32 ") + (tiles ? "16x16" : "1x16") + " at " +
                       simd_level_name(level) + ", tensor scale " + std::to_string(ts));
          testing::expect_nvfp4_cast(src, dtype, rows, cols, e, level, want);
          ++compared;
        }
      }
  }
  EXPECT_EQ(compared, 7 * 2 * 2 * static_cast<int>(simd_levels_here().size()));
}

// Every code under every kind of scale decodes to the same bits on every level (NaN codes and
// codes no encoder writes included), and the scalar values are the formats' own.
TEST(BlockFormats, EveryCodeDecodesAlikeAtEveryLevel) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  const std::vector<uint8_t> e8m0 = {0, 1, 100, 126, 127, 128, 200, 254, 255};
  for (auto [elem_name, elem] : kElements) {
    const int64_t n = elem == km::Element::kE2m1 ? 512 : 256;  // 256 bytes of codes
    std::vector<uint8_t> scales(static_cast<size_t>(n / 32));
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = e8m0[i % e8m0.size()];
    std::vector<float> ref(static_cast<size_t>(n));
    km::mx_dequantize(codes.data(), scales.data(), 1, n, elem, ref.data(), SimdLevel::kScalar);
    for (SimdLevel level : simd_levels_here()) {
      std::vector<float> got(static_cast<size_t>(n));
      km::mx_dequantize(codes.data(), scales.data(), 1, n, elem, got.data(), level);
      EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)))
          << elem_name << " at " << simd_level_name(level);
    }
  }
  // NVFP4: every E2M1 pair under every E4M3 scale.
  std::vector<uint8_t> pairs(256 * 8), e4m3(256);
  for (int s = 0; s < 256; ++s) {
    e4m3[s] = static_cast<uint8_t>(s);
    for (int k = 0; k < 8; ++k) pairs[s * 8 + k] = static_cast<uint8_t>((s * 8 + k) & 0xFF);
  }
  std::vector<float> ref(256 * 16);
  km::nvfp4_dequantize(pairs.data(), e4m3.data(), 1, 256 * 16, 0.75f, ref.data(),
                       SimdLevel::kScalar);
  for (SimdLevel level : simd_levels_here()) {
    std::vector<float> got(ref.size());
    km::nvfp4_dequantize(pairs.data(), e4m3.data(), 1, 256 * 16, 0.75f, got.data(), level);
    EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)))
        << simd_level_name(level);
  }
  // The scalar values: E5M2 0x3C is 1, 0x7C infinity, 0x7D NaN; E4M3 0x7E is 448, 0x01 2^-9.
  EXPECT_EQ(km::scalar::e5m2_value(0x3C), 1.0f);
  EXPECT_EQ(km::scalar::e5m2_value(0xFC), -INFINITY);
  EXPECT_TRUE(std::isnan(km::scalar::e5m2_value(0x7D)));
  EXPECT_EQ(km::scalar::e5m2_value(0x01), 0x1p-16f);
  EXPECT_EQ(km::scalar::e4m3_value(0x7E), 448.0f);
  EXPECT_EQ(km::scalar::e4m3_value(0x81), -0x1p-9f);
  EXPECT_TRUE(std::isnan(km::scalar::e4m3_value(0xFF)));
}

TEST(BlockFormats, Avx512IsRunWhereTheCpuHasIt) {
  if (simd_level() < SimdLevel::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL";
  EXPECT_EQ(&km::detail::kernels_for(SimdLevel::kAvx512), &km::detail::kAvx512Kernels);
  EXPECT_EQ(&km::detail::kernels_for(SimdLevel::kAvx512Bf16), &km::detail::kAvx512Kernels);
  EXPECT_EQ(&km::detail::kernels_for(SimdLevel::kAvx2), &km::detail::kAvx2Kernels);
}

// --- stochastic rounding -------------------------------------------------------------------

// Philox4x32-10's known answers (Random123's kat_vectors).
TEST(BlockFormats, PhiloxGivesTheKnownAnswers) {
  EXPECT_EQ(km::philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (km::PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(km::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                              {0xffffffffu, 0xffffffffu}),
            (km::PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(km::philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                              {0xa4093822u, 0x299f31d0u}),
            (km::PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

BlockQuantized stochastic(const std::vector<float>& x, int64_t rows, int64_t cols, uint64_t seed,
                          uint64_t offset, float tensor_scale) {
  return quantize_nvfp4(
      x, rows, cols,
      {.stochastic = true, .seed = seed, .offset = offset, .tensor_scale = tensor_scale});
}

TEST(BlockFormats, StochasticRoundingIsUnbiased) {
  // Values between the E2M1 grid points, over 4000 draws each (tensor scale 1 and each block's
  // amax 6: every block scale is 1, the values are not rescaled): the mean of the dequantized
  // values is the value.
  const std::vector<float> grid_gaps = {0.1f, 0.3f,   0.7f,  1.2f,   1.9f,  2.25f, 3.5f, 4.4f,
                                        5.9f, -0.05f, -1.4f, -2.75f, -5.0f, 0.0f,  6.0f, -0.6f};
  const int64_t draws = 4000, cols = 16;
  std::vector<float> x;
  for (int64_t d = 0; d < draws; ++d) x.insert(x.end(), grid_gaps.begin(), grid_gaps.end());
  const BlockQuantized q = stochastic(x, draws, cols, 1234, 0, 1.0f);
  for (uint8_t s : q.scales) ASSERT_EQ(s, 0x38);  // E4M3 1.0: the values are not rescaled
  const std::vector<float> v = dequantize(q);
  for (int64_t c = 0; c < cols; ++c) {
    const float want = grid_gaps[c];
    const float step = std::fabs(want) < 2 ? 0.5f : (std::fabs(want) < 4 ? 1.0f : 2.0f);
    const float lo = std::floor(std::fabs(want) / step) * step;
    double sum = 0;
    for (int64_t d = 0; d < draws; ++d) {
      const float got = v[d * cols + c];
      // Every draw is one of the two neighbours.
      ASSERT_TRUE(std::fabs(got) == lo || std::fabs(got) == lo + step) << want << " gave " << got;
      sum += got;
    }
    // The rounding's bias is below step / 256, towards zero (mx_scalar.h,
    // e2m1_code_stochastic); the standard error of the mean is at most step / 2 / sqrt(draws):
    // allow the bias and five standard errors.
    EXPECT_NEAR(sum / draws, want,
                step / 256 + 5 * step / 2 / std::sqrt(static_cast<double>(draws)))
        << want;
  }
  // Nearest rounding of the same values is biased where the stochastic one is not.
  const BlockQuantized n = quantize_nvfp4(x, draws, cols, {.tensor_scale = 1.0f});
  EXPECT_EQ(dequantize(n)[0], 0.0f);  // 0.1 -> 0
}

// The rule's exact expectation over all 256 random bytes (mx_scalar.h, e2m1_code_stochastic),
// over a sweep of every stretch of the E2M1 grid: never above |v|, less than step / 256 below
// it, and |v| itself where v's fraction of its step is a multiple of 1/256.
TEST(BlockFormats, StochasticRoundingBiasIsWithinItsBound) {
  auto expectation = [](float v) {
    double sum = 0;
    for (int r = 0; r < 256; ++r)
      sum += km::scalar::kE2m1Values[km::scalar::e2m1_code_stochastic(v, static_cast<uint8_t>(r))];
    return sum / 256;
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> low(0, 0x3FFF);
  int exact = 0;
  for (float sign : {1.0f, -1.0f}) {
    for (int code = 0; code < 7; ++code) {
      const float lo = km::scalar::kE2m1Values[code], step = km::scalar::kE2m1Values[code + 1] - lo;
      for (int k = 0; k < 4096; ++k) {
        // Fraction k / 4096 of the step; every 16th a multiple of 1/256.
        const float a = lo + step * static_cast<float>(k) / 4096.0f;
        const double e = expectation(sign * a) * sign;
        ASSERT_LE(e, a) << a;
        ASSERT_LT(a - e, step / 256.0) << a;
        if (k % 16 == 0) {
          ASSERT_EQ(e, a) << a;
          ++exact;
        }
      }
      for (int k = 0; k < 256; ++k) {
        // A fraction with random bits below the top 8 of the discarded ones.
        float a = lo + step * static_cast<float>(k) / 256.0f;
        if (a >= 1.0f) a = std::bit_cast<float>(std::bit_cast<uint32_t>(a) | low(rng));
        const double e = expectation(sign * a) * sign;
        ASSERT_LE(e, a) << a;
        ASSERT_LT(a - e, step / 256.0) << a;
      }
    }
  }
  EXPECT_EQ(exact, 2 * 7 * 256);
  EXPECT_EQ(expectation(6.5f), 6.0f);  // saturated
  EXPECT_EQ(expectation(-1e30f), -6.0f);
}

// 0.25 lies halfway between E2M1's 0 and 0.5: element (r, c) rounds up exactly when its byte
// sr_byte(seed, offset, r, c) is 128 or more (each block holds a 6, so its scale is 1). 600
// columns: two 256-column groups and a part, and a short last block.
TEST(BlockFormats, StochasticRoundingDrawsTheDocumentedBytes) {
  const int64_t rows = 3, cols = 600, blocks = (cols + 15) / 16;
  std::vector<float> x(rows * cols, 0.25f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 16) x[r * cols + c] = 6.0f;
  for (SimdLevel level : simd_levels_here()) {
    km::Nvfp4Encoding e;
    e.rounding = km::Fp4Rounding::kStochastic;
    e.seed = 99;
    e.offset = 5;
    std::vector<uint8_t> codes(rows * cols / 2), scales(rows * blocks);
    km::nvfp4_quantize(x.data(), kFloat32, rows, cols, e, codes.data(), scales.data(), level);
    int ups = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t code = (codes[(r * cols + c) / 2] >> ((c & 1) * 4)) & 0xF;
        if (x[r * cols + c] == 6.0f) continue;
        const bool up =
            km::sr_byte(99, 5, static_cast<uint64_t>(r), static_cast<uint64_t>(c)) >= 128;
        ASSERT_EQ(code, up ? 1 : 0) << simd_level_name(level) << " (" << r << ", " << c << ")";
        ups += up;
      }
    }
    // About half of 1686; the standard deviation is 20.5: five of them.
    EXPECT_GT(ups, 843 - 103);
    EXPECT_LT(ups, 843 + 103);
  }
}

// Each element is placed on its own byte's threshold or one 256th of its step below it, with
// random bits below the top 8 discarded ones (which must not count), in every stretch of the E2M1
// grid and of both signs: with t its place on the grid in 256ths of its step, it rounds up
// exactly when t % 256 + its byte reaches 256, on every level (each block holds a 6, so its scale
// is 1 and the values are not rescaled). 640 columns: the third 256-column group in part.
TEST(BlockFormats, StochasticRoundingAddsEachByteAtItsThreshold) {
  const int64_t rows = 4, cols = 640;
  std::vector<float> x(rows * cols, 6.0f);
  std::vector<int> want(rows * cols, 7);
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> low(0, 0x3FFF);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (c % 16 == 0) continue;  // the block's 6
      const int byte = km::sr_byte(21, 3, static_cast<uint64_t>(r), static_cast<uint64_t>(c));
      const int lo_code = static_cast<int>((c + r) % 7);  // E2M1 0 .. 4
      const bool at = (c / 7 + r) % 2 == 1;
      const int frac = std::clamp(at ? 256 - byte : 255 - byte, 0, 255);
      const float lo = km::scalar::kE2m1Values[lo_code];
      const float step = km::scalar::kE2m1Values[lo_code + 1] - lo;
      float a = lo + step * static_cast<float>(frac) / 256.0f;
      // Bits below the top 8 discarded ones: a's bits 13..0 from 1 up (the step is a's bit 22),
      // a's fraction of 1/512 in 1/2^23 below.
      if (a >= 1.0f)
        a = std::bit_cast<float>(std::bit_cast<uint32_t>(a) | low(rng));
      else
        a += std::ldexp(static_cast<float>(low(rng) >> 1), -23);
      const bool negative = (c * 7 + r) % 3 == 0;
      x[r * cols + c] = negative ? -a : a;
      want[r * cols + c] = (lo_code + (frac + byte >= 256 ? 1 : 0)) | (negative ? 8 : 0);
    }
  }
  for (SimdLevel level : simd_levels_here()) {
    km::Nvfp4Encoding e;
    e.rounding = km::Fp4Rounding::kStochastic;
    e.tensor_scale = 1.0f;
    e.seed = 21;
    e.offset = 3;
    std::vector<uint8_t> codes(rows * cols / 2), scales(rows * cols / 16);
    km::nvfp4_quantize(x.data(), kFloat32, rows, cols, e, codes.data(), scales.data(), level);
    for (uint8_t s : scales) ASSERT_EQ(s, 0x38);  // E4M3 1.0
    for (int64_t i = 0; i < rows * cols; ++i)
      ASSERT_EQ((codes[i / 2] >> ((i & 1) * 4)) & 0xF, want[i])
          << simd_level_name(level) << " element " << i << " value " << x[i];
  }
}

TEST(BlockFormats, StochasticRoundingRepeatsFromItsSeed) {
  const std::vector<float> x = rough_values(64 * 80, 3);
  std::vector<float> finite;
  for (float v : x) finite.push_back(std::isfinite(v) ? v : 1.0f);
  const BlockQuantized a = stochastic(finite, 64, 80, 7, 100, 1e-3f);
  const BlockQuantized b = stochastic(finite, 64, 80, 7, 100, 1e-3f);
  EXPECT_EQ(a.codes, b.codes);
  EXPECT_NE(a.codes, stochastic(finite, 64, 80, 8, 100, 1e-3f).codes);  // another seed
  EXPECT_NE(a.codes, stochastic(finite, 64, 80, 7, 101, 1e-3f).codes);  // another offset
  EXPECT_EQ(a.scales, quantize_nvfp4(finite, 64, 80, {.tensor_scale = 1e-3f}).scales);
  // Element (r, c) draws philox.h's sr_byte(seed, offset, r, c): quantizing rows 10..19 one by
  // one, each with its row index, gives those rows' codes on every level (so splitting a tensor
  // changes nothing).
  for (SimdLevel level : simd_levels_here()) {
    for (int64_t r = 10; r < 20; ++r) {
      std::vector<uint8_t> c(40), s(5);
      km::detail::kernels_for(level).nvfp4_encode_sr(finite.data() + r * 80, kFloat32, 80, 1e-3f,
                                                     nullptr, 7, 100, r, 0, c.data(), s.data());
      EXPECT_EQ(c, std::vector<uint8_t>(a.codes.begin() + r * 40, a.codes.begin() + (r + 1) * 40))
          << simd_level_name(level) << " row " << r;
    }
  }
}

// The stochastic codes do not depend on the threads: a cast long enough to go over threads (rows
// in segments) gives the same bytes on one thread and on two, at every level, for both sources.
TEST(BlockFormats, StochasticRoundingIsTheSameOnAnyNumberOfThreads) {
  const int64_t rows = 48, cols = 8192 + 272;  // two segments a row, a part of a 256-column group
  std::vector<float> x = rough_values(rows * cols, 9);
  for (float& v : x) v = std::isfinite(v) ? v : 2.0f;
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xb[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(x[i]) >> 16);
  const int saved = omp_get_max_threads();
  for (SimdLevel level : simd_levels_here()) {
    for (const bool bf16 : {false, true}) {
      std::vector<uint8_t> codes[2], scales[2];
      for (int t = 0; t < 2; ++t) {
        omp_set_num_threads(t + 1);
        km::Nvfp4Encoding e;
        e.rounding = km::Fp4Rounding::kStochastic;
        e.tensor_scale = 1e-2f;
        e.seed = 4;
        e.offset = 6;
        codes[t].resize(rows * cols / 2);
        scales[t].resize(rows * cols / 16);
        km::nvfp4_quantize(bf16 ? static_cast<const void*>(xb.data()) : x.data(),
                           bf16 ? kBFloat16 : kFloat32, rows, cols, e, codes[t].data(),
                           scales[t].data(), level);
      }
      EXPECT_EQ(codes[0], codes[1]) << simd_level_name(level) << (bf16 ? " bf16" : " f32");
      EXPECT_EQ(scales[0], scales[1]) << simd_level_name(level);
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace mantissa::formats
