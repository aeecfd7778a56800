// The 4-bit product for few rows (kernels/cpu/quant/four_bit_gemv.h): against the float64
// product over the dequantized weight within the bound of its fp32 sums, every SIMD level
// against the scalar one bit for bit, on shapes whose rows and blocks end anywhere inside
// sixteen elements (odd in_features too, where rows start in the middle of a byte), for NF4,
// FP4 and double-quantized absmax; and the 4-bit Linear taking it for up to
// kFourBitGemvMaxRows rows.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/quant/four_bit_amx.h"
#include "kernels/cpu/quant/four_bit_gemv.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/half.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/quant/quantize.h"
#include "support/simd_levels.h"
#include "support/sixteen_lane_bound.h"

namespace mantissa::kernels::quant {
namespace {

using mantissa::testing::expect_within_sixteen_lane_bound;
using mantissa::testing::simd_levels_here;

struct Weight {
  mantissa::QuantizedTensor q;
  Tensor absmax;  // resolved (double quantization decoded)
  FourBitMatrix m;
};

Weight make_weight(int64_t n, int64_t k, FormatId format, int64_t blocksize, bool double_quant,
                   Generator& gen) {
  Weight w;
  w.q = mantissa::quant::quantize_4bit(randn({n, k}, kFloat32, &gen),
                                       {format, blocksize, double_quant});
  w.absmax = mantissa::quant::block_absmax(w.q);
  w.m.packed = w.q.data.data<uint8_t>();
  w.m.absmax = w.absmax.data<float>();
  w.m.rows = n;
  w.m.cols = k;
  w.m.blocksize = blocksize;
  w.m.format = format;
  return w;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

// (N, K, blocksize): whole-block rows (four rows of W at a time, and the rows past the last
// four); blocks across rows; K below 16; odd K (rows starting at a low nibble); one element.
using Shape3 = std::tuple<int64_t, int64_t, int64_t>;
const Shape3 kShapes[] = {{11, 128, 64}, {6, 96, 32},  {5, 100, 64}, {7, 37, 32},
                          {3, 5, 32},    {9, 131, 64}, {4, 70, 128}, {1, 1, 64}};

class FourBitGemv : public ::testing::TestWithParam<std::tuple<FormatId, bool, DType>> {};

TEST_P(FourBitGemv, WithinFp32BoundOfFloat64AndEveryLevelSameBits) {
  const auto [format, double_quant, w_round] = GetParam();
  Generator gen(5);
  for (const auto& [n, k, bs] : kShapes) {
    const Weight w = make_weight(n, k, format, bs, double_quant, gen);
    // The values every level multiplies by: dequantize's, widened exactly to float64.
    const Tensor v = mantissa::quant::dequantize(w.q, w_round, w.absmax).to(kFloat64);
    const double* vd = v.data<double>();
    const Tensor bias = randn({n}, kFloat32, &gen);
    for (int64_t m = 1; m <= 5; ++m) {
      SCOPED_TRACE(::testing::Message()
                   << "N " << n << " K " << k << " block " << bs << " M " << m);
      const Tensor x = randn({m, k}, kFloat32, &gen);
      const float* xd = x.data<float>();
      std::vector<float> want;
      for (SimdLevel level : simd_levels_here()) {
        std::vector<float> y(static_cast<size_t>(m * n), 7.0f);
        four_bit_gemv(w.m, xd, m, w_round, bias.data<float>(), y.data(), kFloat32, level);
        if (level == SimdLevel::kScalar) {
          want = y;
          expect_within_sixteen_lane_bound(
              y.data(), xd, k, [&](int64_t j, int64_t c) { return vd[j * k + c]; },
              bias.data<float>(), m, n, k);
        } else {
          EXPECT_EQ(bits(y), bits(want)) << "level " << simd_level_name(level);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, FourBitGemv,
                         ::testing::Combine(::testing::Values(FormatId::kNf4, FormatId::kFp4),
                                            ::testing::Bool(),
                                            ::testing::Values(kFloat32, kBFloat16, kFloat16)));

// A bf16 or f16 output is the float32 output rounded once; no bias leaves the sum alone.
TEST(FourBitGemvOutput, NarrowOutputIsFloat32OutputRoundedOnce) {
  Generator gen(8);
  const Weight w = make_weight(13, 192, FormatId::kNf4, 64, true, gen);
  const Tensor x = randn({3, 192}, kFloat32, &gen);
  for (SimdLevel level : simd_levels_here()) {
    std::vector<float> y32(3 * 13);
    std::vector<uint16_t> yb(3 * 13), yh(3 * 13);
    four_bit_gemv(w.m, x.data<float>(), 3, kBFloat16, nullptr, y32.data(), kFloat32, level);
    four_bit_gemv(w.m, x.data<float>(), 3, kBFloat16, nullptr, yb.data(), kBFloat16, level);
    four_bit_gemv(w.m, x.data<float>(), 3, kBFloat16, nullptr, yh.data(), kFloat16, level);
    for (size_t i = 0; i < y32.size(); ++i) {
      EXPECT_EQ(yb[i], float_to_bf16_bits(y32[i])) << i;
      EXPECT_EQ(yh[i], float_to_half_bits(y32[i])) << i;
    }
  }
}

// A NaN absmax (a NaN in the quantized weight's block) reaches only the outputs of its row.
TEST(FourBitGemvOutput, NanBlockReachesOnlyItsRow) {
  Generator gen(9);
  Weight w = make_weight(8, 128, FormatId::kNf4, 64, false, gen);
  w.absmax.data<float>()[2 * 2 + 1] = std::nanf("");  // row 2, second block
  const Tensor x = randn({2, 128}, kFloat32, &gen);
  for (SimdLevel level : simd_levels_here()) {
    std::vector<float> y(2 * 8);
    four_bit_gemv(w.m, x.data<float>(), 2, kBFloat16, nullptr, y.data(), kFloat32, level);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(std::isnan(y[i * 8 + j]), j == 2) << i << " " << j;
  }
}

// The 4-bit Linear's forward of 1 to kFourBitGemvMaxRows rows is this kernel's product (same
// bits), in each compute dtype; with more rows it is another engine's, within bf16 rounding.
TEST(FourBitGemvDispatch, LinearForwardOfFewRowsTakesIt) {
  if (amx_bf16_usable()) GTEST_SKIP() << "bf16 forwards take the AMX kernels on this CPU";
  Generator gen(10);
  const Weight w = make_weight(40, 192, FormatId::kNf4, 64, true, gen);
  for (DType cd : {kBFloat16, kFloat32, kFloat16}) {
    const Tensor bias = randn({40}, kFloat32, &gen).to(cd);
    for (int64_t m : {int64_t{1}, int64_t{3}, kFourBitGemvMaxRows}) {
      SCOPED_TRACE(::testing::Message() << cd.name() << " rows " << m);
      const Tensor x = randn({m, 192}, kFloat32, &gen).to(cd);
      const Tensor y = mantissa::quant::linear_4bit(x, w.q, bias);
      Tensor want = empty({m, 40}, cd);
      four_bit_gemv(w.m, x.to(kFloat32).data<float>(), m, cd, bias.to(kFloat32).data<float>(),
                    want.data_ptr(), cd);
      ASSERT_EQ(y.dtype(), cd);
      EXPECT_EQ(std::memcmp(y.data_ptr(), want.data_ptr(),
                            static_cast<size_t>(y.numel() * y.dtype().itemsize())),
                0);
      // Against MANTISSA_GEMM=onednn (the dequantize-then-oneDNN path), which sums in another
      // order: one rounding of the output apart at most, plus fp32 sums.
      const GemmBackend before = gemm_backend();
      set_gemm_backend(GemmBackend::kOnednn);
      const Tensor other = mantissa::quant::linear_4bit(x, w.q, bias);
      set_gemm_backend(before);
      const double tol = cd == kFloat32 ? 1e-5 : cd == kBFloat16 ? 1.6e-2 : 2e-3;
      const Tensor a = y.to(kFloat64), b = other.to(kFloat64);
      for (int64_t i = 0; i < a.numel(); ++i)
        EXPECT_NEAR(a.data<double>()[i], b.data<double>()[i],
                    tol * (1 + std::fabs(b.data<double>()[i])))
            << i;
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::quant
