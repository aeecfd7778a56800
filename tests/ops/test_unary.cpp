// Unary math ops: exact values, special values, gradients, low-precision agreement.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "mantissa/ops/elementwise.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(UnaryOps, ExactValuesInFloat64) {
  Tensor x = tensor<double>({-2, -0.5, 0, 1, 4});
  expect_near_all(vals(neg(x)), {2, 0.5, 0, -1, -4});
  expect_near_all(vals(abs(x)), {2, 0.5, 0, 1, 4});
  expect_near_all(vals(exp(x)), {std::exp(-2.0), std::exp(-0.5), 1, std::exp(1.0), std::exp(4.0)});
  expect_near_all(vals(tanh(x)),
                  {std::tanh(-2.0), -0.46211715726000974, 0, std::tanh(1.0), std::tanh(4.0)});
  expect_near_all(vals(sigmoid(x)), {1 / (1 + std::exp(2.0)), 1 / (1 + std::exp(0.5)), 0.5,
                                     0.7310585786300049, 1 / (1 + std::exp(-4.0))});
  Tensor p = tensor<double>({0.25, 1, 4, 9});
  expect_near_all(vals(log(p)), {std::log(0.25), 0, std::log(4.0), std::log(9.0)});
  expect_near_all(vals(sqrt(p)), {0.5, 1, 2, 3});
  expect_near_all(vals(rsqrt(p)), {2, 1, 0.5, 1.0 / 3});
  expect_near_all(vals(clamp(x, -1, 1)), {-1, -0.5, 0, 1, 1});
}

TEST(UnaryOps, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = tensor<float>(
      {0.0f, -0.0f, static_cast<float>(inf), static_cast<float>(-inf), static_cast<float>(nan)});
  auto l = vals(log(x));
  EXPECT_EQ(l[0], -inf);
  EXPECT_EQ(l[2], inf);
  EXPECT_TRUE(std::isnan(l[3]) && std::isnan(l[4]));
  auto s = vals(sigmoid(x));
  EXPECT_EQ(s[2], 1.0);
  EXPECT_EQ(s[3], 0.0);
  auto r = vals(rsqrt(x));
  EXPECT_EQ(r[0], inf);
  EXPECT_EQ(r[1], -inf);
  EXPECT_EQ(r[2], 0.0);
  auto c = vals(clamp(x, -1, 1));
  EXPECT_EQ(c[2], 1);
  EXPECT_EQ(c[3], -1);
  EXPECT_TRUE(std::isnan(c[4]));  // NaN passes through clamp
  EXPECT_FALSE(std::signbit(vals(abs(tensor<float>({-0.0f})))[0]));
  // Large negative inputs: sigmoid underflows to 0 without NaN.
  EXPECT_EQ(vals(sigmoid(tensor<float>({-200.0f})))[0], 0.0);
}

TEST(UnaryOps, DtypeRules) {
  Tensor i = tensor<int64_t>({-3, 0, 5});
  EXPECT_EQ(neg(i).dtype(), kInt64);
  EXPECT_EQ(vals(neg(i)), (std::vector<double>{3, 0, -5}));
  EXPECT_EQ(vals(abs(i)), (std::vector<double>{3, 0, 5}));
  EXPECT_EQ(exp(i).dtype(), kFloat32);  // math functions give the default float for integers
  EXPECT_EQ(vals(sqrt(tensor<int32_t>({4, 9}))), (std::vector<double>{2, 3}));
  // clamp keeps integers for whole (or infinite) bounds.
  EXPECT_EQ(clamp(i, -1, 2).dtype(), kInt64);
  EXPECT_EQ(vals(clamp(i, -1, 2)), (std::vector<double>{-1, 0, 2}));
  EXPECT_EQ(vals(clamp(i, -std::numeric_limits<double>::infinity(), 2)),
            (std::vector<double>{-3, 0, 2}));
  EXPECT_EQ(clamp(i, -1.5, 2).dtype(), kFloat32);
  EXPECT_EQ(vals(clamp(i, -1.5, 2)), (std::vector<double>{-1.5, 0, 2}));
  // min > max: everything becomes max (as PyTorch).
  EXPECT_EQ(vals(clamp(tensor<float>({-5, 0, 5}), 2, 1)), (std::vector<double>{1, 1, 1}));
  for (DType dt : {kFloat16, kBFloat16}) EXPECT_EQ(exp(ones({2}, dt)).dtype(), dt);
}

TEST(UnaryOps, Gradcheck) {
  auto x = random_input({2, 3}, 31, -2, 2);
  auto pos = random_input({2, 3}, 32, 0.2, 3);
  expect_gradcheck([](const auto& v) { return neg(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return -v[0]; }, {x});
  expect_gradcheck([](const auto& v) { return abs(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return exp(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return log(v[0]); }, {pos});
  expect_gradcheck([](const auto& v) { return sqrt(v[0]); }, {pos});
  expect_gradcheck([](const auto& v) { return rsqrt(v[0]); }, {pos});
  expect_gradcheck([](const auto& v) { return tanh(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return sigmoid(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return clamp(v[0], -0.7, 1.1); }, {x});
  // Non-contiguous input through a chain.
  auto w = random_input({3, 2}, 33);
  expect_gradcheck([](const auto& v) { return sigmoid(exp(v[0].t())); }, {w});
}

TEST(UnaryOps, ClampGradientIsInclusiveAtTheBounds) {
  Tensor x = tensor<double>({-2, -1, 0, 1, 2});
  x.requires_grad_();
  clamp(x, -1, 1).backward(ones({5}, kFloat64));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 1, 1, 1, 0}));
  Tensor y = tensor<double>({0});
  y.requires_grad_();
  abs(y).backward(ones({1}, kFloat64));
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{0}));  // sign(0) = 0
}

TEST(UnaryOps, LowPrecisionMatchesFloat64) {
  auto x = random_input({4, 5}, 41, -3, 3);
  auto pos = random_input({4, 5}, 42, 0.1, 4);
  const std::vector<std::pair<testing::OpFn, Tensor>> cases = {
      {[](const auto& v) { return neg(v[0]); }, x},
      {[](const auto& v) { return abs(v[0]); }, x},
      {[](const auto& v) { return exp(v[0]); }, x},
      {[](const auto& v) { return log(v[0]); }, pos},
      {[](const auto& v) { return sqrt(v[0]); }, pos},
      {[](const auto& v) { return rsqrt(v[0]); }, pos},
      {[](const auto& v) { return tanh(v[0]); }, x},
      {[](const auto& v) { return sigmoid(v[0]); }, x},
      {[](const auto& v) { return clamp(v[0], -1, 2); }, x},
  };
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << dt.name() << " case " << i);
      expect_matches_f64(cases[i].first, {cases[i].second}, dt, tol.atol, tol.rtol);
    }
  }
}

TEST(UnaryOps, Errors) {
  EXPECT_THROW(neg(ones({2}, kBool)), Error);
  EXPECT_THROW(clamp(ones({2}), std::nan(""), 1), Error);
  EXPECT_THROW(exp(ones({2}, kFloat8_e5m2)), Error);
  try {
    tanh(ones({2}, kFloat8_e4m3fn));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[tanh]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mantissa
