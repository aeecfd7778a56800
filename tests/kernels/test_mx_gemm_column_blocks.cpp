// The block-format product (kernels/cpu/mx/mx_gemm.h) of operands with blocks along their stored
// columns (MxBlocks::kAlongColumns, read transposed): at every SIMD level the bits of the scalar
// level's table loop, for every element format, with codes of every byte (NaN codes included)
// under scales of every kind (NaN, 2^-127, 2^127), B's panels decoded by each task and decoded
// once for tasks sharing them, widths that are whole register tiles, cut ones and odd ones, and K
// with a short last block and more than one slice.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/mx/mx_gemm.h"
#include "support/simd_levels.h"

namespace mantissa::kernels::mx {
namespace {

using mantissa::testing::simd_levels_here;

struct Stored {
  std::vector<uint8_t> codes, scales;
};

// X (rows x cols) with random codes of `e` and one scale code per 32 x 1 block of a column,
// mostly near 2^0 with a NaN, a 0 (2^-127) and a 254 (2^127) here and there.
Stored column_blocked(Element e, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  Stored s;
  s.codes.resize(static_cast<size_t>(rows * code_bytes(e, cols)));
  for (auto& c : s.codes) c = static_cast<uint8_t>(rng());
  s.scales.resize(static_cast<size_t>((rows + 31) / 32 * cols));
  for (size_t i = 0; i < s.scales.size(); ++i) {
    const uint32_t r = rng() % 64;
    s.scales[i] = r == 0 ? 0xFF : r == 1 ? 0 : r == 2 ? 254 : static_cast<uint8_t>(120 + r % 15);
  }
  return s;
}

TEST(MxGemmColumnBlocks, EveryLevelGivesTheScalarLevelsBits) {
  const std::vector<SimdLevel> levels = simd_levels_here();
  for (const Element e : {Element::kE4m3, Element::kE5m2, Element::kE2m1}) {
    // (M, N, K): 600 rows make two tasks of rows, which share B's decoded panels.
    for (const auto& [M, N, K] : {std::array<int64_t, 3>{40, 96, 77},
                                  {70, 77, 64},
                                  {600, 300, 300},
                                  {33, 45, 20},
                                  {50, 272, 32}}) {
      const Stored a = column_blocked(e, K, M, 7), b = column_blocked(e, K, N, 8);
      const auto view = [&](const Stored& s, int64_t cols) {
        MxOperandView v{s.codes.data(), s.scales.data(), e, false, K, cols, true};
        v.blocks = MxBlocks::kAlongColumns;
        return v;
      };
      std::vector<float> want(static_cast<size_t>(M * N)), got(want.size());
      mx_gemm(view(a, M), view(b, N), M, N, K, 1.0f, nullptr, want.data(), SimdLevel::kScalar);
      for (const SimdLevel level : levels) {
        std::fill(got.begin(), got.end(), -1.0f);
        mx_gemm(view(a, M), view(b, N), M, N, K, 1.0f, nullptr, got.data(), level);
        for (size_t i = 0; i < want.size(); ++i) {
          uint32_t w = 0, g = 0;
          std::memcpy(&w, &want[i], 4);
          std::memcpy(&g, &got[i], 4);
          ASSERT_EQ(g, w) << "element " << static_cast<int>(e) << " shape " << M << "x" << N << "x"
                          << K << " level " << static_cast<int>(level) << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx
