// silu, rotate_half and apply_rotary_embedding: values and gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/ops/rotary.h"
#include "mantissa/ops/silu.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(Silu, ValuesAndGradient) {
  const Tensor x = tensor_of({-3.0, -0.5, 0.0, 0.25, 2.0}, {5}, kFloat64);
  const auto y = vals(silu(x));
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = vals(x)[i];
    EXPECT_NEAR(y[i], v / (1 + std::exp(-v)), 1e-15);
  }
  expect_gradcheck([](const std::vector<Tensor>& in) { return silu(in[0]); },
                   {random_input({3, 4}, 1, -4, 4)});
}

TEST(Silu, ReducedFloatsRoundOnceFromFp32) {
  const Tensor x = tensor_of({-1.7, 0.3, 5.5, 100.0}, {4}, kBFloat16);
  const Tensor want = silu(x.to(kFloat32)).to(kBFloat16);
  EXPECT_EQ(silu(x).dtype(), kBFloat16);
  EXPECT_EQ(vals(silu(x)), vals(want));
  expect_error([] { silu(tensor_of({1}, {1}, kInt64)); }, "floating");
}

TEST(Rotary, RotateHalfSwapsHalvesWithSign) {
  const Tensor x = tensor_of({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, kFloat32);
  EXPECT_EQ(vals(rotate_half(x)), (std::vector<double>{-3, -4, 1, 2, -7, -8, 5, 6}));
  expect_error([] { rotate_half(zeros({2, 3})); }, "even");
}

TEST(Rotary, ApplyRotatesEachPairByItsAngle) {
  // One position, D = 4: pairs (x0, x2) and (x1, x3) rotate by angles a and b.
  const double a = 0.3, b = -1.1;
  const Tensor cos =
      tensor_of({std::cos(a), std::cos(b), std::cos(a), std::cos(b)}, {1, 4}, kFloat64);
  const Tensor sin =
      tensor_of({std::sin(a), std::sin(b), std::sin(a), std::sin(b)}, {1, 4}, kFloat64);
  const Tensor x = tensor_of({1, 2, 3, 4}, {1, 1, 4}, kFloat64);
  const auto y = vals(apply_rotary_embedding(x, cos, sin));
  EXPECT_NEAR(y[0], 1 * std::cos(a) - 3 * std::sin(a), 1e-15);
  EXPECT_NEAR(y[2], 3 * std::cos(a) + 1 * std::sin(a), 1e-15);
  EXPECT_NEAR(y[1], 2 * std::cos(b) - 4 * std::sin(b), 1e-15);
  EXPECT_NEAR(y[3], 4 * std::cos(b) + 2 * std::sin(b), 1e-15);
  expect_error([&] { apply_rotary_embedding(x, zeros({2, 4}, kFloat64), sin); }, "cos and sin");
}

TEST(Rotary, GradientsMatchFiniteDifferences) {
  Tensor cos = random_input({3, 6}, 7);
  Tensor sin = random_input({3, 6}, 8);
  cos.requires_grad_(false);
  sin.requires_grad_(false);
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return apply_rotary_embedding(in[0], cos, sin); },
      {random_input({2, 2, 3, 6}, 9)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return rotate_half(in[0]); },
                   {random_input({2, 6}, 10)});
}

}  // namespace
}  // namespace mantissa
