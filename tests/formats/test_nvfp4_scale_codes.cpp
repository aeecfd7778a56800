// NVFP4's E4M3 block scale codes at every step between two codes: the vector casts take a
// block's scale code from its amax's bits by compares against per-tensor-scale thresholds where
// they can, so the tiles' amax handed to nvfp4_quantize (16x16 tiles) are put at each least
// amax whose code is k or more (found here by bisection over the scalar body's code), one bit
// below and above it, and at 0, subnormals, infinity, NaN and negatives, under tensor scales
// inside and outside the range where the compares serve. Every level's codes, scales and
// statistics are the scalar body's. The same values cast as 1x16 rows with stochastic rounding
// put each block's own amax there too; the AVX-512 stochastic rows take those scale codes by
// nvfp4_scale_lookup.h's lookup, whose tables are checked here against the scalar codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "kernels/cpu/mx/nvfp4_scale_lookup.h"
#include "support/nvfp4_cast_check.h"
#include "support/simd_levels.h"

namespace mantissa::kernels::mx {
namespace {

using mantissa::testing::simd_levels_here;

float float_of(uint32_t b) { return std::bit_cast<float>(b); }

// The least float bits in [0, 0x7F800000] whose scale code under tensor_scale is k or more
// (the code never falls as the amax grows; infinity's is 126).
uint32_t least_amax(int k, float tensor_scale) {
  uint32_t lo = 0, hi = 0x7F800000u;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (scalar::nvfp4_block_scale(float_of(mid), tensor_scale).code >= k)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

std::string scale_name(float ts) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", ts);
  return buf;
}

// bfloat16 bits of v, rounded to nearest even (NaN kept quiet).
uint16_t bf16_bits(float v) {
  const uint32_t b = std::bit_cast<uint32_t>(v);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

TEST(Nvfp4ScaleCodes, EveryStepBetweenCodesGivesTheScalarBytes) {
  // 1, 0.37, 3.1e-3, 7.3e5: the compares serve; 1e-37, 2e-39 (subnormal), 1e36, 3e38: a
  // division leaves the normal range, and the casts divide.
  const float tensor_scales[] = {1.0f, 0.37f, 3.1e-3f, 7.3e5f, 1e-37f, 2e-39f, 1e36f, 3e38f};
  int compared = 0;
  for (const float ts : tensor_scales) {
    std::vector<float> amax = {0.0f,
                               float_of(1),
                               float_of(0x007FFFFF),
                               0x1p-126f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               -std::numeric_limits<float>::quiet_NaN(),
                               -1.0f,
                               -0.0f,
                               std::numeric_limits<float>::max()};
    for (int k = 9; k <= 126; ++k) {
      const uint32_t a = least_amax(k, ts);
      for (int d = -2; d <= 2; ++d) {
        const int64_t b = static_cast<int64_t>(a) + d;
        if (b >= 0 && b <= 0x7F800000) amax.push_back(float_of(static_cast<uint32_t>(b)));
      }
    }
    // One tile row: tile t's 16 rows hold values up to amax[t], row r's element r at it (the codes
    // vary too); its amax is amax[t] whatever the values.
    const int64_t rows = 16, tiles = static_cast<int64_t>(amax.size()), cols = 16 * tiles;
    std::vector<float> x(static_cast<size_t>(rows * cols));
    std::vector<uint16_t> xb(x.size());
    uint32_t h = 12345;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        h = h * 1664525u + 1013904223u;
        const float m = amax[static_cast<size_t>(c / 16)];
        const float u = static_cast<float>(static_cast<int32_t>(h) >> 8) * 0x1p-23f;  // [-1, 1)
        const float v = m == m && m > 0.0f && m < std::numeric_limits<float>::infinity()
                            ? (c % 16 == r ? m : m * u)
                            : (c % 3 ? 1.5f * u : 0.0f);
        x[static_cast<size_t>(r * cols + c)] = v;
        xb[static_cast<size_t>(r * cols + c)] = bf16_bits(v);
      }
    const int64_t nc = rows * cols / 2, ns = rows * cols / 16;
    for (const bool bf16 : {true, false}) {
      const void* src = bf16 ? static_cast<const void*>(xb.data()) : x.data();
      const DType dtype = bf16 ? kBFloat16 : kFloat32;
      Nvfp4Encoding e;
      e.tensor_scale = ts;
      e.tiles_16x16 = true;
      e.tile_amax = amax.data();
      Nvfp4Encoding sr;  // 1x16 rows, stochastic
      sr.tensor_scale = ts;
      sr.rounding = Fp4Rounding::kStochastic;
      sr.seed = 17;
      sr.offset = 5;
      for (const Nvfp4Encoding& enc : {e, sr}) {
        const testing::Nvfp4Cast want =
            testing::nvfp4_cast_at(src, dtype, rows, cols, enc, SimdLevel::kScalar);
        for (SimdLevel level : simd_levels_here()) {
          if (level == SimdLevel::kScalar) continue;
          SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + (enc.tiles_16x16 ? " 16x16" : " sr") +
                       " at " + simd_level_name(level) + ", tensor scale " + scale_name(ts));
          testing::expect_nvfp4_cast(src, dtype, rows, cols, enc, level, want);
          ++compared;
        }
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "no AVX2 on this CPU";
}

// nvfp4_scale_lookup.h's table serves under every tensor scale where the compares do (64 a
// binade over the whole range), and gives the scalar code at each least amax whose code is k or
// more (two bits below to two above) and at each of its buckets' first and last bits.
TEST(Nvfp4ScaleCodes, LookupServesWhereTheComparesServeAndGivesTheirCodes) {
  // scale_codes16's code of one amax's bits.
  auto lookup_code = [](const detail::Nvfp4ScaleCodeLookup& l, uint32_t bits) {
    const int32_t d = static_cast<int32_t>(bits - static_cast<uint32_t>(l.base));
    const int i = (d >> 19) & 15;
    return std::clamp((d >> 20) + l.add[i] + ((d & 0x7FFFFF) > l.threshold[i] ? 1 : 0), 8, 126);
  };
  int served = 0;
  for (int e = -130; e <= 128; ++e) {
    for (int m = 0; m < 64; ++m) {
      const float ts = std::ldexp(1.0f + m / 64.0f, e);
      detail::Nvfp4ScaleCodeThresholds t;
      t.make(ts);
      detail::Nvfp4ScaleCodeLookup l;
      l.make(t);
      ASSERT_EQ(l.ok, t.ok) << "tensor scale " << scale_name(ts);
      if (!l.ok) continue;
      ++served;
      if (m % 16 != 0) continue;
      std::vector<uint32_t> bits = {0u, 1u, 0x7F800000u, static_cast<uint32_t>(l.base) - 1};
      for (int k = 9; k <= 126; ++k)
        for (int d = -2; d <= 2; ++d) bits.push_back(least_amax(k, ts) + d);
      for (int64_t o = l.base; o <= 0x7F800000; o += int64_t{1} << 23)
        for (int64_t i = 0; i < 16; ++i)
          for (const int64_t edge : {o + (i << 19), o + ((i + 1) << 19) - 1})
            if (edge <= 0x7F800000) bits.push_back(static_cast<uint32_t>(edge));
      for (const uint32_t b : bits)
        ASSERT_EQ(lookup_code(l, b), scalar::nvfp4_block_scale(float_of(b), ts).code)
            << "amax bits " << b << ", tensor scale " << scale_name(ts);
    }
  }
  EXPECT_GT(served, 10000);
}

// The casts of a bfloat16 source rounded to nearest take 16 blocks' scale codes in 16-bit lanes
// from their amax's bfloat16 bits. Rows: every bfloat16 amax from 0 to infinity is a block's own
// (one element at it, the rest below), NaN blocks among them, a short last block; 16x16 tiles:
// the tiles' amax at each bfloat16 value within two of a least amax whose code is k or more,
// and at 0, subnormals, infinity, NaN, a negative and values that are not bfloat16 values
// (those groups go 8 blocks at a time). Every level's codes, scales and statistics are the
// scalar body's.
TEST(Nvfp4ScaleCodes, EveryBfloat16AmaxGivesTheScalarBytes) {
  const float tensor_scales[] = {1.0f, 0.37f, 3.1e-3f, 7.3e5f, 1e-37f, 2e-39f, 1e36f, 3e38f};
  int compared = 0;
  for (const float ts : tensor_scales) {
    // Rows: block i's amax is bfloat16 bits i (0 .. 0x7F80), then blocks holding a NaN.
    std::vector<uint16_t> rows_x;
    uint32_t h = 777;
    auto below = [&](uint16_t a) {  // a bfloat16 value of magnitude at most a's, either sign
      h = h * 1664525u + 1013904223u;
      const uint16_t m = static_cast<uint16_t>(a == 0 ? 0 : (h >> 8) % (a + 1u));
      return static_cast<uint16_t>(m | (h & 0x8000u));
    };
    for (uint32_t a = 0; a <= 0x7F80u; ++a) {
      const int at = static_cast<int>(a % 16);
      for (int e = 0; e < 16; ++e)
        rows_x.push_back(e == at ? static_cast<uint16_t>(a | ((a & 1) << 15))
                                 : below(static_cast<uint16_t>(a)));
      if (a % 997 == 0)  // a NaN block, then one of infinity
        for (const uint16_t v : {uint16_t{0x7FC1}, uint16_t{0xFF80}})
          for (int e = 0; e < 16; ++e) rows_x.push_back(e == at ? v : below(0x4000));
    }
    for (int e = 0; e < 5; ++e) rows_x.push_back(below(0x4100));  // a short last block
    // 16x16 tiles: one tile row, each tile's amax given.
    std::vector<float> tile_amax = {0.0f,
                                    float_of(0x00010000),
                                    float_of(0x7F7F0000),
                                    std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::quiet_NaN(),
                                    -1.0f,
                                    float_of(0x3F800001),
                                    float_of(0x40000000)};
    for (int k = 9; k <= 126; ++k) {
      const int64_t a16 = (static_cast<int64_t>(least_amax(k, ts)) + 0xFFFF) >> 16;
      for (int64_t d = -2; d <= 2; ++d)
        if (a16 + d >= 0 && a16 + d <= 0x7F80)
          tile_amax.push_back(float_of(static_cast<uint32_t>(a16 + d) << 16));
    }
    const int64_t tiles = static_cast<int64_t>(tile_amax.size()), tile_cols = 16 * tiles;
    std::vector<uint16_t> tiles_x(static_cast<size_t>(16 * tile_cols));
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t c = 0; c < tile_cols; ++c) {
        const float m = tile_amax[static_cast<size_t>(c / 16)];
        const uint16_t a =
            m == m && m > 0.0f
                ? static_cast<uint16_t>(std::min(std::bit_cast<uint32_t>(m) >> 16, 0x7F7Fu))
                : uint16_t{0x3F00};
        tiles_x[static_cast<size_t>(r * tile_cols + c)] = below(a);
      }
    struct Case {
      const char* name;
      const std::vector<uint16_t>* x;
      int64_t rows, cols;
      bool tiles;
    };
    const Case cases[] = {
        {"rows", &rows_x, 1, static_cast<int64_t>(rows_x.size()), false},
        {"16x16", &tiles_x, 16, tile_cols, true},
    };
    for (const Case& cs : cases) {
      Nvfp4Encoding e;
      e.tensor_scale = ts;
      e.tiles_16x16 = cs.tiles;
      e.tile_amax = cs.tiles ? tile_amax.data() : nullptr;
      const int64_t nc = cs.rows * ((cs.cols + 1) / 2), ns = cs.rows * ((cs.cols + 15) / 16);
      std::vector<uint8_t> ref_c(nc), ref_s(ns);
      MxCastStats ref_st;
      nvfp4_quantize(cs.x->data(), kBFloat16, cs.rows, cs.cols, e, ref_c.data(), ref_s.data(),
                     SimdLevel::kScalar, &ref_st);
      for (SimdLevel level : simd_levels_here()) {
        if (level == SimdLevel::kScalar) continue;
        SCOPED_TRACE(std::string(cs.name) + " at " + simd_level_name(level) + ", tensor scale " +
                     scale_name(ts));
        std::vector<uint8_t> c(nc, 0xAB), s(ns, 0xAB);
        MxCastStats st;
        nvfp4_quantize(cs.x->data(), kBFloat16, cs.rows, cs.cols, e, c.data(), s.data(), level,
                       &st);
        EXPECT_EQ(s, ref_s);
        EXPECT_EQ(c, ref_c);
        EXPECT_EQ(st.saturated, ref_st.saturated);
        EXPECT_EQ(st.flushed, ref_st.flushed);
        EXPECT_EQ(std::bit_cast<uint32_t>(st.amax), std::bit_cast<uint32_t>(ref_st.amax));
        EXPECT_EQ(std::bit_cast<uint64_t>(st.peak), std::bit_cast<uint64_t>(ref_st.peak));
        std::vector<uint8_t> c2(nc, 0xCD), s2(ns, 0xCD);
        nvfp4_quantize(cs.x->data(), kBFloat16, cs.rows, cs.cols, e, c2.data(), s2.data(), level);
        EXPECT_EQ(s2, ref_s);
        EXPECT_EQ(c2, ref_c);
        ++compared;
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "no AVX2 on this CPU";
}

}  // namespace
}  // namespace mantissa::kernels::mx
