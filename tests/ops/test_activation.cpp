// relu and gelu (erf and tanh forms): reference values, exact derivatives, gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "mantissa/ops/elementwise.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(Activation, ReluValuesAndGradient) {
  Tensor x = tensor<double>({-1.5, 0, 2.5});
  x.requires_grad_();
  Tensor y = relu(x);
  EXPECT_EQ(vals(y), (std::vector<double>{0, 0, 2.5}));
  y.backward(tensor<double>({3, 3, 3}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 0, 3}));  // zero at 0, as PyTorch
  EXPECT_EQ(relu(tensor<int32_t>({-2, 3})).dtype(), kInt32);
  EXPECT_EQ(vals(relu(tensor<int32_t>({-2, 3}))), (std::vector<double>{0, 3}));
  EXPECT_TRUE(std::isnan(vals(relu(tensor<float>({std::nanf("")})))[0]));
}

TEST(Activation, GeluReferenceValues) {
  Tensor x = tensor<double>({1.0, -2.0, 0.0});
  const auto exact = vals(gelu(x));
  EXPECT_DOUBLE_EQ(exact[0], 0.8413447460685429);
  EXPECT_DOUBLE_EQ(exact[1], -0.04550026389635842);
  EXPECT_EQ(exact[2], 0.0);
  const auto approx = vals(gelu(x, "tanh"));
  EXPECT_DOUBLE_EQ(approx[0], 0.8411919906082768);
  EXPECT_DOUBLE_EQ(approx[1], -0.04540230591222494);
  EXPECT_EQ(approx[2], 0.0);
  // In float32 the result is within an ulp or two of the f64 value.
  EXPECT_NEAR(vals(gelu(tensor<float>({1.0f})))[0], 0.8413447460685429, 2e-7);
  EXPECT_NEAR(vals(gelu(tensor<float>({1.0f}), "tanh"))[0], 0.8411919906082768, 2e-7);
}

TEST(Activation, GeluDerivativesAreExact) {
  // erf form: Phi(x) + x phi(x); tanh form: derivative of the approximation itself.
  Tensor x = tensor<double>({1.0});
  x.requires_grad_();
  gelu(x).backward(ones({1}, kFloat64));
  EXPECT_DOUBLE_EQ(vals(x.grad())[0], 1.0833154705876864);
  x.reset_grad();
  gelu(x, "tanh").backward(ones({1}, kFloat64));
  EXPECT_DOUBLE_EQ(vals(x.grad())[0], 1.0829640838457826);
}

TEST(Activation, Gradcheck) {
  auto x = random_input({3, 4}, 51, -3, 3);
  expect_gradcheck([](const auto& v) { return relu(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return gelu(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return gelu(v[0], "tanh"); }, {x});
  expect_gradcheck([](const auto& v) { return gelu(v[0].t(), "tanh"); }, {x});
}

TEST(Activation, LowPrecisionMatchesFloat64) {
  auto x = random_input({4, 8}, 52, -4, 4);
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    SCOPED_TRACE(dt.name());
    expect_matches_f64([](const auto& v) { return relu(v[0]); }, {x}, dt, tol.atol, tol.rtol);
    expect_matches_f64([](const auto& v) { return gelu(v[0]); }, {x}, dt, tol.atol, tol.rtol);
    expect_matches_f64([](const auto& v) { return gelu(v[0], "tanh"); }, {x}, dt, tol.atol,
                       tol.rtol);
  }
}

TEST(Activation, BadApproximateNameIsAnError) {
  try {
    gelu(ones({2}), "fast");
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[gelu]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'fast'"), std::string::npos) << msg;
  }
  EXPECT_THROW(relu(ones({2}, kBool)), Error);
}

}  // namespace
}  // namespace mantissa
