#include <gtest/gtest.h>

#include "mantissa/ops/dropout.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(DropoutOp, ZeroFractionNearPAndSurvivorsScaledExactly) {
  const double p = 0.3;
  Generator data_gen(5);
  Tensor x = uniform({400, 250}, 0.5, 2.0, kFloat32, &data_gen);  // no zeros in the input
  Generator g(42);
  Tensor y = dropout(x, p, true, &g);
  ASSERT_EQ(y.dtype(), kFloat32);
  ASSERT_EQ(y.shape(), x.shape());
  const auto xv = x.to_vector<float>();
  const auto yv = y.to_vector<float>();
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  int64_t zeros_seen = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0.0f) {
      ++zeros_seen;
    } else {
      ASSERT_EQ(yv[i], xv[i] * scale) << i;  // one fp32 multiply, exact bits
    }
  }
  // 100000 Bernoulli(0.3) draws: standard deviation 0.00145, so 0.01 is ~7 sigma.
  EXPECT_NEAR(static_cast<double>(zeros_seen) / static_cast<double>(xv.size()), p, 0.01);
}

TEST(DropoutOp, SameSeedSameMaskAndGradientIsMaskTimesScale) {
  Tensor x = ones({1000}, kBFloat16);
  x.requires_grad_();
  Generator g1(7), g2(7), g3(8);
  Tensor a = dropout(x, 0.5, true, &g1);
  Tensor b = dropout(x, 0.5, true, &g2);
  Tensor c = dropout(x, 0.5, true, &g3);
  EXPECT_EQ(a.dtype(), kBFloat16);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  EXPECT_NE(a.to_vector<double>(), c.to_vector<double>());
  // The default generator, reseeded, also repeats.
  manual_seed(3);
  const auto d1 = dropout(x.detach(), 0.5).to_vector<double>();
  manual_seed(3);
  EXPECT_EQ(dropout(x.detach(), 0.5).to_vector<double>(), d1);

  a.backward(full({1000}, 3.0, kBFloat16));
  const auto av = a.to_vector<double>();
  const auto gv = x.grad().to_vector<double>();
  for (size_t i = 0; i < av.size(); ++i) {
    ASSERT_TRUE(av[i] == 0.0 || av[i] == 2.0) << i;
    EXPECT_EQ(gv[i], av[i] == 0.0 ? 0.0 : 6.0) << i;
  }
}

TEST(DropoutOp, IdentityWhenNotTrainingOrPZeroAndZerosForPOne) {
  Tensor x = random_input({3, 4}, 61);
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  Tensor z = dropout(x, 1.0, true);
  for (double v : z.to_vector<double>()) EXPECT_EQ(v, 0.0);
  x.reset_grad();
  z.backward(ones({3, 4}, kFloat64));
  for (double v : x.grad().to_vector<double>()) EXPECT_EQ(v, 0.0);
}

TEST(DropoutOp, RejectsBadProbabilityAndDtype) {
  EXPECT_THROW(dropout(ones({2}), -0.1), Error);
  EXPECT_THROW(dropout(ones({2}), 1.5), Error);
  EXPECT_THROW(dropout(ones({2}), std::nan("")), Error);
  EXPECT_THROW(dropout(arange(4), 0.5), Error);
}

TEST(DropoutOp, GradcheckAndLowPrecision) {
  // A fresh generator with the same seed per call gives the same mask every evaluation.
  auto fn = [](const std::vector<Tensor>& in) {
    Generator g(99);
    return dropout(in[0], 0.4, true, &g);
  };
  expect_gradcheck(fn, {random_input({5, 6}, 62)});
  // Non-contiguous input.
  expect_gradcheck(
      [](const auto& in) {
        Generator g(100);
        return dropout(in[0].t(), 0.25, true, &g);
      },
      {random_input({4, 3}, 63)});
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    expect_matches_f64(fn, {random_input({5, 6}, 64)}, dt, tol.atol, tol.rtol);
  }
}

}  // namespace
}  // namespace mantissa
