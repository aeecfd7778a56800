// silu, rotate_half and apply_rotary_embedding: values and gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "mantissa/ops/elementwise.h"
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

// cos and sin tables (T, D) of random angles, float32 as RotaryTable gives them.
std::pair<Tensor, Tensor> tables(int64_t T, int64_t D, uint64_t seed) {
  const auto a = vals(random_input({T, D}, seed, -3, 3));
  std::vector<double> c, s;
  for (double v : a) {
    c.push_back(std::cos(v));
    s.push_back(std::sin(v));
  }
  return {tensor_of(c, {T, D}, kFloat32), tensor_of(s, {T, D}, kFloat32)};
}

// The composed form the fused CPU kernel reproduces: each product rounded to x's dtype, then
// the sum.
Tensor composed_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  return add(mul(x, cos.to(x.dtype())), mul(rotate_half(x), sin.to(x.dtype())));
}

// Same values, +0 and -0 taken as equal (a gradient the composed graph sums with zero padding
// may carry the other zero's sign).
void expect_same_values(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  const auto g = vals(got), w = vals(want);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << "element " << i;
}

TEST(Rotary, FusedMatchesTheComposedFormBitForBitOnAStridedInput) {
  // q as the attention makes it: (B, T, H, D) viewed as (B, H, T, D), D contiguous.
  const auto [cos, sin] = tables(5, 8, 21);
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    SCOPED_TRACE(dt.name());
    const Tensor base = random_input({2, 5, 3, 8}, 22, -4, 4).to(dt);
    const Tensor x = base.transpose(1, 2);
    ASSERT_FALSE(x.is_contiguous());
    expect_same_values(apply_rotary_embedding(x, cos, sin), composed_rotary(x, cos, sin));

    Tensor xf = x.detach().requires_grad_(true), xc = x.detach().requires_grad_(true);
    const Tensor g = random_input({2, 3, 5, 8}, 23, -2, 2).to(dt);
    apply_rotary_embedding(xf, cos, sin).backward(g);
    composed_rotary(xc, cos, sin).backward(g);
    expect_same_values(xf.grad(), xc.grad());
  }
}

TEST(Rotary, FusedGradientMatchesFiniteDifferences) {
  // float32 tables take the fused kernel; float64 x keeps the check exact to its precision.
  const auto [cos, sin] = tables(3, 6, 31);
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return apply_rotary_embedding(in[0], cos, sin); },
      {random_input({2, 2, 3, 6}, 32)});
}

TEST(Silu, VectorPathsMatchTheFormulaInEveryFloatDtype) {
  const Tensor x64 = random_input({4, 37}, 41, -12, 12);
  const Tensor g64 = random_input({4, 37}, 42, -2, 2);
  const auto xs = vals(x64), gs = vals(g64);
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dt.name());
    const Tensor x = x64.detach().to(dt).requires_grad_(true);
    const Tensor y = silu(x);
    // The forward is x * sigmoid(x) computed in fp32 and rounded once.
    const Tensor xw = x.detach().to(kFloat32);
    EXPECT_EQ(vals(y), vals(mul(xw, sigmoid(xw)).to(dt)));
    y.backward(g64.detach().to(dt));
    const auto dx = vals(x.grad()), xr = vals(x.detach()), gr = vals(g64.to(dt));
    // One rounding to dt of the fp32 derivative (within 2^-7 relative for bf16).
    const double rel = dt == kBFloat16 ? 1.0 / 128 : (dt == kFloat16 ? 1.0 / 1024 : 1e-6);
    for (size_t i = 0; i < dx.size(); ++i) {
      const double s = 1.0 / (1.0 + std::exp(-xr[i]));
      const double want = gr[i] * s * (1.0 + xr[i] * (1.0 - s));
      ASSERT_NEAR(dx[i], want, rel * std::fabs(want) + 1e-30) << "element " << i;
    }
  }
}

TEST(SiluMul, FusedEqualsTheComposedOpsBitForBit) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dt.name());
    // Odd length: the last chunk is partial; wide values reach silu's flat and steep parts.
    const Tensor gate = random_input({3, 1501}, 51, -14, 14).detach().to(dt);
    const Tensor up = random_input({3, 1501}, 52, -3, 3).detach().to(dt);
    const Tensor go = random_input({3, 1501}, 53, -2, 2).detach().to(dt);
    Tensor gf = gate.clone().requires_grad_(true), uf = up.clone().requires_grad_(true);
    Tensor gc = gate.clone().requires_grad_(true), uc = up.clone().requires_grad_(true);
    const Tensor yf = silu_mul(gf, uf), yc = mul(silu(gc), uc);
    expect_same_values(yf, yc);
    yf.backward(go);
    yc.backward(go);
    expect_same_values(gf.grad(), gc.grad());
    expect_same_values(uf.grad(), uc.grad());
  }
}

TEST(SiluMul, OneGradientAloneAndTheComposedFallback) {
  const Tensor gate = random_input({4, 9}, 61, -5, 5).detach().to(kBFloat16);
  Tensor up = random_input({4, 9}, 62, -2, 2).detach().to(kBFloat16).requires_grad_(true);
  silu_mul(gate, up).backward(ones({4, 9}, kBFloat16));
  EXPECT_EQ(vals(up.grad()), vals(silu(gate)));
  // float64 and a transposed view take the composed ops; gradients against finite differences.
  expect_gradcheck([](const std::vector<Tensor>& in) { return silu_mul(in[0], in[1]); },
                   {random_input({3, 4}, 63, -4, 4), random_input({3, 4}, 64)});
  expect_gradcheck([](const std::vector<Tensor>& in) { return silu_mul(in[0].t(), in[1].t()); },
                   {random_input({3, 4}, 65, -4, 4), random_input({3, 4}, 66)});
}

}  // namespace
}  // namespace mantissa
