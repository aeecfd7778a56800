// NVFP4's bfloat16 16x16 cast (kernels/cpu/mx/nvfp4_rows_bf16_avx2.cpp) given tiles' amax below
// the source's (not its own: Nvfp4Encoding::tile_amax_exact false), at each SIMD level against the
// scalar body, with and without statistics: elements then lie above the amax their scale codes
// come from, up to y = |x| * factor far past 6, where the groups' octave codes and uncapped
// lookups (which hold only up to y = 7) must not be taken.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "support/simd_levels.h"

namespace mantissa::kernels::mx {
namespace {

using mantissa::testing::simd_levels_here;

TEST(Nvfp4Bf16Bounds, TilesAmaxBelowTheSourceGiveTheScalarBytes) {
  const int64_t rows = 32, cols = 16 * 16 * 2;
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  uint32_t h = 2024;
  for (uint16_t& v : x) {
    h = h * 1664525u + 1013904223u;
    // Magnitudes over about 4 octaves around 1, either sign.
    const float u = static_cast<float>(static_cast<int32_t>(h) >> 8) * 0x1p-23f;  // [-1, 1)
    v = static_cast<uint16_t>(std::bit_cast<uint32_t>(u * 8.0f) >> 16);
  }
  const int64_t blocks = cols / 16, nc = rows * cols / 2, ns = rows * blocks;
  std::vector<float> tile_amax(static_cast<size_t>(rows / 16 * blocks));
  const float amax = nvfp4_tile_amax(x.data(), kBFloat16, rows, cols, tile_amax.data());
  int compared = 0;
  for (const float below : {0.5f, 0.125f, 0x1p-12f}) {
    std::vector<float> given = tile_amax;
    for (float& a : given) a = scalar::float_of(scalar::bits_of(a * below) & 0xFFFF0000u);
    Nvfp4Encoding e;
    e.tensor_scale = nvfp4_tensor_scale_of(amax);
    e.tiles_16x16 = true;
    e.tile_amax = given.data();
    std::vector<uint8_t> ref_c(nc), ref_s(ns);
    MxCastStats ref_st;
    nvfp4_quantize(x.data(), kBFloat16, rows, cols, e, ref_c.data(), ref_s.data(),
                   SimdLevel::kScalar, &ref_st);
    ASSERT_GT(ref_st.saturated, 0);
    for (SimdLevel level : simd_levels_here()) {
      if (level == SimdLevel::kScalar) continue;
      SCOPED_TRACE(std::string(simd_level_name(level)) + ", amax x " + std::to_string(below));
      for (const bool stats : {true, false}) {
        std::vector<uint8_t> c(nc, 0xAB), s(ns, 0xAB);
        MxCastStats st;
        nvfp4_quantize(x.data(), kBFloat16, rows, cols, e, c.data(), s.data(), level,
                       stats ? &st : nullptr);
        EXPECT_EQ(s, ref_s);
        EXPECT_EQ(c, ref_c);
        if (stats) {
          EXPECT_EQ(st.saturated, ref_st.saturated);
          EXPECT_EQ(st.flushed, ref_st.flushed);
        }
      }
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "no AVX2 on this CPU";
}

}  // namespace
}  // namespace mantissa::kernels::mx
