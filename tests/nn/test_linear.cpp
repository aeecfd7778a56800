// nn::functional::linear, nn::Linear and nn::init.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "mantissa/autograd/node.h"
#include "mantissa/core/generator.h"
#include "mantissa/nn/conv.h"
#include "mantissa/nn/functional.h"
#include "mantissa/nn/init.h"
#include "mantissa/nn/linear.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

// y[r][o] = sum_i x[r][i] w[o][i] + b[o] in double, over x flattened to rows.
std::vector<double> naive_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t in = w.size(1), out = w.size(0), rows = x.numel() / in;
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const auto bv = b.defined() ? b.to_vector<double>() : std::vector<double>(out, 0.0);
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = bv[o];
      for (int64_t i = 0; i < in; ++i) s += xv[r * in + i] * wv[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

// An input the layer refuses is named in the layer's terms (a C++ caller has no traceback to
// find which Linear of a model it was); Conv2d likewise.
TEST(Linear, InputErrorsNameTheLayer) {
  nn::Linear fc(32, 8);
  testing::expect_error(
      [&] {
        fc.forward(zeros({16, 31}));
      },
      {"[linear]", "(in Linear(in_features=32, out_features=8, bias=true))"});
  nn::Conv2d conv(3, 8, {3, 3});
  testing::expect_error(
      [&] {
        conv.forward(zeros({2, 4, 8, 8}));
      },
      {"(in Conv2d(3, 8, kernel_size=(3, 3)"});
}

TEST(Linear, FunctionalMatchesNaiveLoop) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    const double rtol = dt == kFloat64   ? 1e-14
                        : dt == kFloat32 ? 1e-5
                        : dt == kFloat16 ? 2e-3
                                         : 1e-2;
    Tensor w = rnd({5, 7}, dt, 1), b = rnd({5}, dt, 2);
    for (const Shape& xs : {Shape{3, 7}, Shape{2, 3, 7}, Shape{7}, Shape{1, 7}}) {
      Tensor x = rnd(xs, dt, 3);
      for (bool with_bias : {true, false}) {
        Tensor y = nn::functional::linear(x, w, with_bias ? b : Tensor());
        Shape ys = xs;
        ys.back() = 5;
        ASSERT_EQ(y.shape(), ys);
        ASSERT_EQ(y.dtype(), dt);
        const auto ref = naive_linear(x, w, with_bias ? b : Tensor());
        const auto got = y.to_vector<double>();
        for (size_t i = 0; i < ref.size(); ++i)
          EXPECT_NEAR(got[i], ref[i], rtol * (1 + std::abs(ref[i]))) << dt.name() << " " << i;
      }
    }
  }
}

TEST(Linear, TransposedInputIsHandled) {
  Tensor w = rnd({4, 6}, kFloat32, 4), b = rnd({4}, kFloat32, 5);
  Tensor x = rnd({6, 3}, kFloat32, 6).t();  // (3, 6) transposed view
  const auto ref = naive_linear(x, w, b);
  const auto got = nn::functional::linear(x, w, b).to_vector<double>();
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5);
}

TEST(Linear, RecordsOneLinearBackwardNode) {
  Tensor x = random_input({2, 3}, 7), w = random_input({4, 3}, 8), b = random_input({4}, 9);
  Tensor y = nn::functional::linear(x, w, b);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "LinearBackward");
  EXPECT_EQ(y.grad_fn()->next.size(), 3u);
  // Upstream ones: db = column sums = rows, dW[o][i] = sum_r x[r][i], dX[r][i] = sum_o W[o][i].
  y.backward(ones({2, 4}, kFloat64));
  EXPECT_EQ(b.grad().to_vector<double>(), std::vector<double>(4, 2.0));
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const auto gw = w.grad().to_vector<double>(), gx = x.grad().to_vector<double>();
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(gw[o * 3 + i], xv[i] + xv[3 + i], 1e-15);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_NEAR(gx[r * 3 + i], wv[i] + wv[3 + i] + wv[6 + i] + wv[9 + i], 1e-15);
}

auto lin3 = [](const std::vector<Tensor>& in) {
  return nn::functional::linear(in[0], in[1], in[2]);
};
auto lin2 = [](const std::vector<Tensor>& in) { return nn::functional::linear(in[0], in[1]); };

TEST(Linear, GradcheckF64) {
  expect_gradcheck(lin3,
                   {random_input({2, 3, 4}, 10), random_input({5, 4}, 11), random_input({5}, 12)});
  expect_gradcheck(lin2, {random_input({3, 4}, 13), random_input({2, 4}, 14)});
  expect_gradcheck(lin3, {random_input({4}, 15), random_input({3, 4}, 16), random_input({3}, 17)});
}

TEST(Linear, MatchesF64InLowPrecision) {
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    const auto tol = testing::tolerance_for(dt);
    expect_matches_f64(
        lin3, {random_input({2, 3, 8}, 20), random_input({5, 8}, 21), random_input({5}, 22)}, dt,
        tol.atol, tol.rtol);
    expect_matches_f64(lin2, {random_input({6, 8}, 23), random_input({3, 8}, 24)}, dt, tol.atol,
                       tol.rtol);
  }
}

TEST(Linear, BiasIsAddedBeforeTheSingleRounding) {
  // x = w = 1 + 2^-7 (exact in bf16): x*w = 1 + 2^-6 + 2^-14. With b = 2^-8 the fp32 sum lies
  // just above the midpoint between the bf16 neighbours 1 + 2*2^-7 and 1 + 3*2^-7, so one
  // rounding gives 1 + 3*2^-7. Rounding the product first (to 1 + 2^-6) and then adding b
  // would land exactly on the midpoint and round to even, 1 + 2^-6.
  const double e = std::ldexp(1.0, -7);
  Tensor x = tensor_of({1.0 + e}, {1, 1}, kBFloat16);
  Tensor w = tensor_of({1.0 + e}, {1, 1}, kBFloat16);
  Tensor b = tensor_of({std::ldexp(1.0, -8)}, {1}, kBFloat16);
  EXPECT_EQ(nn::functional::linear(x, w, b).item(), 1.0 + 3 * e);
}

TEST(Linear, EmptyBatchAndFeatures) {
  Tensor x = zeros({0, 3}), w = ones({2, 3}), b = ones({2});
  w.requires_grad_();
  b.requires_grad_();
  Tensor y = nn::functional::linear(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{0, 2}));
  y.backward(zeros({0, 2}));
  EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(6, 0.0));
  EXPECT_EQ(b.grad().to_vector<double>(), std::vector<double>(2, 0.0));
  // in_features = 0: the output is the bias.
  EXPECT_EQ(
      nn::functional::linear(zeros({3, 0}), zeros({2, 0}), full({2}, 1.5)).to_vector<double>(),
      std::vector<double>(6, 1.5));
}

TEST(Linear, Errors) {
  Tensor w = zeros({5, 4});
  EXPECT_THROW(nn::functional::linear(zeros({3, 3}), w), Error);              // in-features
  EXPECT_THROW(nn::functional::linear(zeros({3, 4}), zeros({4})), Error);     // weight 1-D
  EXPECT_THROW(nn::functional::linear(zeros({3, 4}), w, zeros({4})), Error);  // bias size
  EXPECT_THROW(nn::functional::linear(zeros({3, 4}, kBFloat16), w), Error);   // dtype
  EXPECT_THROW(nn::functional::linear(zeros({3, 4}), w, zeros({5}, kFloat64)), Error);
  EXPECT_THROW(nn::Linear(3, 2, true, kInt64), Error);
}

TEST(Linear, DefaultInitBoundsAndStatistics) {
  manual_seed(0);
  nn::Linear layer(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);
  for (const Tensor& t : {layer.weight, layer.bias}) {
    const auto v = t.to_vector<double>();
    double sum = 0, sq = 0, lo = 1, hi = -1;
    for (double x : v) {
      sum += x;
      sq += x * x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    const double n = static_cast<double>(v.size());
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    const double var = bound * bound / 3;  // of U(-bound, bound)
    EXPECT_NEAR(sum / n, 0.0, 4 * std::sqrt(var / n));
    if (n > 1000) {
      EXPECT_NEAR(sq / n, var, 0.02 * var);
      EXPECT_GT(hi, 0.99 * bound);  // the whole range is used
      EXPECT_LT(lo, -0.99 * bound);
    }
  }
  EXPECT_TRUE(layer.weight.requires_grad());
  EXPECT_EQ(layer.weight.shape(), (Shape{300, 400}));
}

TEST(Linear, InitIsSeededAndDtypeIndependent) {
  manual_seed(7);
  nn::Linear a(6, 4);
  manual_seed(7);
  nn::Linear b(6, 4, true, kBFloat16);
  Generator g(7);
  nn::Linear c(6, 4, true, kFloat32, &g);
  EXPECT_EQ(a.weight.to_vector<double>(), c.weight.to_vector<double>());
  EXPECT_EQ(a.bias.to_vector<double>(), c.bias.to_vector<double>());
  // The same draws rounded once to bf16.
  EXPECT_EQ(b.weight.to_vector<double>(), a.weight.to(kBFloat16).to_vector<double>());
  EXPECT_EQ(b.weight.dtype(), kBFloat16);
  manual_seed(8);
  nn::Linear d(6, 4);
  EXPECT_NE(a.weight.to_vector<double>(), d.weight.to_vector<double>());
}

TEST(Linear, ModuleForwardAndRepr) {
  nn::Linear layer(3, 2, /*with_bias=*/false);
  EXPECT_FALSE(layer.bias.defined());
  EXPECT_EQ(layer.named_parameters().size(), 1u);
  EXPECT_EQ(layer.to_string(), "Linear(in_features=3, out_features=2, bias=false)");
  Tensor x = rnd({4, 3}, kFloat32, 30);
  const auto ref = naive_linear(x, layer.weight, Tensor());
  const auto got = layer(x).to_vector<double>();
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-6);
}

