// The AVX2 and AVX-512 levels' MX row casts (the AVX2 bodies, kernels/cpu/mx/mx_rows_*_avx2.cpp,
// and the AVX-512 level's own body for bfloat16 to FP8, mx_rows_fp8_avx512.cpp, beside the AVX2
// bodies it runs for float32 and E2M1) against the scalar body, one segment at a time through
// each level's kernels
// (plain, with statistics, and streamed with the codes on and off 32- and 64-byte boundaries):
// every bfloat16 value (as bfloat16, and widened to float32 with several low halves) in blocks that
// the vector body casts on their bits, casts again in float32 lanes and hands to the AVX2 body,
// groups of eight holding every kind of edge block (all zero, infinity, NaN, a subnormal amax,
// values at and above the format's max, a nonzero element below the normal codes), a segment's
// short last group and block, and a segment long enough to move its saturation counts out of their
// lanes. Each level the CPU has (and MANTISSA_DISABLE_SIMD leaves); skipped where it has neither.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::mx {
namespace {

constexpr int64_t kGroup = 8 * kMxBlock;

const std::pair<Element, E8m0Rounding> kCasts[] = {
    {Element::kE4m3, E8m0Rounding::kRceil}, {Element::kE4m3, E8m0Rounding::kFloor},
    {Element::kE5m2, E8m0Rounding::kRceil}, {Element::kE5m2, E8m0Rounding::kFloor},
    {Element::kE2m1, E8m0Rounding::kRceil}, {Element::kE2m1, E8m0Rounding::kFloor}};

std::string name_of(Element e, E8m0Rounding r, DType dtype) {
  const char* el = e == Element::kE4m3 ? "e4m3" : e == Element::kE5m2 ? "e5m2" : "e2m1";
  return std::string(el) + (r == E8m0Rounding::kFloor ? ".floor " : ".rceil ") +
         std::string(dtype.name());
}

bool same_runs(const MxStatsRun& a, const MxStatsRun& b) {
  return std::memcmp(&a.best, &b.best, sizeof(float)) == 0 &&
         std::memcmp(&a.scaled_best, &b.scaled_best, sizeof(float)) == 0 &&
         std::memcmp(&a.scale, &b.scale, sizeof(float)) == 0 && a.saturated == b.saturated &&
         a.flushed == b.flushed && std::memcmp(&a.peak, &b.peak, sizeof(double)) == 0;
}

// One level's kernels on one segment against the scalar body's codes, scales and run.
void expect_level_bytes(const detail::MxKernels& k, const void* src, DType dtype, int64_t n,
                        Element e, E8m0Rounding r, const std::vector<uint8_t>& ref_c,
                        const std::vector<uint8_t>& ref_s, const MxStatsRun& ref) {
  const int64_t nc = code_bytes(e, n), ns = (n + kMxBlock - 1) / kMxBlock;
  std::vector<uint8_t> c(nc, 0xAB), s(ns, 0xAB);
  k.encode(src, dtype, n, e, r, c.data(), s.data());
  EXPECT_EQ(c, ref_c);
  EXPECT_EQ(s, ref_s);
  std::fill(c.begin(), c.end(), 0xCD);
  std::fill(s.begin(), s.end(), 0xCD);
  EXPECT_TRUE(same_runs(k.encode_stats(src, dtype, n, e, r, c.data(), s.data()), ref));
  EXPECT_EQ(c, ref_c);
  EXPECT_EQ(s, ref_s);
  // Streamed: the codes on a 64-byte boundary, 16 bytes off it (not streamed) and 32 (streamed).
  std::vector<uint8_t> buf(nc + 128);
  for (const int64_t skew : {0, 16, 32}) {
    uint8_t* out = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) + skew;
    for (const bool stats : {true, false}) {
      std::fill(buf.begin(), buf.end(), 0xEF);
      std::fill(s.begin(), s.end(), 0xEF);
      const MxStatsRun run = k.encode_streamed(src, dtype, n, e, r, out, s.data(), stats);
      if (stats) EXPECT_TRUE(same_runs(run, ref)) << "streamed, skew " << skew;
      EXPECT_EQ(0, std::memcmp(out, ref_c.data(), nc)) << "streamed, skew " << skew;
      EXPECT_EQ(s, ref_s) << "streamed, skew " << skew;
    }
  }
}

// The levels with row bodies of their own that this CPU runs.
std::vector<SimdLevel> row_levels() {
  std::vector<SimdLevel> levels;
  for (const SimdLevel l : {SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (simd_level() >= l) levels.push_back(l);
  return levels;
}

// One segment of n elements (float32 or bfloat16 at src) through each level's kernels against
// the scalar body's codes and scales and mx_run_stats's run of them. Returns the scalar run.
MxStatsRun expect_scalar_bytes(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r) {
  SCOPED_TRACE(name_of(e, r, dtype) + ", " + std::to_string(n) + " elements");
  const int64_t nc = code_bytes(e, n), ns = (n + kMxBlock - 1) / kMxBlock;
  std::vector<uint8_t> ref_c(nc), ref_s(ns);
  detail::kScalarKernels.encode(src, dtype, n, e, r, ref_c.data(), ref_s.data());
  const MxStatsRun ref = mx_run_stats(src, dtype, n, e, r, ref_c.data(), ref_s.data());
  for (const SimdLevel level : row_levels()) {
    SCOPED_TRACE(level == SimdLevel::kAvx512 ? "AVX-512" : "AVX2");
    expect_level_bytes(detail::kernels_for(level), src, dtype, n, e, r, ref_c, ref_s, ref);
  }
  return ref;
}

// The float32 source and its bfloat16 copy (the float32 values' high halves).
struct Source {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  void push(float v) {
    f32.push_back(v);
    bf16.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16));
  }
  int64_t size() const { return static_cast<int64_t>(f32.size()); }
};

