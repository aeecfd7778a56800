// set_float32_matmul_precision (mantissa/ops/matmul_precision.h): "medium" is exactly the fp32
// product of the bf16-rounded operands, "high" (bf16x3) is close to fp32, "highest" is fp32;
// the error of each against a float64 product; convolutions and gradients follow the setting;
// other dtypes do not.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "kernels/cpu/gemm/gemm_native.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/mantissa.h"
#include "mantissa/ops/matmul_precision.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using testing::vals;

Tensor bf16_values(const Tensor& t) { return t.to(kBFloat16).to(kFloat32); }

// ||got - want|| / ||want|| with want in float64.
double rel_error(const Tensor& got, const Tensor& want64) {
  const std::vector<double> g = vals(got), w = vals(want64);
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    num += (g[i] - w[i]) * (g[i] - w[i]);
    den += w[i] * w[i];
  }
  return std::sqrt(num / den);
}

// The native bf16 GEMM (AVX-512 BF16) sums in another order than oneDNN's fp32 GEMM.
bool emulated() { return !kernels::gemm_native_supported(kBFloat16); }

TEST(Float32MatmulPrecision, SetAndGet) {
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  {
    Float32MatmulPrecisionGuard g(Float32MatmulPrecision::kMedium);
    EXPECT_EQ(get_float32_matmul_precision(), "medium");
    set_float32_matmul_precision("high");
    EXPECT_EQ(float32_matmul_precision(), Float32MatmulPrecision::kHigh);
  }
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  testing::expect_error([] { set_float32_matmul_precision("tf32"); },
                        "valid values are: highest, high, medium");
}

// Guards held by unique_ptr and closed outermost first: the precision is what the innermost
// open guard set while any is open, and "highest" once all are closed, with one warning (not
// the outer's "medium" restored by the inner guard, which would leave every float32 matmul
// rounded to bf16 with no guard open).
TEST(Float32MatmulPrecision, GuardsClosedOutOfOrderRestoreThePrecisionBeforeThem) {
  forget_warnings_said_once();
  WarningRecorder warnings;
  ASSERT_EQ(get_float32_matmul_precision(), "highest");
  auto outer = std::make_unique<Float32MatmulPrecisionGuard>(Float32MatmulPrecision::kMedium);
  auto inner = std::make_unique<Float32MatmulPrecisionGuard>(Float32MatmulPrecision::kHigh);
  outer.reset();
  EXPECT_EQ(get_float32_matmul_precision(), "high");
  inner.reset();
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_NE(warnings.messages()[0].find("float32 matmul precision guards "
                                        "(Float32MatmulPrecisionGuard) were closed out of order"),
            std::string::npos);
}

TEST(Float32MatmulPrecision, MediumIsTheFp32ProductOfBf16Operands) {
  Generator gen(1);
  const Tensor a = randn({33, 70}, kFloat32, &gen), b = randn({70, 19}, kFloat32, &gen);
  const Tensor bias = randn({19}, kFloat32, &gen);
  const Tensor want = linear(bf16_values(a), bf16_values(b).t(), bias);
  Float32MatmulPrecisionGuard g(Float32MatmulPrecision::kMedium);
  const Tensor got = linear(a, b.t(), bias);
  EXPECT_EQ(got.dtype(), kFloat32);
  if (emulated()) {
    EXPECT_EQ(vals(got), vals(want));  // bit for bit: the same GEMM on the same values
  } else {
    testing::expect_near_all(vals(got), vals(want), 1e-4);
  }
  // K = 1: one product per element, exact in fp32 whatever the GEMM.
  const Tensor x = randn({5, 1}, kFloat32, &gen), y = randn({1, 7}, kFloat32, &gen);
  const Tensor p = matmul(x, y);
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  const std::vector<float> pv = p.to_vector<float>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j)
      EXPECT_EQ(pv[i * 7 + j],
                static_cast<float>(BFloat16(xv[i])) * static_cast<float>(BFloat16(yv[j])));
}

TEST(Float32MatmulPrecision, HighIsTheBf16x3Sum) {
  // K = 1: a_hi*b_hi + a_hi*b_lo + a_lo*b_hi, summed in that order in fp32.
  Generator gen(2);
  const Tensor x = randn({4, 1}, kFloat32, &gen), y = randn({1, 3}, kFloat32, &gen);
  Float32MatmulPrecisionGuard g(Float32MatmulPrecision::kHigh);
  const std::vector<float> pv = matmul(x, y).to_vector<float>();
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  auto hi = [](float v) { return static_cast<float>(BFloat16(v)); };
  auto lo = [&](float v) { return static_cast<float>(BFloat16(v - hi(v))); };
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      const float a = xv[i], b = yv[j];
      const float want = hi(a) * hi(b) + hi(a) * lo(b) + lo(a) * hi(b);
      EXPECT_NEAR(pv[i * 3 + j], want, std::abs(want) * 2.5e-7) << i << "," << j;
      // and within bf16x3's bound of the exact product
      EXPECT_NEAR(pv[i * 3 + j], static_cast<double>(a) * b, std::abs(a * b) * 2e-5);
    }
  }
}

// "high" and "medium" with each operand contiguous or a transposed view (linear's weight, the
// weight gradient's activations): every output equals the sum of its bf16 terms, computed in
// float64 here, within fp32 accumulation of 3K (or K) terms -- whichever GEMM and term layout
// the CPU uses.
TEST(Float32MatmulPrecision, EveryOperandLayoutGivesTheTermSums) {
  Generator gen(7);
  const int64_t M = 37, K = 300, N = 29;
  const Tensor a = randn({M, K}, kFloat32, &gen), b = randn({K, N}, kFloat32, &gen);
  const Tensor at = a.t().contiguous(), bt = b.t().contiguous();  // stored transposed
  auto hi = [](float v) { return static_cast<double>(static_cast<float>(BFloat16(v))); };
  auto lo = [&](float v) {
    return static_cast<double>(static_cast<float>(BFloat16(v - static_cast<float>(hi(v)))));
  };
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  for (auto mode : {Float32MatmulPrecision::kHigh, Float32MatmulPrecision::kMedium}) {
    for (int layout = 0; layout < 4; ++layout) {
      const Tensor lhs = layout & 1 ? at.t() : a, rhs = layout & 2 ? bt.t() : b;
      Float32MatmulPrecisionGuard g(mode);
      const std::vector<float> got = matmul(lhs, rhs).to_vector<float>();
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const float x = av[i * K + k], y = bv[k * N + j];
            const double t = mode == Float32MatmulPrecision::kHigh
                                 ? hi(x) * hi(y) + hi(x) * lo(y) + lo(x) * hi(y)
                                 : hi(x) * hi(y);
            want += t;
            mag += std::fabs(hi(x) * hi(y)) * 1.01;
          }
          ASSERT_NEAR(got[i * N + j], want, 3 * K * std::ldexp(mag, -24) + 1e-30)
              << "layout " << layout << " mode " << static_cast<int>(mode) << " (" << i << ", " << j
              << ")";
        }
      }
    }
  }
}

TEST(Float32MatmulPrecision, ErrorAgainstFloat64FollowsTheMode) {
  Generator gen(3);
  const Tensor a = randn({64, 512}, kFloat32, &gen), b = randn({512, 48}, kFloat32, &gen);
  const Tensor want = matmul(a.to(kFloat64), b.to(kFloat64));
  double err[3];
  const Float32MatmulPrecision modes[3] = {Float32MatmulPrecision::kHighest,
                                           Float32MatmulPrecision::kHigh,
                                           Float32MatmulPrecision::kMedium};
  for (int m = 0; m < 3; ++m) {
    Float32MatmulPrecisionGuard g(modes[m]);
    err[m] = rel_error(matmul(a, b), want);
  }
  EXPECT_LT(err[0], 1e-6);  // fp32: ~2^-24 * sqrt(K)
  EXPECT_LT(err[1], 2e-5);  // bf16x3: fp32's order (the dropped lo*lo ~2^-18)
  EXPECT_GT(err[2], 5e-4);  // one bf16 product: bf16's order (2^-9 per operand)
  EXPECT_LT(err[2], 1e-2);
  EXPECT_LT(err[1] * 50, err[2]);
}