TEST(NnInit, FanComputationAndGains) {
  Tensor conv = empty({8, 3, 5, 5});
  const auto f = nn::init::calculate_fan_in_and_fan_out(conv);
  EXPECT_EQ(f.fan_in, 75);
  EXPECT_EQ(f.fan_out, 200);
  EXPECT_THROW(nn::init::calculate_fan_in_and_fan_out(empty({4})), Error);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("selu"), 0.75);
  EXPECT_THROW(nn::init::calculate_gain("swish"), Error);
}

std::pair<double, double> mean_var(const Tensor& t) {
  const auto v = t.to_vector<double>();
  double s = 0, q = 0;
  for (double x : v) s += x;
  const double m = s / v.size();
  for (double x : v) q += (x - m) * (x - m);
  return {m, q / v.size()};
}

TEST(NnInit, DistributionsHaveTheDocumentedScale) {
  Generator g(3);
  Tensor t = empty({8, 3, 5, 5}, kFloat64);
  nn::init::xavier_uniform_(t, 1.0, &g);
  const double xb = std::sqrt(6.0 / 275.0);
  for (double v : t.to_vector<double>()) ASSERT_LE(std::abs(v), xb);
  EXPECT_NEAR(mean_var(t).second, xb * xb / 3, 0.1 * xb * xb / 3);

  Tensor big = empty({200, 100}, kFloat32);
  nn::init::kaiming_normal_(big, 0.0, nn::init::FanMode::kFanIn, "relu", &g);
  auto [m, v] = mean_var(big);
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(v, 2.0 / 100, 0.05 * 2.0 / 100);

  nn::init::kaiming_uniform_(big, 0.0, nn::init::FanMode::kFanOut, "relu", &g);
  const double kb = std::sqrt(2.0) * std::sqrt(3.0 / 200);
  for (double x : big.to_vector<double>()) ASSERT_LE(std::abs(x), kb * (1 + 1e-6));

  nn::init::normal_(big, 2.0, 0.5, &g);
  std::tie(m, v) = mean_var(big);
  EXPECT_NEAR(m, 2.0, 0.02);
  EXPECT_NEAR(v, 0.25, 0.02);

  nn::init::xavier_normal_(big, 2.0, &g);
  EXPECT_NEAR(mean_var(big).second, 4.0 * 2.0 / 300, 0.05 * 4.0 * 2.0 / 300);

  nn::init::uniform_(big, 3.0, 4.0, &g);
  for (double x : big.to_vector<double>()) ASSERT_TRUE(x >= 3.0 && x <= 4.0);
  nn::init::zeros_(big);
  EXPECT_EQ(big.to_vector<double>(), std::vector<double>(20000, 0.0));
  nn::init::ones_(big);
  EXPECT_EQ(big.to_vector<double>(), std::vector<double>(20000, 1.0));
  nn::init::constant_(big, 0.25);
  EXPECT_EQ(big.to_vector<double>(), std::vector<double>(20000, 0.25));
}

TEST(NnInit, KeepsHandleAndRecordsNothing) {
  Tensor w = zeros({3, 4});
  w.requires_grad_();
  Tensor r = nn::init::uniform_(w, -1, 1);
  EXPECT_TRUE(r.is_same(w));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_THROW(nn::init::uniform_(zeros({2}, kInt64)), Error);
}

// Under SkipRandomInit the random initialisers write nothing and draw nothing: the tensors keep
// their values, and the generator gives afterwards what it would have given first. Guards nest,
// the leaving one restores the outer setting, and another thread is not affected.
TEST(NnInit, SkipRandomInitLeavesTensorsAndGeneratorsAlone) {
  Generator g(5), fresh(5);
  Tensor w = full({4, 6}, 0.25);
  {
    nn::init::SkipRandomInit skip;
    EXPECT_TRUE(nn::init::random_init_skipped());
    nn::init::uniform_(w, -1, 1, &g);
    nn::init::normal_(w, 0, 1, &g);
    nn::init::kaiming_uniform_(w, std::sqrt(5.0), nn::init::FanMode::kFanIn, "leaky_relu", &g);
    nn::init::xavier_normal_(w, 1.0, &g);
    { nn::init::SkipRandomInit nested; }
    EXPECT_TRUE(nn::init::random_init_skipped());
    bool other_thread_skipped = true;
    std::thread([&] { other_thread_skipped = nn::init::random_init_skipped(); }).join();
    EXPECT_FALSE(other_thread_skipped);
    // Constants are still written (they draw nothing).
    Tensor c = zeros({2});
    nn::init::ones_(c);
    EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{1.0, 1.0}));
    // Bad input is still refused.
    EXPECT_THROW(nn::init::uniform_(zeros({2}, kInt64)), Error);
  }
  EXPECT_FALSE(nn::init::random_init_skipped());
  EXPECT_EQ(w.to_vector<double>(), std::vector<double>(24, 0.25));
  nn::init::uniform_(w, -1, 1, &g);
  Tensor want = zeros({4, 6});
  nn::init::uniform_(want, -1, 1, &fresh);
  EXPECT_EQ(w.to_vector<double>(), want.to_vector<double>());
}

}  // namespace
}  // namespace mantissa
