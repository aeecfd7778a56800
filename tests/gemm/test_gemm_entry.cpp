// The GEMM entry point (mantissa/gemm/gemm.h): each operand kind and epilogue option against an
// independent reference, the process-wide float32 setting, and the errors that name operands.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
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

// Random FP8 codes of `dtype` (finite ones), rows x cols.
Tensor random_codes(int64_t rows, int64_t cols, DType dtype, uint32_t seed) {
  Tensor t = empty({rows, cols}, dtype);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < rows * cols; ++i) {
    x = x * 1664525u + 1013904223u;
    uint8_t c = static_cast<uint8_t>(x >> 24);
    const bool nan = dtype == kFloat8_e4m3fn ? (c & 0x7f) == 0x7f : (c & 0x7f) >= 0x7c;
    p[i] = nan ? static_cast<uint8_t>(c & 0x3f) : c;
  }
  return t;
}

// x * s, a NaN x kept (quieted) whatever s is.
float mul_keeping_nan(float x, float s) {
  return std::isnan(x) ? std::bit_cast<float>(std::bit_cast<uint32_t>(x) | 0x00400000u) : x * s;
}

// Epilogue row and column scales (FP8 operands, fp8/rowwise.h's products): on every CPU engine
// (the AVX2 GEMM's register epilogue at SIMD level avx2 -- the ctest run
// portable.avx2_level_on_avx512_cpu -- and the widened product's pass elsewhere) the result is
// the engine's own fp32 product with the operands' scales, times row_scale[m], times
// col_scale[n], plus the bias, each step rounded in fp32, rounded once to the output dtype: bit
// for bit, with edge tiles, several K blocks, transposed operands, one-sided scales, scales of
// 0, inf, NaN and subnormal size, and a NaN row (its own NaN kept through a NaN scale).
TEST(Fp8GemmEpilogue, RowAndColumnScalesEqualTheScaledFp32ProductBitForBit) {
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 17, 9}, {13, 33, 65}, {37, 29, 300}, {70, 300, 257}};
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int sides = 1; sides <= 3; ++sides) {
          SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " ta=" << ta
                                            << " tb=" << tb << " sides=" << sides);
          const Tensor ac = random_codes(ta ? k : m, ta ? m : k, kFloat8_e4m3fn, seed++);
          // Row 3 holds a negative NaN code: its sums are NaN, and its row scale is +NaN.
          if (m > 3) static_cast<uint8_t*>(ac.data_ptr())[ta ? (k - 1) * m + 3 : 3 * k] = 0xff;
          const Tensor bc = random_codes(tb ? n : k, tb ? k : n, kFloat8_e5m2, seed++);
          gemm::Operand a = gemm::fp8(ac, 0.75f), b = gemm::fp8(bc, 1.0f / 1024.0f);
          if (ta) a = a.t();
          if (tb) b = b.t();
          Generator gen(seed++);
          std::vector<float> rs = randn({m}, kFloat32, &gen).to_vector<float>();
          std::vector<float> cs = randn({n}, kFloat32, &gen).to_vector<float>();
          for (float& v : rs) v = std::ldexp(v, -3);
          for (float& v : cs) v = std::ldexp(v, 20);
          rs[0] = m > 1 ? 0.0f : rs[0];
          if (m > 3) rs[3] = std::numeric_limits<float>::quiet_NaN();
          if (m > 5) rs[5] = 1e-40f;  // subnormal
          if (n > 2) cs[2] = std::numeric_limits<float>::infinity();
          const Tensor bias = randn({n}, kFloat32, &gen).to(kBFloat16);
          gemm::Epilogue plain;
          plain.out_dtype = kFloat32;
          const std::vector<float> acc = gemm::gemm(a, b, plain).to_vector<float>();
          for (bool with_bias : {false, true})
            for (DType out : {kFloat32, kBFloat16, kFloat16}) {
              std::vector<float> want(acc.size());
              const std::vector<float> bv = bias.to(kFloat32).to_vector<float>();
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) {
                  float v = acc[static_cast<size_t>(i * n + j)];
                  if (sides & 1) v = mul_keeping_nan(v, rs[static_cast<size_t>(i)]);
                  if (sides & 2) v = mul_keeping_nan(v, cs[static_cast<size_t>(j)]);
                  if (with_bias) v = v + bv[static_cast<size_t>(j)];
                  want[static_cast<size_t>(i * n + j)] = v;
                }
              gemm::Epilogue e;
              e.out_dtype = out;
              if (with_bias) e.bias = bias;
              if (sides & 1) e.row_scale = tensor(rs, {m});
              if (sides & 2) e.col_scale = tensor(cs, {n});
              const Tensor got = gemm::gemm(a, b, e);
              ASSERT_EQ(got.dtype(), out);
              ASSERT_EQ(bits_of(got), bits_of(tensor(want, {m, n}).to(out)))
                  << out.name() << (with_bias ? " with bias" : "");
            }
        }
  }
}

TEST(Fp8GemmEpilogue, RowAndColumnScalesOfTheWrongSizeOrOperandsAreRefused) {
  const Tensor a = random_codes(4, 8, kFloat8_e4m3fn, 1), b = random_codes(3, 8, kFloat8_e4m3fn, 2);
  gemm::Epilogue e;
  e.row_scale = empty({3}, kFloat32);
  try {
    (void)gemm::gemm(gemm::fp8(a, 1.0f), gemm::fp8(b, 1.0f).t(), e);
    FAIL() << "3 row scales for 4 rows were accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("row scales"), std::string::npos) << err.what();
  }
  e.row_scale = Tensor();
  e.col_scale = empty({3}, kFloat32);
  Generator gen(1);
  try {
    (void)gemm::gemm(gemm::dense(randn({4, 8}, kFloat32, &gen)),
                     gemm::dense(randn({3, 8}, kFloat32, &gen)).t(), e);
    FAIL() << "column scales on a dense product were accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("two FP8 operands"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace mantissa
