// The block-scaled FP8 product (kernels/cpu/fp8/fp8_block.h, block_scaled_gemm) on the bf16
// register tile: where this CPU has it, the AVX-512 BF16 level gives the AVX-512 level's bits
// (the fp32 tile) for E4M3 and E5M2 operands, each layout of A and B the kernel decodes, scales
// per row and per 128-row tile, odd K, K past a slice, shapes cut by the register tile, float32
// and bfloat16 results; and where a slice holds a NaN or infinite code, the fp32 tile's bits too.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/gemm/bf16_pair_tile.h"

namespace mantissa::kernels::fp8 {
namespace {

// Random codes of `dt` other than NaN and infinity.
std::vector<uint8_t> codes(DType dt, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> c(static_cast<size_t>(n));
  for (auto& x : c) {
    do x = static_cast<uint8_t>(rng());
    while (dt == kFloat8_e4m3fn ? (x & 0x7F) == 0x7F : (x & 0x7F) >= 0x7C);
  }
  return c;
}

std::vector<float> scales(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> s(static_cast<size_t>(n));
  for (auto& x : s)
    x = std::ldexp(1.0f + static_cast<float>(rng() % 100000) / 100000.0f,
                   static_cast<int>(rng() % 9) - 4);
  return s;
}

// Operand X (rows x K, its rows the product's rows or columns), stored row-major or (transposed)
// K x rows, with scales per row (tiles: per 128 rows) and 128-element slice.
struct Operand {
  std::vector<uint8_t> c;
  std::vector<float> s;
  BlockOperandView view;
};
Operand operand(DType dt, int64_t rows, int64_t K, bool transposed, bool tiles, uint32_t seed) {
  const int64_t kt = (K + kBlockLen - 1) / kBlockLen;
  const int64_t srows = tiles ? (rows + kBlockLen - 1) / kBlockLen : rows;
  Operand o{codes(dt, rows * K, seed), scales(srows * kt, seed + 1), {}};
  o.view = {o.c.data(),
            transposed ? 1 : K,
            transposed ? rows : 1,
            o.s.data(),
            tiles ? kBlockLen : 1,
            kt,
            1,
            dt};
  return o;
}

std::vector<uint16_t> product(const BlockOperandView& a, const BlockOperandView& b, int64_t M,
                              int64_t N, int64_t K, DType out, SimdLevel level) {
  std::vector<uint16_t> bits(static_cast<size_t>(M * N * (out == kFloat32 ? 2 : 1)), 0xDEAD);
  block_scaled_gemm(a, b, M, N, K, nullptr, bits.data(), out, level);
  return bits;
}

bool bf16_here() { return bf16_pair_tile(simd_level()) != nullptr; }
constexpr const char* kNoTile = "no bf16 tile here (AVX-512 BF16 missing or the probe failed)";

const std::array<int64_t, 3> kShapes[] = {{1, 1, 1},       {3, 5, 17},    {67, 37, 200},
                                          {130, 300, 129}, {5, 260, 257}, {300, 70, 383}};

TEST(Fp8BlockGemmBf16, GivesTheFp32TilesBits) {
  if (!bf16_here()) GTEST_SKIP() << kNoTile;
  for (const DType dt : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    for (const auto& [M, N, K] : kShapes) {
      for (const bool at : {false, true}) {
        for (const bool bt : {false, true}) {
          SCOPED_TRACE(std::string(dt.name()) + " " + std::to_string(M) + "x" + std::to_string(N) +
                       "x" + std::to_string(K) + (at ? " A^T" : "") + (bt ? " B^T" : ""));
          const Operand a = operand(dt, M, K, at, false, 1), b = operand(dt, N, K, bt, true, 2);
          for (const DType out : {kFloat32, kBFloat16})
            EXPECT_EQ(product(a.view, b.view, M, N, K, out, SimdLevel::kAvx512Bf16),
                      product(a.view, b.view, M, N, K, out, SimdLevel::kAvx512))
                << out.name();
        }
      }
    }
  }
}

TEST(Fp8BlockGemmBf16, SlicesHoldingNanOrInfinityGiveTheFp32TilesBits) {
  if (!bf16_here()) GTEST_SKIP() << kNoTile;
  const int64_t M = 70, N = 90, K = 301;
  for (const DType dt : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    SCOPED_TRACE(dt.name());
    const uint8_t special = dt == kFloat8_e4m3fn ? 0x7F : 0xFC;  // NaN; -inf
    for (const int64_t k : {int64_t{3}, int64_t{200}}) {
      Operand a = operand(dt, M, K, false, false, 3), b = operand(dt, N, K, false, false, 4);
      a.c[5 * K + k] = special;
      EXPECT_EQ(product(a.view, b.view, M, N, K, kFloat32, SimdLevel::kAvx512Bf16),
                product(a.view, b.view, M, N, K, kFloat32, SimdLevel::kAvx512))
          << "A, k " << k;
      a.c[5 * K + k] = 0x01;
      b.c[7 * K + k] = special ^ 0x80;
      EXPECT_EQ(product(a.view, b.view, M, N, K, kFloat32, SimdLevel::kAvx512Bf16),
                product(a.view, b.view, M, N, K, kFloat32, SimdLevel::kAvx512))
          << "B, k " << k;
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::fp8