void expect_scalar_bytes(const Source& x, int64_t n) {
  for (const auto [e, r] : kCasts) {
    expect_scalar_bytes(x.f32.data(), kFloat32, n, e, r);
    expect_scalar_bytes(x.bf16.data(), kBFloat16, n, e, r);
  }
}

class MxRowBodies : public ::testing::Test {
 protected:
  void SetUp() override {
    if (row_levels().empty())
      GTEST_SKIP() << "no AVX2 or AVX-512 level here (" << describe_cpu_features() << ")";
  }
};

// Every bfloat16 bit pattern in order, 31 to a block (one binade and sign, mostly) beside an
// anchor 2^shift times the block's largest magnitude: shift 0 casts every value at the top of
// its block's scale (saturating under the floor), larger shifts put them lower among the codes
// (shifts 1 to 5 walk them down every E2M1 step, each entry of its code tables; FP8's subnormal
// codes from 2^9 and 2^17 on, whose blocks the AVX-512 body casts again in
// float32 lanes; it hands blocks of infinity, NaN and subnormals to the AVX2 body). The float32
// copies add low halves: zero, the lowest bit, the top bit alone (a rounding tie of bfloat16's
// bits) and all ones.
TEST_F(MxRowBodies, EveryBfloat16ValueGivesTheScalarBytes) {
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x8000u, 0xFFFFu};
  for (const int shift : {0, 1, 2, 3, 4, 5, 6, 9, 17}) {
    SCOPED_TRACE("anchor 2^" + std::to_string(shift));
    Source x;
    for (uint32_t p = 0; p < 65536; p += 31) {
      float top = 0.0f;
      for (uint32_t k = p; k < p + 31 && k < 65536; ++k)
        top = std::max(top, std::fabs(std::bit_cast<float>(k << 16)));  // NaN passed over
      for (uint32_t k = p; k < p + 31; ++k) {
        const uint32_t low = lows[(k / 31 + k) % 4];
        x.push(std::bit_cast<float>(((k & 0xFFFFu) << 16) | (k < 65536 ? low : 0u)));
      }
      const float anchor = std::ldexp(top, shift);
      x.push(std::isfinite(anchor) ? ((p / 31) % 2 ? -anchor : anchor) : 0.0f);
    }
    // One segment whose last group is short, as is its last block.
    expect_scalar_bytes(x, x.size() - 5);
  }
}

// Groups of eight blocks holding each kind of edge block at each place in the group, the other
// blocks normal values the vector body takes: one group per kind and place, so a group the
// vector body hands on lies between groups it casts.
TEST_F(MxRowBodies, EdgeBlocksInAGroupOfEightGiveTheScalarBytes) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> frac(0.5f, 1.0f);
  std::uniform_int_distribution<int> sign(0, 1);
  // Kinds of block: normal values (as the other blocks), all zero (one -0), infinity, NaN, a
  // subnormal amax, E4M3's and E5M2's max at their scales' top and beyond it (saturating under
  // the floor), one nonzero element below the normal codes, and a block of the largest floats.
  constexpr int kKinds = 9;
  const auto block = [&](Source& x, int kind, int scale) {
    for (int64_t k = 0; k < kMxBlock; ++k) {
      float v = (sign(gen) ? -1.0f : 1.0f) * frac(gen) * std::ldexp(1.0f, scale);
      if (kind == 1) v = k == 3 ? -0.0f : 0.0f;
      if (kind == 2 && k == 5) v = -inf;
      if (kind == 3 && k == 7) v = nan;
      if (kind == 4) v = (k % 3 ? -1e-41f : 1e-41f) * static_cast<float>(k + 1);
      if (kind == 5 && k < 4) v = std::ldexp(k % 2 ? -448.0f : 448.0f * 1.25f, scale - 9 + k);
      if (kind == 6 && k < 4) v = std::ldexp(k % 2 ? -57344.0f : 57344.0f * 1.5f, scale - 16);
      if (kind == 7 && k == 9) v = std::ldexp(1.0f, scale - 40);
      if (kind == 8) v = (k % 2 ? -1.0f : 1.0f) * 0x1.fffffep127f * frac(gen);
      x.push(v);
    }
  };
  Source x;
  for (int kind = 1; kind < kKinds; ++kind)
    for (int place = 0; place < 8; ++place) {
      for (int b = 0; b < 8; ++b) block(x, b == place ? kind : 0, (kind + place + b) % 20 - 10);
      for (int b = 0; b < 8; ++b) block(x, 0, b - 4);  // a group the vector body casts
    }
  expect_scalar_bytes(x, x.size());
  // A short last group: three blocks and a short one after the last whole group.
  for (int b = 0; b < 4; ++b) block(x, 0, b);
  expect_scalar_bytes(x, x.size() - 25);
}

// A segment of more groups than the bfloat16 body's 16-bit lanes can count its saturated
// elements in (2^15 / 8), every element saturating under the floor's scales.
TEST_F(MxRowBodies, LongSegmentsCountEverySaturatedElement) {
  Source x;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> over(452.0f, 511.0f);  // above 448 in bfloat16 too
  const int64_t groups = 4500;
  for (int64_t i = 0; i < groups * kGroup + 40; ++i) x.push(i % 2 ? -over(gen) : over(gen));
  for (const DType dtype : {kFloat32, kBFloat16}) {
    const void* src = dtype == kFloat32 ? static_cast<const void*>(x.f32.data()) : x.bf16.data();
    const MxStatsRun ref =
        expect_scalar_bytes(src, dtype, x.size(), Element::kE4m3, E8m0Rounding::kFloor);
    EXPECT_EQ(ref.saturated, x.size());
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx
