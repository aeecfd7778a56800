// NVFP4's float32 row cast rounded to nearest at each SIMD level (kernels/cpu/mx/
// nvfp4_rows_avx2.cpp, nvfp4_cast_avx512.cpp: E2M1 codes by a byte table of y = |x| * factor's
// steps) against the scalar body: codes, scales and statistics byte for byte, on elements whose
// products land on every step of the E2M1 grid (the ties included), one float32 step either side
// of it and a few steps further, in every octave from the subnormal range to past the format's
// top, under factors that are powers of 2 and factors that are not; beside all-zero blocks,
// blocks holding infinity or NaN, blocks of subnormal amax, blocks at 6 * 448 * tensor scale,
// rows whose last blocks make no whole group and a short last block, per 1x16 block and per
// 16x16 tile. The same source rounded to bfloat16 checks the bfloat16 body
// (nvfp4_rows_bf16_avx2.cpp) the same way, whose 16x16 cast without statistics takes no block's own
// amax. Rows of whole blocks (cast in segments that span rows) as well as rows with a short last
// block; 16x16 tiles with the cast's own tiles' amax, with the caller's own ones
// (Nvfp4Encoding::tile_amax_exact: the records taken from them), and with amax that are not the
// source's (the records then the blocks' own); 1x16 blocks given their own amax
// (Nvfp4Encoding::block_amax) against the scalar body taking them itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"
#include "support/nvfp4_cast_check.h"

namespace mantissa::kernels::mx {
namespace {

// The E2M1 grid's steps (the code changes there or, at 6, saturation begins).
constexpr float kSteps[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};

float step_from(float x, int steps) {
  uint32_t b = std::bit_cast<uint32_t>(x);
  b = static_cast<uint32_t>(static_cast<int64_t>(b) + steps);
  return std::bit_cast<float>(b);
}

// Rows x cols float32 elements: each block's element (row + block) % 16 an anchor that sets its
// scale (6 * tensor scale * 2^e, e from the block), the rest elements x whose products with the
// block's factor land on a grid step times 2^o (o from -3 to 1) or one, two or seven float32
// steps away, either sign; every ninth block an edge block instead (two kinds hold infinity or
// NaN; without `specials` they hold 0.3 or 0.7 * anchor instead, so that whole groups of 16 tiles
// take the bfloat16 body's 16-block path).
std::vector<float> source(int64_t rows, int64_t cols, float tensor_scale, bool specials = true) {
  std::vector<float> x(static_cast<size_t>(rows * cols));
  uint32_t h = 0x2545F491u;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b * 16 < cols; ++b) {
      const int kind = static_cast<int>((r * 7 + b) % 9);
      const int e = static_cast<int>((r + 3 * b) % 13) - 6;
      const float anchor = 6.0f * tensor_scale * std::ldexp(1.0f, e);
      const float factor = scalar::nvfp4_block_scale(anchor, tensor_scale).factor;
      const float top = 2688.0f * tensor_scale;  // amax / 6 / tensor scale = 448
      for (int64_t c = b * 16; c < std::min(cols, b * 16 + 16); ++c) {
        h = h * 1664525u + 1013904223u;
        const float sign = (h >> 9) & 1 ? -1.0f : 1.0f;
        float v;
        if (c % 16 == (r + b) % 16) {
          v = sign * anchor;
        } else if (kind == 0) {
          v = (h >> 11) & 1 ? 0.0f : -0.0f;  // an all-zero block
        } else if (kind == 1) {
          v = c % 16 == 4 && specials ? sign * std::numeric_limits<float>::infinity()
                                      : sign * anchor * 0.3f;
        } else if (kind == 2) {
          v = c % 16 == 7 && specials ? std::numeric_limits<float>::quiet_NaN()
                                      : sign * anchor * 0.7f;
        } else if (kind == 3) {
          v = sign * std::bit_cast<float>(1 + (h >> 10) % 0x7FFFFF);  // subnormal amax
        } else if (kind == 4) {
          v = c % 16 == 1 ? sign * top : sign * step_from(top, -static_cast<int>((h >> 12) % 5));
        } else {
          const float y =
              kSteps[(h >> 13) % 8] * std::ldexp(1.0f, static_cast<int>((h >> 17) % 5) - 3);
          static constexpr int kOff[] = {0, 0, 0, 1, -1, 2, -2, 7, -7};
          v = sign * step_from(y / factor, kOff[(h >> 20) % 9]);
        }
        x[static_cast<size_t>(r * cols + c)] = v;
      }
    }
  }
  return x;
}

// The cast of a float32 or bfloat16 source at `level` against the scalar body's, with and
// without statistics, under `e`; returns the scalar body's statistics.
MxCastStats check_cast(const void* x, DType dtype, int64_t rows, int64_t cols, Nvfp4Encoding e,
                       SimdLevel level) {
  const testing::Nvfp4Cast want =
      testing::nvfp4_cast_at(x, dtype, rows, cols, e, SimdLevel::kScalar);
  testing::expect_nvfp4_cast(x, dtype, rows, cols, e, level, want);
  return want.stats;
}

// check_cast of the test source at `level`, per 1x16 block and per 16x16 tile (the tiles' amax
// taken by the cast, given with tile_amax_exact, and given as twice the source's without it).
void check_level(SimdLevel level, DType dtype = kFloat32) {
  // Two groups of 16 blocks, 3 blocks more and a short block of 7; or rows of whole blocks.
  const int64_t rows = 40;
  int compared = 0;
  for (const int64_t cols : {16 * 16 * 2 + 3 * 16 + 7, 16 * 16 * 2 + 3 * 16}) {
    for (const float ts : {1.0f, 0.37f, 3.1e-3f, 1e-37f, 2e30f}) {
      for (const bool specials : {true, false}) {
        const std::vector<float> f32 = source(rows, cols, ts, specials);
        std::vector<uint16_t> b16(f32.size());
        for (size_t i = 0; i < f32.size(); ++i) b16[i] = float_to_bf16_bits(f32[i]);
        const void* x = dtype == kFloat32 ? static_cast<const void*>(f32.data()) : b16.data();
        std::vector<float> tile_amax(static_cast<size_t>((rows + 15) / 16 * ((cols + 15) / 16)));
        nvfp4_tile_amax(x, dtype, rows, cols, tile_amax.data());
        std::vector<float> other_amax = tile_amax;
        for (float& a : other_amax) a *= 2.0f;
        // The blocks' amax of the source's values (nvfp4_block_amax takes float32 only; a
        // bfloat16 source's widened values have the same amax).
        std::vector<float> wide(f32.size());
        for (size_t i = 0; i < f32.size(); ++i)
          wide[i] = dtype == kFloat32 ? f32[i] : bf16_bits_to_float(b16[i]);
        std::vector<float> block_amax(static_cast<size_t>(rows * ((cols + 15) / 16)));
        nvfp4_block_amax(wide.data(), kFloat32, rows, cols, block_amax.data(), level);
        for (const int tiles : {0, 1, 2, 3, 4}) {
          static constexpr const char* kTiles[] = {"1x16", "16x16", "16x16 given own tile amax",
                                                   "16x16 given other tile amax",
                                                   "1x16 given own block amax"};
          SCOPED_TRACE(std::string(kTiles[tiles]) + " " + std::string(dtype.name()) + " at " +
                       simd_level_name(level) + ", " + std::to_string(cols) +
                       " columns, tensor scale " + std::to_string(ts) +
                       (specials ? "" : ", no infinity or NaN"));
          Nvfp4Encoding e;
          e.tensor_scale = ts;
          e.tiles_16x16 = tiles > 0 && tiles < 4;
          if (tiles == 2) {
            e.tile_amax = tile_amax.data();
            e.tile_amax_exact = true;
          } else if (tiles == 3) {
            e.tile_amax = other_amax.data();
          }
          Nvfp4Encoding given = e;
          if (tiles == 4) {
            // The bytes and statistics of the scalar body taking each block's own amax.
            given.block_amax = block_amax.data();
            e.block_amax = nullptr;
          }
          const testing::Nvfp4Cast want =
              testing::nvfp4_cast_at(x, dtype, rows, cols, e, SimdLevel::kScalar);
          testing::expect_nvfp4_cast(x, dtype, rows, cols, given, level, want);
          const MxCastStats ref = want.stats;
          // The source saturates and flushes elements under its own amax (with whole-block rows
          // the 16x16 tiles' scales may saturate none; the doubled amax's may neither).
          if (tiles != 3 && cols % 16 != 0) {
            EXPECT_GT(ref.saturated, 0);
            EXPECT_GT(ref.flushed, 0);
          }
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 100);
}

TEST(Nvfp4Rows, Float32TableCodesGiveTheScalarBytesAtAvx2) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  check_level(SimdLevel::kAvx2);
}

TEST(Nvfp4Rows, Float32TableCodesGiveTheScalarBytesAtAvx512) {
  if (simd_level() < SimdLevel::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL";
  check_level(SimdLevel::kAvx512);
}

TEST(Nvfp4Rows, Bfloat16CastsGiveTheScalarBytesAtAvx2) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  check_level(SimdLevel::kAvx2, kBFloat16);
}

TEST(Nvfp4Rows, Bfloat16CastsGiveTheScalarBytesAtAvx512) {
  if (simd_level() < SimdLevel::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512 F/BW/VL";
  check_level(SimdLevel::kAvx512, kBFloat16);
}

// Blocks of bfloat16 magnitudes below each amax of a sweep over the whole bfloat16 range (every
// bit pattern below 0x100, then every 61st): a block holds the amax and 15 of the magnitudes
// 0..amax in order (about 64 blocks an amax), signs alternating, so that under each tensor scale
// every scale code the amax reach meets magnitudes across all its E2M1 thresholds, the subnormal
// ones among them (where the codes' lookup tables of the AVX-512 level do not serve and the
// compares take over).
TEST(Nvfp4Rows, Bfloat16MagnitudesUnderEveryScaleCodeGiveTheScalarBytes) {
  std::vector<uint16_t> x;
  for (uint32_t a = 1; a < 0x7F80; a += a < 0x100 ? 1 : 61) {
    const uint32_t stride = std::max<uint32_t>(1, a / (15 * 64));
    for (uint32_t m = 0; m <= a;) {
      x.push_back(static_cast<uint16_t>(a));
      for (int i = 0; i < 15; ++i, m = std::min(m + stride, a))
        x.push_back(static_cast<uint16_t>(m | (i % 2 ? 0x8000u : 0u)));
      if (m == a) break;
    }
  }
  x.resize((x.size() + 255) / 256 * 256, 0);  // whole groups of 16 blocks
  const int64_t cols = 4096, rows = static_cast<int64_t>(x.size()) / cols + 1;
  x.resize(static_cast<size_t>(rows * cols), 0);
  for (const SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (simd_level() < level) continue;
    for (const float ts : {1.0f, 3.1e-3f, 1.2e-36f, 3e-36f, 1e-37f, 1e-40f, 2e30f, 1e37f}) {
      SCOPED_TRACE(std::string(simd_level_name(level)) + ", tensor scale " + std::to_string(ts));
      Nvfp4Encoding e;
      e.tensor_scale = ts;
      check_cast(x.data(), kBFloat16, rows, cols, e, level);
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx
