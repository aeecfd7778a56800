// The 4-bit products on AMX tiles (kernels/cpu/quant/four_bit_amx.h), forward and input
// gradient, against float64 products of the same bf16 values: every tail (rows of x, rows and
// columns of W not multiples of the tiles or of the 256-row panels), with and without bias, and
// a NaN reaching only its own output row. Skipped where the CPU has no AMX (or Linux does not
// grant the tile state).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "kernels/cpu/quant/four_bit_amx.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/generator.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/quant/quantize.h"

namespace mantissa::kernels::quant {
namespace {

class FourBitAmx : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, bool>> {};

// Entries of got (rows x cols bf16) farther from the float64 sum over k of a[i][k] * b(k, j)
// (+ bias[j]) than one bf16 rounding (half an ulp: 2^-9 relative) and fp32 sums allow; the first
// few are reported. b(k, j) is b[j * inner + k] for W in the forward (b_by_rows), else
// b[k * cols + j].
int64_t count_off_float64(const Tensor& a, const Tensor& b, bool b_by_rows, const uint16_t* bias,
                          const Tensor& got, const char* name) {
  const int64_t rows = got.size(0), cols = got.size(1), inner = a.size(1);
  const auto* av = static_cast<const uint16_t*>(a.data_ptr());
  const auto* bv = static_cast<const uint16_t*>(b.data_ptr());
  const auto* gv = static_cast<const uint16_t*>(got.data_ptr());
  int64_t off = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < inner; ++k) {
        const double p = double(bf16_bits_to_float(av[i * inner + k])) *
                         double(bf16_bits_to_float(bv[b_by_rows ? j * inner + k : k * cols + j]));
        sum += p;
        magnitude += std::fabs(p);
      }
      if (bias) sum += bf16_bits_to_float(bias[j]);
      const double value = bf16_bits_to_float(gv[i * cols + j]);
      const double tol = std::ldexp(std::fabs(sum), -8) + 1e-6 * magnitude + 1e-30;
      if (std::fabs(value - sum) > tol && ++off < 5)
        ADD_FAILURE() << name << "[" << i << "][" << j << "] = " << value << ", float64 " << sum;
    }
  return off;
}

TEST_P(FourBitAmx, ForwardEqualsFloat64ProductRoundedOnce) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "no AMX bf16 tiles on this CPU";
  const auto [m, in_f, out_f, with_bias] = GetParam();
  Generator gen(11);
  const Tensor weight = randn({out_f, in_f}, kFloat32, &gen);
  const mantissa::QuantizedTensor q =
      mantissa::quant::quantize_4bit(weight, {FormatId::kNf4, 64, true});
  const Tensor absmax = mantissa::quant::block_absmax(q);
  const Tensor w = mantissa::quant::dequantize(q, kBFloat16, absmax);
  const Tensor x = randn({m, in_f}, kFloat32, &gen).to(kBFloat16);
  const Tensor bias = randn({out_f}, kFloat32, &gen).to(kBFloat16);
  Tensor y = full({m, out_f}, 7.0, kBFloat16);

  FourBitMatrix fm;
  fm.packed = q.data.data<uint8_t>();
  fm.absmax = absmax.data<float>();
  fm.rows = out_f;
  fm.cols = in_f;
  fm.blocksize = q.blocksize;
  fm.format = FormatId::kNf4;
  four_bit_forward_amx(fm, static_cast<const uint16_t*>(x.data_ptr()), m,
                       with_bias ? static_cast<const uint16_t*>(bias.data_ptr()) : nullptr,
                       static_cast<uint16_t*>(y.data_ptr()));

  EXPECT_EQ(
      count_off_float64(
          x, w, true, with_bias ? static_cast<const uint16_t*>(bias.data_ptr()) : nullptr, y, "y"),
      0);
}

// dx = g @ W, the layer's input gradient, on the same shapes (the bias flag unused).
TEST_P(FourBitAmx, InputGradientEqualsFloat64ProductRoundedOnce) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "no AMX bf16 tiles on this CPU";
  const auto [m, in_f, out_f, unused] = GetParam();
  (void)unused;
  Generator gen(13);
  const mantissa::QuantizedTensor q = mantissa::quant::quantize_4bit(
      randn({out_f, in_f}, kFloat32, &gen), {FormatId::kFp4, 64, true});
  const Tensor absmax = mantissa::quant::block_absmax(q);
  const Tensor w = mantissa::quant::dequantize(q, kBFloat16, absmax);
  const Tensor g = randn({m, out_f}, kFloat32, &gen).to(kBFloat16);
  Tensor dx = full({m, in_f}, 7.0, kBFloat16);
  FourBitMatrix fm{q.data.data<uint8_t>(), absmax.data<float>(), out_f, in_f, q.blocksize,
                   FormatId::kFp4};
  four_bit_input_grad_amx(fm, static_cast<const uint16_t*>(g.data_ptr()), m,
                          static_cast<uint16_t*>(dx.data_ptr()));
  EXPECT_EQ(count_off_float64(g, w, false, nullptr, dx, "dx"), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FourBitAmx,
    ::testing::Values(std::make_tuple(1, 64, 16, true), std::make_tuple(17, 200, 70, true),
                      std::make_tuple(64, 784, 1024, true), std::make_tuple(65, 130, 33, false),
                      std::make_tuple(200, 96, 48, true), std::make_tuple(3, 31, 5, false),
                      std::make_tuple(32, 300, 600, false)));

// Blocks of other sizes than 64 (bitsandbytes allows 32 to 4096): each row's decode starts and
// ends inside blocks differently.
TEST(FourBitAmxBlocks, OtherBlockSizesMatchFloat64Products) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "no AMX bf16 tiles on this CPU";
  Generator gen(14);
  const int64_t m = 24, in_f = 300, out_f = 40;
  for (int64_t bs : {int64_t{32}, int64_t{256}, int64_t{4096}}) {
    const mantissa::QuantizedTensor q = mantissa::quant::quantize_4bit(
        randn({out_f, in_f}, kFloat32, &gen), {FormatId::kNf4, bs, false});
    const Tensor absmax = mantissa::quant::block_absmax(q);
    const Tensor w = mantissa::quant::dequantize(q, kBFloat16, absmax);
    const FourBitMatrix fm{q.data.data<uint8_t>(), absmax.data<float>(), out_f, in_f, bs,
                           FormatId::kNf4};
    const Tensor x = randn({m, in_f}, kFloat32, &gen).to(kBFloat16);
    Tensor y = empty({m, out_f}, kBFloat16);
    four_bit_forward_amx(fm, static_cast<const uint16_t*>(x.data_ptr()), m, nullptr,
                         static_cast<uint16_t*>(y.data_ptr()));
    EXPECT_EQ(count_off_float64(x, w, true, nullptr, y, "y"), 0) << "blocksize " << bs;
    const Tensor g = randn({m, out_f}, kFloat32, &gen).to(kBFloat16);
    Tensor dx = empty({m, in_f}, kBFloat16);
    four_bit_input_grad_amx(fm, static_cast<const uint16_t*>(g.data_ptr()), m,
                            static_cast<uint16_t*>(dx.data_ptr()));
    EXPECT_EQ(count_off_float64(g, w, false, nullptr, dx, "dx"), 0) << "blocksize " << bs;
  }
}

TEST(FourBitAmxNaN, NanInOneRowStaysInItsOutputRow) {
  if (!amx_bf16_usable()) GTEST_SKIP() << "no AMX bf16 tiles on this CPU";
  Generator gen(12);
  const int64_t m = 20, in_f = 96, out_f = 40;
  const mantissa::QuantizedTensor q = mantissa::quant::quantize_4bit(
      randn({out_f, in_f}, kFloat32, &gen), {FormatId::kNf4, 64, false});
  const Tensor absmax = mantissa::quant::block_absmax(q);
  Tensor x = randn({m, in_f}, kFloat32, &gen).to(kBFloat16);
  static_cast<uint16_t*>(x.data_ptr())[5 * in_f + 70] = 0x7fc0;  // NaN at row 5
  Tensor y = empty({m, out_f}, kBFloat16);
  FourBitMatrix fm{q.data.data<uint8_t>(), absmax.data<float>(), out_f, in_f, q.blocksize,
                   FormatId::kNf4};
  four_bit_forward_amx(fm, static_cast<const uint16_t*>(x.data_ptr()), m, nullptr,
                       static_cast<uint16_t*>(y.data_ptr()));
  const auto* yv = static_cast<const uint16_t*>(y.data_ptr());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < out_f; ++j)
      EXPECT_EQ(std::isnan(bf16_bits_to_float(yv[i * out_f + j])), i == 5) << i << ", " << j;

  // The input gradient: a NaN in row 9 of g reaches row 9 of dx only.
  Tensor g = randn({m, out_f}, kFloat32, &gen).to(kBFloat16);
  static_cast<uint16_t*>(g.data_ptr())[9 * out_f + 33] = 0x7fc0;
  Tensor dx = empty({m, in_f}, kBFloat16);
  four_bit_input_grad_amx(fm, static_cast<const uint16_t*>(g.data_ptr()), m,
                          static_cast<uint16_t*>(dx.data_ptr()));
  const auto* dv = static_cast<const uint16_t*>(dx.data_ptr());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < in_f; ++j)
      EXPECT_EQ(std::isnan(bf16_bits_to_float(dv[i * in_f + j])), i == 9) << i << ", " << j;
}

}  // namespace
}  // namespace mantissa::kernels::quant
