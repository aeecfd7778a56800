// NVFP4's E4M3 block scale codes by nvfp4_scale_lookup.h's 16-entry lookup, which the AVX-512
// stochastic rows take in place of the compares: it serves under every tensor scale where the
// compares do, its code at each least amax whose code is k or more (one and two bits below and
// above) and at each bucket's edges is the scalar body's, and the stochastic casts of blocks
// whose amax lie there give the scalar bytes at every level.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
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

using detail::Nvfp4ScaleCodeLookup;
using detail::Nvfp4ScaleCodeThresholds;
using mantissa::testing::simd_levels_here;

float float_of(uint32_t b) { return std::bit_cast<float>(b); }
int scalar_code(uint32_t bits, float ts) {
  return scalar::nvfp4_block_scale(float_of(bits), ts).code;
}

// The least float bits whose scale code under ts is k or more.
uint32_t least_amax(int k, float ts) {
  uint32_t lo = 0, hi = 0x7F800000u;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (scalar_code(mid, ts) >= k)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// scale_codes16's code of one amax's bits.
int lookup_code(const Nvfp4ScaleCodeLookup& l, uint32_t bits) {
  const int32_t d = static_cast<int32_t>(bits - static_cast<uint32_t>(l.base));
  const int i = (d >> 19) & 15;
  return std::clamp((d >> 20) + l.add[i] + ((d & 0x7FFFFF) > l.threshold[i] ? 1 : 0), 8, 126);
}

TEST(Nvfp4ScaleCodeLookup, ServesWhereTheComparesServeAndGivesTheirCodes) {
  int served = 0;
  for (int e = -130; e <= 128; ++e) {
    for (int m = 0; m < 64; ++m) {
      const float ts = std::ldexp(1.0f + m / 64.0f, e);
      Nvfp4ScaleCodeThresholds t;
      t.make(ts);
      Nvfp4ScaleCodeLookup l;
      l.make(t);
      ASSERT_EQ(l.ok, t.ok) << "tensor scale " << ts;
      if (!l.ok) continue;
      ++served;
      if (m % 16 != 0) continue;
      SCOPED_TRACE("tensor scale " + std::to_string(ts));
      std::vector<uint32_t> bits;
      for (int k = 9; k <= 126; ++k)
        for (int d = -2; d <= 2; ++d) bits.push_back(least_amax(k, ts) + d);
      // Each bucket's first and last bits, in every octave from A9's on.
      for (int64_t o = l.base; o <= 0x7F800000; o += int64_t{1} << 23)
        for (int64_t i = 0; i < 16; ++i)
          for (const int64_t edge : {o + (i << 19), o + ((i + 1) << 19) - 1})
            if (edge <= 0x7F800000) bits.push_back(static_cast<uint32_t>(edge));
      bits.insert(bits.end(), {0u, 1u, 0x7F800000u, static_cast<uint32_t>(l.base) - 1});
      for (const uint32_t b : bits) ASSERT_EQ(lookup_code(l, b), scalar_code(b, ts)) << b;
    }
  }
  EXPECT_GT(served, 10000);
}

// One row of blocks per tensor scale, block j's amax at the j-th of each least amax whose code
// is k or more (and one below), with a block of 0 and one of infinity, in groups of 16 aligned
// to the random words' 256 columns: every level's stochastic cast gives the scalar bytes.
TEST(Nvfp4ScaleCodeLookup, StochasticRowsAtEveryStepGiveTheScalarBytes) {
  int compared = 0;
  for (const float ts : {1.0f, 0.37f, 3.1e-3f, 7.3e5f, 1e-30f, 2e25f}) {
    std::vector<float> amax = {0.0f, std::numeric_limits<float>::infinity()};
    for (int k = 9; k <= 126; ++k)
      for (const int d : {-1, 0}) amax.push_back(float_of(least_amax(k, ts) + d));
    while (amax.size() % 16 != 0) amax.push_back(1.0f);
    const int64_t rows = 2, cols = 16 * static_cast<int64_t>(amax.size());
    std::vector<float> x(static_cast<size_t>(rows * cols));
    uint32_t h = 4321;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        h = h * 1664525u + 1013904223u;
        const float m = amax[static_cast<size_t>(c / 16)];
        const float u = static_cast<float>(static_cast<int32_t>(h) >> 8) * 0x1p-23f;  // [-1, 1)
        x[static_cast<size_t>(r * cols + c)] =
            c % 16 == r ? m : (std::isfinite(m) ? m * u : 2.0f * u);
      }
    std::vector<uint16_t> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i)  // bfloat16 by truncation: the amax stay at or below
      xb[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(x[i]) >> 16);
    for (const bool bf16 : {true, false}) {
      const void* src = bf16 ? static_cast<const void*>(xb.data()) : x.data();
      const DType dtype = bf16 ? kBFloat16 : kFloat32;
      Nvfp4Encoding e;
      e.tensor_scale = ts;
      e.rounding = Fp4Rounding::kStochastic;
      e.seed = 17;
      e.offset = 5;
      const testing::Nvfp4Cast want =
          testing::nvfp4_cast_at(src, dtype, rows, cols, e, SimdLevel::kScalar);
      for (SimdLevel level : simd_levels_here()) {
        if (level == SimdLevel::kScalar) continue;
        SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + " at " + simd_level_name(level) +
                     ", tensor scale " + std::to_string(ts));
        testing::expect_nvfp4_cast(src, dtype, rows, cols, e, level, want);
        ++compared;
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "no AVX2 on this CPU";
}

}  // namespace
}  // namespace mantissa::kernels::mx
