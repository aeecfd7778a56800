// The block-format product (kernels/cpu/mx/mx_gemm.h) on the bf16 register tile: where this CPU
// has it, the AVX-512 BF16 level gives the AVX-512 level's bits (the fp32 tile) for every element
// format, MX and NVFP4 scales, blocks along K and along the stored columns, odd K, K past a
// slice, shapes cut by the register tile and tasks sharing B's panels; and where an operand
// holds a NaN or infinite code, a NaN scale or a scale so small that the sums could be
// subnormal (the guard refuses), the fp32 tile's bits as well.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm/bf16_pair_tile.h"
#include "kernels/cpu/mx/mx_bf16_guard.h"
#include "kernels/cpu/mx/mx_gemm.h"

namespace mantissa::kernels::mx {
namespace {

struct Stored {
  std::vector<uint8_t> codes, scales;
  Element e;
  bool nvfp4, columns;
  int64_t rows, cols;
  MxOperandView view(bool transposed) const {
    MxOperandView v{codes.data(), scales.data(), e, nvfp4, rows, cols, transposed};
    if (columns) v.blocks = MxBlocks::kAlongColumns;
    return v;
  }
};

// X (rows x cols): random codes of `e` other than NaN and infinity, scales near 2^0 (E8M0 codes
// 120..134, or any finite positive E4M3 code for NVFP4), one per 1 x block of a row or (columns)
// 32 x 1 of a column.
Stored stored(Element e, bool nvfp4, bool columns, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  Stored s{{}, {}, e, nvfp4, columns, rows, cols};
  s.codes.resize(static_cast<size_t>(rows * code_bytes(e, cols)));
  for (auto& c : s.codes) {
    do c = static_cast<uint8_t>(rng());
    while ((e == Element::kE4m3 && (c & 0x7F) == 0x7F) ||
           (e == Element::kE5m2 && (c & 0x7F) >= 0x7C));
  }
  const int64_t block = nvfp4 ? kNvfp4Block : kMxBlock;
  s.scales.resize(
      static_cast<size_t>(columns ? (rows + 31) / 32 * cols : rows * ((cols + block - 1) / block)));
  for (auto& c : s.scales) c = static_cast<uint8_t>(nvfp4 ? rng() % 0x7F : 120 + rng() % 15);
  return s;
}

std::vector<uint32_t> product_bits(const MxOperandView& a, const MxOperandView& b, int64_t M,
                                   int64_t N, int64_t K, SimdLevel level) {
  std::vector<float> out(static_cast<size_t>(M * N), -1.0f);
  mx_gemm(a, b, M, N, K, 1.0f, nullptr, out.data(), level);
  std::vector<uint32_t> bits(out.size());
  std::memcpy(bits.data(), out.data(), out.size() * sizeof(float));
  return bits;
}

bool bf16_here() { return bf16_pair_tile(simd_level()) != nullptr; }
constexpr const char* kNoTile = "no bf16 tile here (AVX-512 BF16 missing or the probe failed)";

struct Kind {
  Element e;
  bool nvfp4;
  const char* name;
};
const Kind kKinds[] = {{Element::kE4m3, false, "mxfp8 e4m3"},
                       {Element::kE5m2, false, "mxfp8 e5m2"},
                       {Element::kE2m1, false, "mxfp4"},
                       {Element::kE2m1, true, "nvfp4"}};
// (M, N, K): odd K, K short of a block and past a 256-element slice, tiles cut by M and N,
// 600 rows (two tasks of rows, sharing B's decoded panels).
const std::array<int64_t, 3> kShapes[] = {{1, 1, 1},      {3, 5, 17},    {67, 37, 100},
                                          {130, 300, 45}, {5, 260, 257}, {40, 96, 301},
                                          {600, 300, 513}};

TEST(MxGemmBf16, GivesTheFp32TilesBits) {
  if (!bf16_here()) GTEST_SKIP() << kNoTile;
  for (const Kind& kind : kKinds) {
    for (const auto& [M, N, K] : kShapes) {
      SCOPED_TRACE(std::string(kind.name) + " " + std::to_string(M) + "x" + std::to_string(N) +
                   "x" + std::to_string(K));
      // Blocks along K (V = X), as a forward product.
      const Stored a = stored(kind.e, kind.nvfp4, false, M, K, 1);
      const Stored b = stored(kind.e, kind.nvfp4, false, N, K, 2);
      ASSERT_TRUE(bf16_sums_exact(a.view(false), b.view(false), K));
      EXPECT_EQ(product_bits(a.view(false), b.view(false), M, N, K, SimdLevel::kAvx512Bf16),
                product_bits(a.view(false), b.view(false), M, N, K, SimdLevel::kAvx512));
      if (kind.nvfp4) continue;
      // Blocks along the stored columns, read transposed (MX's backward products).
      const Stored at = stored(kind.e, false, true, K, M, 3);
      const Stored bt = stored(kind.e, false, true, K, N, 4);
      ASSERT_TRUE(bf16_sums_exact(at.view(true), bt.view(true), K));
      EXPECT_EQ(product_bits(at.view(true), bt.view(true), M, N, K, SimdLevel::kAvx512Bf16),
                product_bits(at.view(true), bt.view(true), M, N, K, SimdLevel::kAvx512));
    }
  }
}

TEST(MxGemmBf16, OperandsTheTileCannotTakeGiveTheFp32TilesBits) {
  if (!bf16_here()) GTEST_SKIP() << kNoTile;
  const int64_t M = 70, N = 90, K = 301;
  for (const Kind& kind : kKinds) {
    SCOPED_TRACE(kind.name);
    const Stored a0 = stored(kind.e, kind.nvfp4, false, M, K, 5);
    const Stored b0 = stored(kind.e, kind.nvfp4, false, N, K, 6);
    auto check = [&](const Stored& a, const Stored& b, const char* what) {
      EXPECT_EQ(product_bits(a.view(false), b.view(false), M, N, K, SimdLevel::kAvx512Bf16),
                product_bits(a.view(false), b.view(false), M, N, K, SimdLevel::kAvx512))
          << what;
    };
    // A NaN or infinite code in a later slice (the task switches tiles there), then in the first.
    if (kind.e != Element::kE2m1) {
      for (const int64_t k : {int64_t{280}, int64_t{3}}) {
        Stored a = a0;
        a.codes[5 * K + k] = kind.e == Element::kE4m3 ? 0x7F : 0xFC;  // NaN; -inf
        check(a, b0, "a NaN or infinite code in A");
        Stored b = b0;
        b.codes[7 * K + k] = kind.e == Element::kE4m3 ? 0xFF : 0x7C;
        check(a0, b, "a NaN or infinite code in B");
      }
    }
    // A NaN scale.
    Stored a = a0;
    a.scales[3] = kind.nvfp4 ? 0x7F : 0xFF;
    check(a, b0, "a NaN scale");
    if (kind.nvfp4) continue;
    // Scales so small the products' sums may be subnormal: the guard refuses.
    Stored tiny = a0;
    for (int64_t q = 0; q < (K + 31) / 32; ++q) tiny.scales[2 * ((K + 31) / 32) + q] = 8;
    Stored small = b0;
    for (auto& s : small.scales) s = static_cast<uint8_t>(s - 10);
    EXPECT_FALSE(bf16_sums_exact(tiny.view(false), small.view(false), K));
    check(tiny, small, "a tiny scale");
    // Scales so large the sums may overflow: refused too.
    Stored huge = a0;
    huge.scales[0] = 250;
    EXPECT_FALSE(bf16_sums_exact(huge.view(false), b0.view(false), K));
    check(huge, b0, "a huge scale");
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx
