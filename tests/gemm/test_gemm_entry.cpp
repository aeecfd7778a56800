// The GEMM entry point (mantissa/gemm/gemm.h): each operand kind and epilogue option against an
// independent reference, the process-wide float32 setting, and the errors that name operands.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/formats/format_table.h"
#include "mantissa/gemm/gemm.h"
#include "mantissa/mantissa.h"
#include "mantissa/ops/matmul_precision.h"
#include "mantissa/quant/int8.h"
#include "mantissa/quant/quantize.h"

namespace mantissa {
namespace {

std::vector<uint32_t> bits_of(const Tensor& t) {
  const std::vector<float> v = t.to(kFloat32).to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

// The float64 product of two float32 matrices, rounded once to float32: what an fp32 GEMM
// approaches within its accumulation bound.
std::vector<double> reference(const Tensor& a, const Tensor& b) {
  const std::vector<float> av = a.contiguous().to_vector<float>(),
                           bv = b.contiguous().to_vector<float>();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += static_cast<double>(av[i * k + p]) * bv[p * n + j];
      c[i * n + j] = s;
    }
  return c;
}

TEST(GemmEntry, DenseFloat32EqualsFloat64ReferenceWithinAccumulationBound) {
  Generator gen(3);
  const Tensor a = randn({37, 129}, kFloat32, &gen), b = randn({129, 53}, kFloat32, &gen);
  const Tensor y = gemm::gemm(gemm::dense(a), gemm::dense(b));
  const std::vector<double> want = reference(a, b);
  const std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 129 * std::ldexp(1.0, -23) * 40) << i;
}

TEST(GemmEntry, TransposedOperandReadsTheTransposeAndBiasIsAdded) {
  Generator gen(4);
  const Tensor a = randn({9, 16}, kFloat32, &gen), w = randn({11, 16}, kFloat32, &gen);
  const Tensor bias = randn({11}, kFloat32, &gen);
  gemm::Epilogue e;
  e.bias = bias;
  const Tensor y = gemm::gemm(gemm::dense(a), gemm::dense(w).t(), e);
  const std::vector<double> want = reference(a, w.t().contiguous());
  const std::vector<float> g = y.to_vector<float>(), bv = bias.to_vector<float>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i] + bv[i % 11], 1e-4) << i;
}

TEST(GemmEntry, Bf16OperandsGiveTheFp32AccumulatorOrTheRoundedProductWidened) {
  Generator gen(5);
  const Tensor a = randn({24, 40}, kFloat32, &gen).to(kBFloat16);
  const Tensor b = randn({40, 20}, kFloat32, &gen).to(kBFloat16);
  // Products of two bf16 values are exact in fp32: the accumulator is the fp32 product of the
  // widened operands.
  gemm::Epilogue acc;
  acc.out_dtype = kFloat32;
  const Tensor got_acc = gemm::gemm(gemm::dense(a), gemm::dense(b), acc);
  EXPECT_EQ(got_acc.dtype(), kFloat32);
  const std::vector<double> want = reference(a.to(kFloat32), b.to(kFloat32));
  const std::vector<float> g = got_acc.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], 40 * 1e-6 * 8) << i;
  // round_to: the bf16 product's bits, stored as float32.
  gemm::Epilogue widened;
  widened.round_to = kBFloat16;
  const Tensor got_w = gemm::gemm(gemm::dense(a), gemm::dense(b), widened);
  EXPECT_EQ(got_w.dtype(), kFloat32);
  EXPECT_EQ(bits_of(got_w), bits_of(gemm::gemm(gemm::dense(a), gemm::dense(b))));
}

TEST(GemmEntry, Float32SettingIsTheDefaultAndAnExplicitOneWins) {
  Generator gen(6);
  const Tensor a = randn({16, 64}, kFloat32, &gen), b = randn({64, 16}, kFloat32, &gen);
  const Tensor exact = gemm::gemm(gemm::dense(a), gemm::dense(b));
  Float32MatmulPrecisionGuard medium(Float32MatmulPrecision::kMedium);
  EXPECT_EQ(gemm::default_float32_products(), gemm::Float32Products::kBf16);
  // "medium": both operands rounded to bf16, products exact, fp32 accumulation.
  const Tensor y = gemm::gemm(gemm::dense(a), gemm::dense(b));
  const std::vector<double> want =
      reference(a.to(kBFloat16).to(kFloat32), b.to(kBFloat16).to(kFloat32));
  const std::vector<float> g = y.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], 64 * 1e-6 * 8) << i;
  gemm::Epilogue e;
  e.float32 = gemm::Float32Products::kExact;
  EXPECT_EQ(bits_of(gemm::gemm(gemm::dense(a), gemm::dense(b), e)), bits_of(exact));
}

TEST(GemmEntry, Int8RowwiseProductIsTheScaledIntegerSum) {
  Generator gen(7);
  const Tensor x = randn({5, 32}, kFloat32, &gen), w = randn({7, 32}, kFloat32, &gen);
  const quant::Int8Rows qx = quant::quantize_int8_rows(x, 0.0f);
  const quant::Int8Rows qw = quant::quantize_int8_rows(w, 0.0f);
  const Tensor bias = randn({7}, kFloat32, &gen);
  gemm::Epilogue e;
  e.bias = bias;
  const Tensor y =
      gemm::gemm(gemm::int8_rows(qx.codes, qx.absmax), gemm::int8_rows(qw.codes, qw.absmax).t(), e);
  const std::vector<int8_t> xc = qx.codes.to_vector<int8_t>(), wc = qw.codes.to_vector<int8_t>();
  const std::vector<float> sx = qx.absmax.to_vector<float>(), sw = qw.absmax.to_vector<float>();
  const std::vector<float> bv = bias.to_vector<float>(), got = y.to_vector<float>();
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 7; ++j) {
      int64_t acc = 0;
      for (int64_t p = 0; p < 32; ++p) acc += int64_t{xc[i * 32 + p]} * wc[j * 32 + p];
      const double want = static_cast<double>(acc) * sx[i] * sw[j] / (127.0 * 127.0) + bv[j];
      EXPECT_NEAR(got[i * 7 + j], want, 1e-5 * (std::abs(want) + 1)) << i << "," << j;
    }
}

TEST(GemmEntry, FourBitForwardEqualsTheDequantizedProduct) {
  Generator gen(8);
  const Tensor w = randn({48, 64}, kFloat32, &gen);
  const QuantizedTensor q = quant::quantize_4bit(w, {FormatId::kNf4, 64, false});
  const Tensor absmax = quant::block_absmax(q);
  const Tensor x = randn({6, 64}, kFloat32, &gen);
  const gemm::Operand w4 = gemm::four_bit(q.format, q.data, q.shape, q.blocksize, absmax);
  const Tensor y = gemm::gemm(gemm::dense(x), w4.t());
  const Tensor wd = quant::dequantize(q, kFloat32);
  const std::vector<double> want = reference(x, wd.t().contiguous());
  const std::vector<float> g = y.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], 1e-4) << i;
  // The input gradient reads W untransposed: g (6, 48) @ W (48, 64).
  const Tensor gr = randn({6, 48}, kFloat32, &gen);
  const std::vector<double> want_dx = reference(gr, wd);
  const std::vector<float> dx = gemm::gemm(gemm::dense(gr), w4).to_vector<float>();
  for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], want_dx[i], 1e-4) << i;
}

TEST(GemmEntry, MismatchedOperandsAreRefusedByName) {
  Generator gen(9);
  const Tensor a = randn({4, 8}, kFloat32, &gen), b = randn({9, 3}, kFloat32, &gen);
  try {
    (void)gemm::gemm(gemm::dense(a), gemm::dense(b));
    FAIL() << "inner dimensions 8 and 9 were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inner dimensions"), std::string::npos) << e.what();
  }
  const Tensor codes = empty({4, 8}, kFloat8_e4m3fn);
  const quant::Int8Rows qa = quant::quantize_int8_rows(a, 0.0f);
  try {
    (void)gemm::gemm(gemm::fp8(codes, 1.0f), gemm::int8_rows(qa.codes, qa.absmax).t());
    FAIL() << "an FP8 x int8 product was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("e4m3"), std::string::npos) << m;
    EXPECT_NE(m.find("int8-rowwise"), std::string::npos) << m;
  }
}

TEST(GemmEntry, FourBitRowsWithByteScalesAreNotTakenForAbsmaxOnes) {
  // MXFP4 and NVFP4 have 4-bit elements too, but E8M0/E4M3 block scales: neither the 4-bit
  // layers nor the 4-bit engine take them.
  Generator gen(10);
  const Tensor w = randn({8, 64}, kFloat32, &gen);
  for (FormatId f : {FormatId::kMxfp4, FormatId::kNvfp4}) {
    try {
      (void)quant::quantize_4bit(w, {f, 64, false});
      FAIL() << "quantize_4bit took " << formats::format_name(f);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(formats::format_name(f)), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)gemm::four_bit(f, empty({256}, kUInt8), {8, 64}, 64, empty({8}, kFloat32)),
                 Error);
  }
}

}  // namespace
}  // namespace mantissa