TEST(Float32MatmulPrecision, BatchedMatmulAndOtherDtypes) {
  Generator gen(4);
  const Tensor a = randn({3, 8, 16}, kFloat32, &gen), b = randn({3, 16, 5}, kFloat32, &gen);
  const Tensor w = randn({16, 5}, kFloat32, &gen);
  Tensor want, want_w;
  {
    want = matmul(bf16_values(a), bf16_values(b));
    want_w = matmul(bf16_values(a), bf16_values(w));
  }
  const Tensor ab = a.to(kBFloat16), bb = b.to(kBFloat16);
  const Tensor bf16_highest = matmul(ab, bb);
  Float32MatmulPrecisionGuard g(Float32MatmulPrecision::kMedium);
  testing::expect_near_all(vals(matmul(a, b)), vals(want), emulated() ? 0 : 1e-4);
  testing::expect_near_all(vals(matmul(a, w)), vals(want_w), emulated() ? 0 : 1e-4);
  EXPECT_EQ(vals(matmul(ab, bb)), vals(bf16_highest));  // bf16 operands: not affected
  const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
  EXPECT_LT(rel_error(matmul(a64, b64), matmul(a64, b64)), 1e-300);  // float64: untouched
}

TEST(Float32MatmulPrecision, ConvolutionsFollowTheMode) {
  Generator gen(5);
  const Tensor x = randn({2, 3, 9, 9}, kFloat32, &gen), w = randn({4, 3, 3, 3}, kFloat32, &gen);
  const Tensor bias = randn({4}, kFloat32, &gen);
  const Tensor want_medium = conv2d(bf16_values(x), bf16_values(w), bias, {1, 1}, {1, 1});
  const Tensor want64 = conv2d(x.to(kFloat64), w.to(kFloat64), bias.to(kFloat64), {1, 1}, {1, 1});
  {
    Float32MatmulPrecisionGuard g(Float32MatmulPrecision::kMedium);
    EXPECT_EQ(vals(conv2d(x, w, bias, {1, 1}, {1, 1})), vals(want_medium));
  }
  const double highest = rel_error(conv2d(x, w, bias, {1, 1}, {1, 1}), want64);
  Float32MatmulPrecisionGuard g(Float32MatmulPrecision::kHigh);
  const double high = rel_error(conv2d(x, w, bias, {1, 1}, {1, 1}), want64);
  EXPECT_LT(high, 2e-5);
  EXPECT_LT(highest, 1e-6);
  EXPECT_GT(rel_error(want_medium, want64), 50 * high);
}

TEST(Float32MatmulPrecision, GradientsFollowTheMode) {
  Generator gen(6);
  Tensor x = randn({6, 10}, kFloat32, &gen).set_requires_grad(true);
  Tensor w = randn({4, 10}, kFloat32, &gen).set_requires_grad(true);
  Tensor xi = randn({2, 2, 6, 6}, kFloat32, &gen).set_requires_grad(true);
  Tensor wi = randn({3, 2, 3, 3}, kFloat32, &gen).set_requires_grad(true);
  auto grads = [&] {
    x.reset_grad();
    w.reset_grad();
    xi.reset_grad();
    wi.reset_grad();
    sum(mul(linear(x, w), linear(x, w))).backward();
    sum(mul(conv2d(xi, wi), conv2d(xi, wi))).backward();
    return std::vector<std::vector<double>>{vals(x.grad()), vals(w.grad()), vals(xi.grad()),
                                            vals(wi.grad())};
  };
  const auto exact = grads();
  Float32MatmulPrecisionGuard g(Float32MatmulPrecision::kHigh);
  const auto high = grads();
  set_float32_matmul_precision("medium");
  const auto medium = grads();
  for (size_t t = 0; t < exact.size(); ++t) {
    double e_high = 0, e_med = 0, scale = 0;
    for (size_t i = 0; i < exact[t].size(); ++i) {
      e_high = std::max(e_high, std::abs(high[t][i] - exact[t][i]));
      e_med = std::max(e_med, std::abs(medium[t][i] - exact[t][i]));
      scale = std::max(scale, std::abs(exact[t][i]));
    }
    EXPECT_LT(e_high, 1e-4 * scale) << t;
    EXPECT_LT(e_med, 5e-2 * scale) << t;
    EXPECT_GT(e_med, e_high) << t;  // the backward products are reduced too
  }
}

}  // namespace
}  // namespace mantissa
