// LLM.int8's dequantizing epilogue (kernels/cpu/quant/int8_epilogue.h): the AVX2 rows give the
// scalar rows' bits, and both give the formula's, with and without outlier products and bias,
// on widths with and without a tail.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/quant/int8_epilogue.h"
#include "mantissa/core/convert.h"

namespace mantissa::kernels::quant {
namespace {

TEST(Int8Epilogue, LevelsEqualTheFormulaBitForBit) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int32_t> acc_d(-2000000, 2000000);
  std::normal_distribution<float> normal;
  for (int64_t n : {1, 7, 8, 37, 300}) {
    const int64_t rows = 5, in = 40;
    const std::vector<int64_t> cols = {3, 17, 39};
    const int64_t nc = static_cast<int64_t>(cols.size());
    std::vector<int32_t> acc(static_cast<size_t>(rows * n));
    std::vector<float> sa(rows), sb(n), bias(n), x(static_cast<size_t>(rows * in)),
        w(static_cast<size_t>(nc * n));
    for (auto& v : acc) v = acc_d(rng);
    for (auto& v : sa) v = std::abs(normal(rng)) * 3;
    for (auto& v : sb) v = std::abs(normal(rng));
    for (auto& v : bias) v = normal(rng);
    for (auto& v : x) v = normal(rng) * 8;
    for (auto& v : w) v = normal(rng) * 0.02f;
    // The formula, in its order.
    std::vector<float> add_ref(static_cast<size_t>(rows * n)), y_ref(add_ref.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float a = 0.0f;
        for (int64_t c = 0; c < nc; ++c) a += x[i * in + cols[c]] * w[c * n + j];
        add_ref[i * n + j] = a;
        float v = static_cast<float>(acc[i * n + j]) * (sa[i] * sb[j]) * (1.0f / 16129.0f);
        v += a;
        v += bias[j];
        y_ref[i * n + j] = v;
      }
    for (SimdLevel level : {SimdLevel::kScalar, simd_level()}) {
      std::vector<float> add(add_ref.size(), -1.0f), y(y_ref.size(), -1.0f);
      int8_outlier_products(x.data(), in, cols.data(), nc, w.data(), rows, n, add.data(), level);
      int8_dequant_epilogue(acc.data(), sa.data(), sb.data(), add.data(), bias.data(), rows, n,
                            y.data(), level);
      EXPECT_EQ(0, std::memcmp(add.data(), add_ref.data(), add.size() * sizeof(float)))
          << "outlier products, n " << n << ", level " << static_cast<int>(level);
      EXPECT_EQ(0, std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float)))
          << "epilogue, n " << n << ", level " << static_cast<int>(level);
      // Without the optional terms: the scaled products alone.
      int8_dequant_epilogue(acc.data(), sa.data(), sb.data(), nullptr, nullptr, rows, n, y.data(),
                            level);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(y[i * n + j],
                    static_cast<float>(acc[i * n + j]) * (sa[i] * sb[j]) * (1.0f / 16129.0f))
              << i << ", " << j;
    }
  }
}

// The half output is the fp32 epilogue's output rounded once: its bits, bf16 and f16, across the
// 1024-value chunks a row is made in.
TEST(Int8Epilogue, HalfOutputIsTheFp32OutputRoundedOnce) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int32_t> acc_d(-2000000, 2000000);
  std::normal_distribution<float> normal;
  for (int64_t n : {1, 9, 1024, 1100}) {
    const int64_t rows = 3;
    std::vector<int32_t> acc(static_cast<size_t>(rows * n));
    std::vector<float> sa(rows), sb(n), bias(n), add(static_cast<size_t>(rows * n));
    for (auto& v : acc) v = acc_d(rng);
    for (auto& v : sa) v = std::abs(normal(rng)) * 3;
    for (auto& v : sb) v = std::abs(normal(rng));
    for (auto& v : bias) v = normal(rng);
    for (auto& v : add) v = normal(rng);
    for (SimdLevel level : {SimdLevel::kScalar, simd_level()}) {
      std::vector<float> y(add.size());
      int8_dequant_epilogue(acc.data(), sa.data(), sb.data(), add.data(), bias.data(), rows, n,
                            y.data(), level);
      for (DType half : {kBFloat16, kFloat16}) {
        std::vector<uint16_t> want(y.size()), got(y.size(), 0xFFFF);
        if (half == kBFloat16)
          convert_f32_to_bf16(y.data(), want.data(), static_cast<int64_t>(y.size()));
        else
          convert_f32_to_f16(y.data(), want.data(), static_cast<int64_t>(y.size()));
        int8_dequant_epilogue_to_half(acc.data(), sa.data(), sb.data(), add.data(), bias.data(),
                                      rows, n, half, got.data(), level);
        EXPECT_EQ(got, want) << half.name() << ", n " << n << ", level " << static_cast<int>(level);
      }
    }
  }
}

TEST(Int8Epilogue, DequantizedRowsEqualTheFormulaBitForBit) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> code(-127, 127);
  for (int64_t cols : {1, 8, 13, 300}) {
    const int64_t rows = 4;
    std::vector<int8_t> c(static_cast<size_t>(rows * cols));
    for (auto& v : c) v = static_cast<int8_t>(code(rng));
    const std::vector<float> absmax = {0.5f, 3.25f, 1e-3f, 127.0f};
    for (SimdLevel level : {SimdLevel::kScalar, simd_level()}) {
      std::vector<float> out(c.size(), -1.0f);
      int8_dequantize_rows(c.data(), absmax.data(), rows, cols, out.data(), level);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          ASSERT_EQ(out[i * cols + j],
                    static_cast<float>(c[i * cols + j]) * absmax[i] * (1.0f / 127.0f))
              << i << ", " << j << " level " << static_cast<int>(level);
    }
  }
}

// The half outputs are the fp32 formula rounded once to nearest even, on rows longer than the
// kernel's 1024-value chunk too.
TEST(Int8Epilogue, DequantizedRowsToHalfRoundTheFormulaOnce) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> code(-127, 127);
  for (int64_t cols : {1, 9, 1024, 2100}) {
    const int64_t rows = 3;
    std::vector<int8_t> c(static_cast<size_t>(rows * cols));
    for (auto& v : c) v = static_cast<int8_t>(code(rng));
    const std::vector<float> absmax = {0.37f, 5.5f, 1e-4f};
    std::vector<float> want(c.size());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        want[i * cols + j] = static_cast<float>(c[i * cols + j]) * absmax[i] * (1.0f / 127.0f);
    for (DType half : {kBFloat16, kFloat16}) {
      std::vector<uint16_t> want_half(c.size());
      convert_buffer(want.data(), kFloat32, want_half.data(), half, rows * cols);
      for (SimdLevel level : {SimdLevel::kScalar, simd_level()}) {
        std::vector<uint16_t> out(c.size(), 0xFFFF);
        int8_dequantize_rows_to_half(c.data(), absmax.data(), rows, cols, half, out.data(), level);
        ASSERT_EQ(out, want_half) << half.name() << " cols " << cols;
      }
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::quant
