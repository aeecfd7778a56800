// The 16x16 tiles' amax of NVFP4's weight scaling (kernels/cpu/mx/nvfp4_tiles.cpp): each tile's
// largest |x| (NaN where it holds a NaN) equals an element-by-element scan, at every SIMD level,
// for float32 and bfloat16 sources with tiles cut by both edges; the tensor amax it returns
// gives the per-tensor scale of nvfp4_tensor_scale's own pass, NaN included. The same of the
// 1x16 blocks' amax pass (kernels/cpu/mx/nvfp4_block_amax.cpp).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/error.h"
#include "support/simd_levels.h"

namespace mantissa::kernels::mx {
namespace {

using mantissa::testing::simd_levels_here;

// A rows x cols source of normal numbers whose tiles' scales differ by up to 2^16 (and, with
// `tiny`, tiles of subnormals), its first block zeros (one -0), -inf at the cut corner, and with
// `with_nan` a NaN in row 17 at column `nan_col`.
void check_tiles(int64_t rows, int64_t cols, bool with_nan, int64_t nan_col = 20,
                 bool tiny = false) {
  std::mt19937 gen(static_cast<uint32_t>(rows * 97 + cols));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> f32(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      f32[r * cols + c] =
          nd(gen) * std::ldexp(1.0f, tiny && (r / 16 + c / 16) % 3 == 1
                                         ? -135
                                         : static_cast<int>((r / 16 + c / 16) % 5) * 4);
  for (int64_t c = 0; c < std::min<int64_t>(cols, 16); ++c) f32[c] = c == 3 ? -0.0f : 0.0f;
  f32[(rows - 1) * cols + cols - 1] = -std::numeric_limits<float>::infinity();  // the cut corner
  if (with_nan) f32[17 * cols + nan_col] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint16_t> b16(f32.size());
  for (size_t i = 0; i < f32.size(); ++i) b16[i] = float_to_bf16_bits(f32[i]);
  const int64_t tile_rows = (rows + 15) / 16, blocks = (cols + 15) / 16;
  for (DType dt : {kFloat32, kBFloat16}) {
    const void* src = dt == kFloat32 ? static_cast<const void*>(f32.data()) : b16.data();
    auto value = [&](int64_t i) { return dt == kFloat32 ? f32[i] : bf16_bits_to_float(b16[i]); };
    std::vector<float> want(static_cast<size_t>(tile_rows * blocks), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float& m = want[(r / 16) * blocks + c / 16];
        const float a = std::fabs(value(r * cols + c));
        m = (m != m || a != a) ? std::numeric_limits<float>::quiet_NaN() : std::max(m, a);
      }
    for (SimdLevel level : simd_levels_here()) {
      std::vector<float> got(want.size(), -1.0f);
      const float tensor = nvfp4_tile_amax(src, dt, rows, cols, got.data(), level);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << dt.name() << " level " << static_cast<int>(level) << " tile " << i;
      EXPECT_EQ(std::isnan(tensor), with_nan);
      EXPECT_EQ(std::bit_cast<uint32_t>(nvfp4_tensor_scale_of(tensor)),
                std::bit_cast<uint32_t>(nvfp4_tensor_scale(src, dt, rows * cols, level)))
          << dt.name() << " level " << static_cast<int>(level);
    }
  }
}

TEST(Nvfp4Tiles, TileAmaxEqualsAScanAndGivesTheTensorScale) {
  check_tiles(37, 50, false);  // both edges cut inside a tile
  check_tiles(37, 50, true);
  check_tiles(300, 272, false);  // tile rows over threads
}

// The AVX2 pass takes 16 bfloat16 or 8 float32 blocks of a row at a time: rows of whole groups,
// of groups and 1-15 blocks more, and a short last block; NaN in a later group's block; tiles
// of subnormals.
TEST(Nvfp4Tiles, TileAmaxOfWideRowsEqualsAScan) {
  check_tiles(16, 256, false);  // one bfloat16 group, two float32 groups
  check_tiles(33, 128, true, 127);
  check_tiles(35, 16 * 37 + 9, false);
  check_tiles(35, 16 * 37 + 9, true, 16 * 33 + 2);
  check_tiles(50, 16 * 21, true, 16 * 20 + 15, true);
  check_tiles(20, 16 * 19 + 1, false, 0, true);
}

// The 1x16 blocks' amax (kernels/cpu/mx/nvfp4_block_amax.cpp) of the same sources: each block's
// largest |x| (NaN where it holds a NaN) equals a scan and the tensor amax gives the tensor
// scale, for rows of whole blocks (runs that span rows), and rows with a short last block or
// 1-15 (1-7) whole blocks past the AVX2 pass's groups.
void check_blocks(int64_t rows, int64_t cols, bool with_nan, int64_t nan_col = 20) {
  std::mt19937 gen(static_cast<uint32_t>(rows * 31 + cols));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> f32(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i)
    f32[i] = nd(gen) * std::ldexp(1.0f, static_cast<int>((i / 16) % 7) * 30 - 140);
  for (int64_t c = 0; c < std::min<int64_t>(cols, 16); ++c) f32[c] = c == 3 ? -0.0f : 0.0f;
  f32[rows * cols - 1] = -std::numeric_limits<float>::infinity();
  if (with_nan) f32[(rows / 2) * cols + nan_col] = std::numeric_limits<float>::quiet_NaN();
  const int64_t blocks = (cols + 15) / 16;
  {
    const DType dt = kFloat32;
    const float* src = f32.data();
    auto value = [&](int64_t i) { return f32[i]; };
    std::vector<float> want(static_cast<size_t>(rows * blocks), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        float& m = want[r * blocks + c / 16];
        const float a = std::fabs(value(r * cols + c));
        m = (m != m || a != a) ? std::numeric_limits<float>::quiet_NaN() : std::max(m, a);
      }
    for (SimdLevel level : simd_levels_here()) {
      std::vector<float> got(want.size(), -1.0f);
      const float tensor = nvfp4_block_amax(src, dt, rows, cols, got.data(), level);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << dt.name() << " level " << static_cast<int>(level) << " block " << i;
      EXPECT_EQ(std::isnan(tensor), with_nan);
      EXPECT_EQ(std::bit_cast<uint32_t>(nvfp4_tensor_scale_of(tensor)),
                std::bit_cast<uint32_t>(nvfp4_tensor_scale(src, dt, rows * cols, level)))
          << dt.name() << " level " << static_cast<int>(level);
    }
  }
}

TEST(Nvfp4Tiles, BlockAmaxEqualsAScanAndGivesTheTensorScale) {
  check_blocks(3, 256, false);  // whole groups
  check_blocks(37, 50, false);  // a short last block a row
  check_blocks(37, 50, true, 49);
  check_blocks(29, 16 * 37, true, 16 * 33 + 2);  // runs of whole blocks that span rows
  check_blocks(300, 16 * 19 + 9, false);         // over threads
  check_blocks(300, 16 * 64, true, 16 * 40 + 15);
  check_blocks(1, 16 * 4100, true, 16 * 4097 + 1);  // more than a run's blocks
}

TEST(Nvfp4Tiles, BlockAmaxRefusesABfloat16Source) {
  std::vector<uint16_t> src(32, 0);
  std::vector<float> blocks(2);
  EXPECT_THROW(nvfp4_block_amax(src.data(), kBFloat16, 1, 32, blocks.data()), Error);
}

TEST(Nvfp4Tiles, TensorScaleOfAnAllZeroTensorIsOne) {
  std::vector<float> zeros(32 * 32, 0.0f), tiles(4);
  for (SimdLevel level : simd_levels_here()) {
    const float amax = nvfp4_tile_amax(zeros.data(), kFloat32, 32, 32, tiles.data(), level);
    EXPECT_EQ(std::bit_cast<uint32_t>(amax), 0u);
    EXPECT_EQ(nvfp4_tensor_scale_of(amax), 1.0f);
    std::vector<float> blocks(64);
    EXPECT_EQ(std::bit_cast<uint32_t>(
                  nvfp4_block_amax(zeros.data(), kFloat32, 32, 32, blocks.data(), level)),
              0u);
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx
