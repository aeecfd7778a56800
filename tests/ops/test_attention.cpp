// scaled_dot_product_attention: a hand-computed case, gradients (f64) with/without causal,
// explicit masks and scale, causality, dropout determinism, dtypes, autocast, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/amp/autocast.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(Attention, HandComputed) {
  // One query against two keys: weights softmax([1*1, 1*0] / sqrt(1)) = [e/(e+1), 1/(e+1)].
  Tensor q = tensor<double>({1}, {1, 1});
  Tensor k = tensor<double>({1, 0}, {2, 1});
  Tensor v = tensor<double>({10, 20}, {2, 1});
  const double e = std::exp(1.0);
  EXPECT_NEAR(vals(scaled_dot_product_attention(q, k, v))[0], (10 * e + 20) / (e + 1), 1e-13);
  // scale = 2: softmax([2, 0]).
  const double e2 = std::exp(2.0);
  EXPECT_NEAR(vals(scaled_dot_product_attention(q, k, v, Tensor(), 0, false, 2.0))[0],
              (10 * e2 + 20) / (e2 + 1), 1e-13);
  // Causal with L = 1: only key 0 is visible.
  EXPECT_NEAR(vals(scaled_dot_product_attention(q, k, v, Tensor(), 0, true))[0], 10, 1e-13);
  // A bool mask hiding key 0, and an additive mask equal to it.
  Tensor keep1 = tensor_of({0, 1}, {1, 2}, kBool);
  EXPECT_NEAR(vals(scaled_dot_product_attention(q, k, v, keep1))[0], 20, 1e-13);
  Tensor add1 = tensor<double>({-INFINITY, 0}, {1, 2});
  EXPECT_NEAR(vals(scaled_dot_product_attention(q, k, v, add1))[0], 20, 1e-13);
}

TEST(Attention, Gradcheck) {
  auto q = random_input({2, 2, 3, 4}, 21), k = random_input({2, 2, 5, 4}, 22),
       v = random_input({2, 2, 5, 3}, 23);
  expect_gradcheck([](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); },
                   {q, k, v});
  auto ks = random_input({2, 2, 3, 4}, 24), vs = random_input({2, 2, 3, 3}, 25);
  expect_gradcheck(
      [](const auto& x) {
        return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0, true, 0.7);
      },
      {q, ks, vs});
  // Bool mask broadcast over batch and heads, and a floating additive mask with its gradient.
  Tensor keep = tensor_of({1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1}, {3, 5}, kBool);
  expect_gradcheck(
      [keep](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], keep); },
      {q, k, v});
  auto bias = random_input({3, 5}, 26);
  expect_gradcheck(
      [](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); },
      {q, k, v, bias});
}

TEST(Attention, CausalOutputIgnoresFutureTokens) {
  Generator g(5);
  Tensor q = randn({1, 2, 6, 4}, kFloat32, &g), k = randn({1, 2, 6, 4}, kFloat32, &g),
         v = randn({1, 2, 6, 4}, kFloat32, &g);
  Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), 0, true);
  // Change keys, values and queries at positions 4 and 5.
  Tensor k2 = k.clone(), v2 = v.clone(), q2 = q.clone();
  k2.narrow(2, 4, 2).fill_(9);
  v2.narrow(2, 4, 2).fill_(-9);
  q2.narrow(2, 4, 2).fill_(3);
  Tensor y2 = scaled_dot_product_attention(q2, k2, v2, Tensor(), 0, true);
  EXPECT_EQ(vals(y.narrow(2, 0, 4)), vals(y2.narrow(2, 0, 4)));
  EXPECT_NE(vals(y.narrow(2, 4, 1)), vals(y2.narrow(2, 4, 1)));
  // Position 0 attends to itself only: its output is v[0].
  EXPECT_EQ(vals(y.select(2, 0)), vals(v.select(2, 0)));
}

TEST(Attention, DropoutDeterministicWithSeed) {
  Generator g(3);
  Tensor q = randn({2, 5, 4}, kFloat32, &g), k = randn({2, 5, 4}, kFloat32, &g),
         v = randn({2, 5, 4}, kFloat32, &g);
  Generator a(42), b(42), c(43);
  Tensor ya = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, false, std::nullopt, &a);
  Tensor yb = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, false, std::nullopt, &b);
  Tensor yc = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, false, std::nullopt, &c);
  Tensor y0 = scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(vals(ya), vals(yb));
  EXPECT_NE(vals(ya), vals(yc));
  EXPECT_NE(vals(ya), vals(y0));
  // Dropout 1 drops every weight: zeros.
  EXPECT_EQ(sum(abs(scaled_dot_product_attention(q, k, v, Tensor(), 1.0, false, std::nullopt, &a)))
                .item(),
            0.0);
}

TEST(Attention, LowPrecisionMatchesF64) {
  auto q = random_input({2, 6, 8}, 31, -2, 2), k = random_input({2, 6, 8}, 32, -2, 2),
       v = random_input({2, 6, 8}, 33);
  auto fn = [](const auto& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0, true);
  };
  expect_matches_f64(fn, {q, k, v}, kFloat32, 1e-5, 1e-5);
  expect_matches_f64(fn, {q, k, v}, kBFloat16, 6e-2, 3e-2);
}

TEST(Attention, AutocastRunsInBf16) {
  Generator g(9);
  Tensor w = randn({4, 4}, kFloat32, &g).requires_grad_();
  Tensor x = randn({1, 3, 4}, kFloat32, &g);
  Tensor y;
  {
    amp::autocast ac;
    Tensor q = matmul(x, w);
    y = scaled_dot_product_attention(q, x, x, Tensor(), 0, true);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  sum(y.to(kFloat32)).backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
}

TEST(Attention, Errors) {
  Tensor q = zeros({2, 3, 4}), k = zeros({2, 5, 4}), v = zeros({2, 5, 4});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, zeros({2, 5, 3}), v);
      },
      {"scaled_dot_product_attention", "[2, 3, 4]", "[2, 5, 3]"});
  expect_error([&] { scaled_dot_product_attention(q, k, zeros({2, 4, 4})); }, "sequence length");
  expect_error([&] { scaled_dot_product_attention(q, k, v, zeros({3, 4})); }, "(L, S) = (3, 5)");
  expect_error([&] { scaled_dot_product_attention(q, k, v, zeros({3, 5}), 0, true); }, "is_causal");
  expect_error([&] { scaled_dot_product_attention(q, k, v, Tensor(), 1.5); }, "dropout_p");
  expect_error([&] { scaled_dot_product_attention(q, k.to(kFloat64), v); }, "share a dtype");
}

}  // namespace
}  // namespace mantissa
