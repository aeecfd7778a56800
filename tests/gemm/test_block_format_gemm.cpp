// Products of block-format operands (gemm::block_scaled: MXFP8, MXFP4, NVFP4): against a float64
// product of the operands dequantized by the committed cast kernels, within the fp32
// accumulation bound; every SIMD level's bits equal; the orientation and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/mx/mx_gemm.h"
#include "mantissa/core/convert.h"
#include "mantissa/core/error.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/gemm/gemm.h"
#include "mantissa/mantissa.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using formats::BlockQuantized;
using testing::expect_error;

// rows x cols values whose magnitude varies by row and column (2^-6 .. 2^6), so that blocks
// take different scales.
std::vector<float> values(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      v[r * cols + c] = normal(rng) * std::ldexp(1.0f, static_cast<int>((r * 7 + c / 13) % 13) - 6);
  return v;
}

BlockQuantized quantize(FormatId f, const std::vector<float>& x, int64_t rows, int64_t cols,
                        bool tiles = false) {
  if (f == FormatId::kNvfp4) {
    formats::Nvfp4Options o;
    o.tiles_16x16 = tiles;
    return formats::quantize_nvfp4(x, rows, cols, o);
  }
  if (f == FormatId::kMxfp4) return formats::quantize_mxfp4(x, rows, cols);
  return formats::quantize_mxfp8(x, rows, cols, f);
}

Tensor bytes(const std::vector<uint8_t>& b) {
  return from_buffer(b.data(), kUInt8, {static_cast<int64_t>(b.size())});
}

gemm::Operand operand(const BlockQuantized& q, bool tiles = false) {
  return gemm::block_scaled(q.layout.format, bytes(q.codes), bytes(q.scales),
                            {q.layout.rows, q.layout.cols}, q.tensor_scale, tiles);
}

// got[m, n] against the float64 sum over k of va(m, k) * vb(n, k) + bias[n] (va, vb the
// dequantized operands, row-major with K last): within (K + 4) * 2^-24 * (sum |va vb| + |bias|),
// the fp32 accumulation bound plus the roundings of the scales.
void expect_within_bound(const std::vector<float>& got, const std::vector<float>& va,
                         const std::vector<float>& vb, const std::vector<float>& bias, int64_t M,
                         int64_t N, int64_t K) {
  ASSERT_EQ(got.size(), static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias.empty() ? 0.0 : bias[n], mag = bias.empty() ? 0.0 : std::fabs(bias[n]);
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(va[m * K + k]) * vb[n * K + k];
        s += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(got[m * N + n], s, (K + 4) * std::ldexp(mag, -24) + 1e-30)
          << "m " << m << " n " << n << " K " << K;
    }
}

std::vector<float> transpose(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}

struct Case {
  int64_t M, N, K;
};
// K short of, at and past a block and the kernel's 256-element K slices; M and N cut its
// 512 x 256 tasks, its 128-row chunks of A and its register tiles (8 x 32, 6 x 16, 4 x 8).
const Case kCases[] = {{1, 1, 1},      {3, 5, 16},    {67, 37, 100},
                       {130, 300, 45}, {5, 260, 257}, {520, 40, 300}};
const FormatId kFormats[] = {FormatId::kMxfp8E4m3, FormatId::kMxfp8E5m2, FormatId::kMxfp4,
                             FormatId::kNvfp4};

TEST(BlockFormatGemm, ForwardEqualsFloat64ProductOfDequantizedOperands) {
  for (FormatId f : kFormats)
    for (const Case& c : kCases) {
      SCOPED_TRACE(formats::format_name(f));
      const auto x = values(c.M, c.K, 1), w = values(c.N, c.K, 2), bias = values(1, c.N, 3);
      const BlockQuantized qx = quantize(f, x, c.M, c.K), qw = quantize(f, w, c.N, c.K);
      gemm::Epilogue e;
      e.bias = from_buffer(bias.data(), kFloat32, {c.N});
      const Tensor y = gemm::gemm(operand(qx), operand(qw).t(), e);
      ASSERT_EQ(y.shape(), (Shape{c.M, c.N}));
      ASSERT_EQ(y.dtype(), kFloat32);
      expect_within_bound(y.to_vector<float>(), formats::dequantize(qx), formats::dequantize(qw),
                          bias, c.M, c.N, c.K);
    }
}

TEST(BlockFormatGemm, MixedElementFormatsMultiply) {
  // MXFP8's hybrid recipe: E5M2 gradients times E4M3 weights.
  const int64_t M = 9, N = 70, K = 96;
  const auto g = values(M, K, 4), w = values(N, K, 5);
  const BlockQuantized qg = quantize(FormatId::kMxfp8E5m2, g, M, K),
                       qw = quantize(FormatId::kMxfp8E4m3, w, N, K);
  const Tensor y = gemm::gemm(operand(qg), operand(qw).t());
  expect_within_bound(y.to_vector<float>(), formats::dequantize(qg), formats::dequantize(qw), {}, M,
                      N, K);
}

TEST(BlockFormatGemm, Nvfp416x16TilesAreReadEitherWay) {
  // dx = dy @ W with W [N, K] in 16x16 tiles, read as stored (its tiles span K = N here).
  const int64_t M = 21, N = 40, K = 35;
  const auto dy = values(M, N, 6), w = values(N, K, 7);
  const BlockQuantized qdy = quantize(FormatId::kNvfp4, dy, M, N),
                       qw = quantize(FormatId::kNvfp4, w, N, K, /*tiles=*/true);
  const Tensor dx = gemm::gemm(operand(qdy), operand(qw, true));
  expect_within_bound(dx.to_vector<float>(), formats::dequantize(qdy),
                      transpose(formats::dequantize(qw), N, K), {}, M, K, N);
  // And the forward through the same tiles.
  const auto x = values(M, K, 8);
  const BlockQuantized qx = quantize(FormatId::kNvfp4, x, M, K);
  const Tensor y = gemm::gemm(operand(qx), operand(qw, true).t());
  expect_within_bound(y.to_vector<float>(), formats::dequantize(qx), formats::dequantize(qw), {}, M,
                      N, K);
}

TEST(BlockFormatGemm, EverySimdLevelGivesTheSameBits) {
  namespace km = kernels::mx;
  std::vector<SimdLevel> levels = {SimdLevel::kScalar};
  if (simd_level() >= SimdLevel::kAvx2) levels.push_back(SimdLevel::kAvx2);
  if (simd_level() >= SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  const int64_t M = 70, N = 290, K = 200;
  for (FormatId f : kFormats) {
    SCOPED_TRACE(formats::format_name(f));
    const auto x = values(M, K, 9), w = values(N, K, 10);
    const BlockQuantized qx = quantize(f, x, M, K), qw = quantize(f, w, N, K);
    const auto el = f == FormatId::kMxfp8E4m3
                        ? km::Element::kE4m3
                        : (f == FormatId::kMxfp8E5m2 ? km::Element::kE5m2 : km::Element::kE2m1);
    const bool nv = f == FormatId::kNvfp4;
    const km::MxOperandView va{qx.codes.data(), qx.scales.data(), el, nv, M, K, false};
    const km::MxOperandView vb{qw.codes.data(), qw.scales.data(), el, nv, N, K, false};
    std::vector<std::vector<uint32_t>> outs;
    for (SimdLevel level : levels) {
      std::vector<float> out(static_cast<size_t>(M * N));
      km::mx_gemm(va, vb, M, N, K, qx.tensor_scale * qw.tensor_scale, nullptr, out.data(), level);
      std::vector<uint32_t> b(out.size());
      std::memcpy(b.data(), out.data(), out.size() * sizeof(float));
      outs.push_back(b);
    }
    for (size_t i = 1; i < outs.size(); ++i)
      EXPECT_EQ(outs[i], outs[0]) << simd_level_name(levels[i]) << " vs scalar";
  }
}

// Where several tasks of rows share B's columns, B's panels are decoded once for all of them;
// each row's result is the bits of the product of that row alone with B (a product of one task,
// which decodes B itself), at every level, for each format and N not a whole panel.
TEST(BlockFormatGemm, TasksSharingBsDecodedPanelsGiveTheBitsOfEachRow) {
  namespace km = kernels::mx;
  const int64_t M = 1100, N = 300, K = 600;
  for (FormatId f : kFormats) {
    SCOPED_TRACE(formats::format_name(f));
    const auto x = values(M, K, 13), w = values(N, K, 14);
    const BlockQuantized qx = quantize(f, x, M, K), qw = quantize(f, w, N, K);
    const auto el = f == FormatId::kMxfp8E4m3
                        ? km::Element::kE4m3
                        : (f == FormatId::kMxfp8E5m2 ? km::Element::kE5m2 : km::Element::kE2m1);
    const bool nv = f == FormatId::kNvfp4;
    const km::MxOperandView va{qx.codes.data(), qx.scales.data(), el, nv, M, K, false};
    const km::MxOperandView vb{qw.codes.data(), qw.scales.data(), el, nv, N, K, false};
    const float alpha = qx.tensor_scale * qw.tensor_scale;
    for (SimdLevel level : {SimdLevel::kScalar, simd_level()}) {
      std::vector<float> all(static_cast<size_t>(M * N));
      km::mx_gemm(va, vb, M, N, K, alpha, nullptr, all.data(), level);
      for (const int64_t m : {int64_t{0}, int64_t{511}, int64_t{512}, int64_t{700}, M - 1}) {
        km::MxOperandView row = va;
        const int64_t row_bytes = qx.codes.size() / static_cast<size_t>(M);
        const int64_t row_scales = qx.scales.size() / static_cast<size_t>(M);
        row.codes += m * row_bytes;
        row.scales += m * row_scales;
        row.rows = 1;
        std::vector<float> one(static_cast<size_t>(N));
        km::mx_gemm(row, vb, 1, N, K, alpha, nullptr, one.data(), level);
        EXPECT_EQ(0, std::memcmp(one.data(), all.data() + m * N, N * sizeof(float)))
            << "row " << m << " at " << simd_level_name(level);
      }
    }
  }
}

// The kernel's bfloat16 result (each task's sums rounded as the task ends) is the float32
// result rounded by convert_f32_to_bf16, bit for bit: tasks of rows sharing B, tasks of
// columns (on two threads or more), a bias holding inf and NaN, K = 0, every level.
TEST(BlockFormatGemm, Bf16ResultIsTheRoundedFp32Result) {
  namespace km = kernels::mx;
  const Case cases[] = {{1100, 300, 600}, {40, 600, 300}, {7, 9, 0}, {3, 5, 16}};
  for (FormatId f : {FormatId::kMxfp8E4m3, FormatId::kMxfp4, FormatId::kNvfp4}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(formats::format_name(f)) + " " + std::to_string(c.M) + "x" +
                   std::to_string(c.N) + "x" + std::to_string(c.K));
      const int64_t K = std::max<int64_t>(c.K, 1);  // the operands' columns (K = 0 multiplies none)
      const auto x = values(c.M, K, 15), w = values(c.N, K, 16);
      std::vector<float> bias = values(1, c.N, 17);
      bias[0] = std::numeric_limits<float>::infinity();
      if (c.N > 2) bias[2] = std::numeric_limits<float>::quiet_NaN();
      const BlockQuantized qx = quantize(f, x, c.M, K), qw = quantize(f, w, c.N, K);
      const auto el = f == FormatId::kMxfp8E4m3
                          ? km::Element::kE4m3
                          : (f == FormatId::kMxfp8E5m2 ? km::Element::kE5m2 : km::Element::kE2m1);
      const bool nv = f == FormatId::kNvfp4;
      const km::MxOperandView va{qx.codes.data(), qx.scales.data(), el, nv, c.M, K, false};
      const km::MxOperandView vb{qw.codes.data(), qw.scales.data(), el, nv, c.N, K, false};
      const float alpha = qx.tensor_scale * qw.tensor_scale;
      for (SimdLevel level : {SimdLevel::kScalar, simd_level()}) {
        std::vector<float> f32(static_cast<size_t>(c.M * c.N));
        km::mx_gemm(va, vb, c.M, c.N, c.K, alpha, bias.data(), f32.data(), level);
        std::vector<uint16_t> want(f32.size()), got(f32.size(), 0xABCD);
        convert_f32_to_bf16(f32.data(), want.data(), static_cast<int64_t>(f32.size()));
        km::mx_gemm(va, vb, c.M, c.N, c.K, alpha, bias.data(), got.data(), level);
        EXPECT_EQ(got, want) << simd_level_name(level);
      }
    }
  }
}

TEST(BlockFormatGemm, OutDtypeRoundsTheFp32ResultOnce) {
  const int64_t M = 4, N = 33, K = 64;
  const auto x = values(M, K, 11), w = values(N, K, 12);
  const BlockQuantized qx = quantize(FormatId::kMxfp4, x, M, K),
                       qw = quantize(FormatId::kMxfp4, w, N, K);
  gemm::Epilogue e;
  e.out_dtype = kBFloat16;
  const Tensor y16 = gemm::gemm(operand(qx), operand(qw).t(), e);
  const Tensor y32 = gemm::gemm(operand(qx), operand(qw).t());
  ASSERT_EQ(y16.dtype(), kBFloat16);
  EXPECT_EQ(y16.to(kFloat32).to_vector<float>(), y32.to(kBFloat16).to(kFloat32).to_vector<float>());
}

TEST(BlockFormatGemm, WrongOrientationShapeAndBuffersAreRefused) {
  const auto x = values(8, 64, 13), w = values(16, 64, 14);
  const BlockQuantized qx = quantize(FormatId::kMxfp8E4m3, x, 8, 64),
                       qw = quantize(FormatId::kMxfp8E4m3, w, 16, 64);
  // B read as stored ([K, N] with its 1x32 blocks along N), A read transposed.
  const BlockQuantized kn = quantize(FormatId::kMxfp8E4m3, values(64, 16, 17), 64, 16);
  expect_error([&] { gemm::gemm(operand(qx), operand(kn)); },
               {"must lie along the product's K", "1x32", "@ mxfp8-e4m3 [64, 16]",
                "quantize the transposed tensor"});
  const BlockQuantized km = quantize(FormatId::kMxfp8E4m3, values(64, 8, 18), 64, 8);
  expect_error([&] { gemm::gemm(operand(km).t(), operand(qw).t()); },
               {"must lie along the product's K", "mxfp8-e4m3 [64, 8]^T"});
  const BlockQuantized qw2 = quantize(FormatId::kMxfp8E4m3, values(16, 48, 15), 16, 48);
  expect_error([&] { gemm::gemm(operand(qx), operand(qw2).t()); }, "inner dimensions differ");
  expect_error(
      [&] {
        gemm::block_scaled(FormatId::kMxfp4, bytes(qx.codes), bytes(qx.scales), {8, 64});
      },
      {"mxfp4 [8, 64] needs 256 contiguous uint8 code bytes", "got uint8 [512]"});
  expect_error(
      [&] {
        gemm::block_scaled(FormatId::kMxfp8E4m3, bytes(qx.codes), bytes(qw.scales), {8, 64});
      },
      "needs 16 contiguous uint8 scale bytes (one per 1x32 block)");
  expect_error(
      [&] {
        gemm::block_scaled(FormatId::kE4m3, bytes(qx.codes), bytes(qx.scales), {8, 64});
      },
      "block_scaled takes mxfp8-e4m3, mxfp8-e5m2, mxfp4 or nvfp4, got e4m3");
  expect_error([&] { operand(qx, true); }, "16x16 tiles are an nvfp4 layout");
  const BlockQuantized n1 = quantize(FormatId::kNvfp4, values(20, 32, 16), 20, 32);
  expect_error([&] { operand(n1, true); }, "has row 1 with scales other than row 0's");
  // A block-format operand and an FP8 one have no product.
  const Tensor codes = zeros({64, 16}, kFloat8_e4m3fn);
  expect_error([&] { gemm::gemm(operand(qx), gemm::fp8(codes, 1.0f)); }, "no product of");
}

}  // namespace
}  // namespace mantissa
