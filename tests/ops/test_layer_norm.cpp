// layer_norm: reference values, gradients against finite differences (f64), low-precision
// dtypes against f64, autocast (fp32 under bf16), errors.
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/amp/autocast.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/layer_norm.h"
#include "mantissa/ops/reduce.h"
#include "support/gradcheck.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(LayerNorm, ReferenceValues) {
  // Row [1, 2, 3, 4]: mean 2.5, biased variance 1.25.
  Tensor x = tensor<double>({1, 2, 3, 4, -2, 0, 0, 2}, {2, 4});
  Tensor w = tensor<double>({1, 2, 1, 1});
  Tensor b = tensor<double>({0, 0, 1, 0});
  const auto y = vals(layer_norm(x, {4}, w, b, 0.0));
  const double r0 = 1 / std::sqrt(1.25), r1 = 1 / std::sqrt(2.0);
  const std::vector<double> expect = {-1.5 * r0, 2 * -0.5 * r0, 0.5 * r0 + 1, 1.5 * r0, -2 * r1, 0,
                                      1,         2 * r1};
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expect[i], 1e-15) << i;
  // eps enters under the square root.
  EXPECT_NEAR(vals(layer_norm(tensor<double>({0, 2}), {2}, Tensor(), Tensor(), 1.0))[1],
              1 / std::sqrt(2.0), 1e-15);
}

TEST(LayerNorm, GradcheckSeveralShapes) {
  auto x = random_input({3, 2, 5}, 1, -2, 2);
  auto w1 = random_input({5}, 2), b1 = random_input({5}, 3);
  expect_gradcheck([](const auto& v) { return layer_norm(v[0], {5}, v[1], v[2]); }, {x, w1, b1});
  auto w2 = random_input({2, 5}, 4), b2 = random_input({2, 5}, 5);
  expect_gradcheck([](const auto& v) { return layer_norm(v[0], {2, 5}, v[1], v[2]); }, {x, w2, b2});
  // No affine parameters, a non-contiguous input, and bias without weight.
  expect_gradcheck([](const auto& v) { return layer_norm(v[0].transpose(0, 2), {3}); }, {x});
  expect_gradcheck([](const auto& v) { return layer_norm(v[0], {5}, Tensor(), v[1]); }, {x, b1});
}

TEST(LayerNorm, LowPrecisionMatchesF64) {
  auto x = random_input({4, 40}, 7, -3, 3);
  auto w = random_input({40}, 8), b = random_input({40}, 9);
  auto fn = [](const auto& v) { return layer_norm(v[0], {40}, v[1], v[2]); };
  expect_matches_f64(fn, {x, w, b}, kFloat32, 1e-5, 1e-5);
  // bf16/f16: one rounding of the output; gradients of w/b sum 4 rounded rows.
  expect_matches_f64(fn, {x, w, b}, kBFloat16, 4e-2, 1.6e-2);
  expect_matches_f64(fn, {x, w, b}, kFloat16, 5e-3, 2e-3);
}

// Many rows: dw and db are summed in parts of rows during the dx pass and the parts added at
// the end. Against the same sums in f64, and the same bits whether or not x needs a gradient
// (then no dx is computed and only the sums run).
TEST(LayerNorm, WeightAndBiasGradientsOverManyRows) {
  for (int64_t rows : {3, 20, 1000}) {
    const int64_t n = 48;
    const Tensor x64 = random_input({rows, n}, 11, -2, 2).detach();
    const Tensor g64 = random_input({rows, n}, 12).detach();
    const Tensor w64 = random_input({n}, 13).detach(), b64 = random_input({n}, 14).detach();
    std::vector<double> want_dw(n, 0.0), want_db(n, 0.0);
    {
      const auto xv = vals(x64), gv = vals(g64);
      for (int64_t r = 0; r < rows; ++r) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < n; ++j) m += xv[r * n + j];
        m /= double(n);
        for (int64_t j = 0; j < n; ++j) v += (xv[r * n + j] - m) * (xv[r * n + j] - m);
        const double rs = 1 / std::sqrt(v / double(n) + 1e-5);
        for (int64_t j = 0; j < n; ++j) {
          want_dw[j] += gv[r * n + j] * (xv[r * n + j] - m) * rs;
          want_db[j] += gv[r * n + j];
        }
      }
    }
    std::vector<double> dw_bits, db_bits;
    for (bool x_needs_grad : {true, false}) {
      Tensor x = x64.to(kFloat32), g = g64.to(kFloat32);
      Tensor w = w64.to(kFloat32), b = b64.to(kFloat32);
      x.requires_grad_(x_needs_grad);
      w.requires_grad_(true);
      b.requires_grad_(true);
      sum(layer_norm(x, {n}, w, b) * g).backward();
      const auto dw = vals(w.grad()), db = vals(b.grad());
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_NEAR(dw[j], want_dw[j], 2e-6 * double(rows)) << rows << " rows, j " << j;
        ASSERT_NEAR(db[j], want_db[j], 2e-6 * double(rows)) << rows << " rows, j " << j;
      }
      if (x_needs_grad) {
        EXPECT_TRUE(x.grad().defined());
        dw_bits = dw;
        db_bits = db;
      } else {
        EXPECT_EQ(dw, dw_bits) << rows << " rows";
        EXPECT_EQ(db, db_bits) << rows << " rows";
      }
    }
  }
}

TEST(LayerNorm, LargeMeanNoCancellation) {
  // fp32 with mean 1e4 and spread 1: a one-pass E[x^2] - E[x]^2 loses every digit here.
  Tensor x = tensor<float>({10000.f, 10001.f, 10002.f, 10003.f});
  const auto y = vals(layer_norm(x, {4}, Tensor(), Tensor(), 0.0));
  EXPECT_NEAR(y[0], -1.5 / std::sqrt(1.25), 1e-5);
  EXPECT_NEAR(y[3], 1.5 / std::sqrt(1.25), 1e-5);
}

TEST(LayerNorm, AutocastRunsInFp32) {
  Tensor x = tensor_of({1, 2, 3, 4}, {1, 4}, kBFloat16);
  Tensor w = ones({4}, kFloat32).requires_grad_();
  Tensor b = zeros({4}, kFloat32).requires_grad_();
  Tensor y;
  {
    amp::autocast ac;
    y = layer_norm(x, {4}, w, b);
  }
  EXPECT_EQ(y.dtype(), kFloat32);
  sum(y * tensor<float>({1, 2, 3, 4})).backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
  EXPECT_NEAR(vals(b.grad())[3], 4.0, 0);
}

TEST(LayerNorm, Errors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { layer_norm(x, {4}); }, {"layer_norm", "[4]", "[2, 3]"});
  expect_error([&] { layer_norm(x, {3}, zeros({2})); }, {"layer_norm", "weight", "[2]"});
  expect_error([&] { layer_norm(x, {}); }, "normalized_shape");
  expect_error([&] { layer_norm(zeros({3}, kInt64), {3}); }, "int64");
}

}  // namespace
}  // namespace mantissa
