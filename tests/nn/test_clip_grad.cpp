// clip_grad_norm_ / clip_grad_value_ against hand-computed norms and coefficients (PyTorch's
// formula: coef = min(max_norm * (1 / (total + 1e-6)), 1) in the norm's dtype, applied always).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "mantissa/core/generator.h"
#include "mantissa/nn/clip_grad.h"
#include "support/test_util.h"

namespace mantissa::nn::utils {
namespace {

using namespace mantissa::testing;

// A parameter holding `grad` as its gradient.
Tensor with_grad(const std::vector<double>& grad, DType dt = kFloat32) {
  const Shape shape = {static_cast<int64_t>(grad.size())};
  Tensor p = zeros(shape, dt);
  p.requires_grad_(true);
  p.set_grad(tensor_of(grad, shape, dt));
  return p;
}

// The clip coefficient as PyTorch computes it for an fp32 norm.
float coef_f32(float total, double max_norm) {
  const float c = (1.0f / (total + static_cast<float>(1e-6))) * static_cast<float>(max_norm);
  return c > 1.0f ? 1.0f : c;
}

std::vector<float> scaled(const std::vector<double>& g, float c) {
  std::vector<float> out;
  for (double v : g) out.push_back(static_cast<float>(v) * c);
  return out;
}

TEST(ClipGradNorm, TwoNormAcrossParameters) {
  const std::vector<double> g1 = {3.0, -4.0}, g2 = {12.0};
  Tensor a = with_grad(g1), b = with_grad(g2), none = zeros({3});
  none.requires_grad_(true);  // no gradient: skipped
  Tensor total = clip_grad_norm_({a, none, b}, 6.5);
  EXPECT_EQ(total.dtype(), kFloat32);
  EXPECT_EQ(total.dim(), 0);
  EXPECT_EQ(total.item(), 13.0);  // sqrt(5^2 + 12^2)
  const float c = coef_f32(13.0f, 6.5);
  EXPECT_NEAR(c, 0.5, 1e-7);
  EXPECT_EQ(a.grad().to_vector<float>(), scaled(g1, c));
  EXPECT_EQ(b.grad().to_vector<float>(), scaled(g2, c));
  EXPECT_FALSE(none.grad().defined());
}

// A negative max_norm is refused, the gradients untouched (torch multiplies them by a negative
// coefficient: the next step goes uphill).
TEST(ClipGradNorm, NegativeMaxNormIsRefused) {
  Tensor a = with_grad({3.0, -4.0});
  expect_error([&] { clip_grad_norm_({a}, -1.0); }, "max_norm must be >= 0, got -1");
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3.0f, -4.0f}));
}

// A NaN max_norm is refused as what it is (it passed for "negative" before), the gradients
// untouched; inf is a number and turns clipping off.
// A NaN clip_value clipped nothing (every comparison with NaN is false) without a word.
TEST(ClipGradValue, NaNClipValueIsRefused) {
  Tensor a = with_grad({3.0, -4.0});
  mantissa::testing::expect_error([&] { clip_grad_value_({a}, kNaN); },
                                  "[clip_grad_value_] clip_value must be a number, got nan");
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3.0f, -4.0f}));
  clip_grad_value_({a}, 1.0);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{1.0f, -1.0f}));
}

TEST(ClipGradNorm, NaNMaxNormIsRefusedAsNotANumber) {
  Tensor a = with_grad({3.0, -4.0});
  const std::string msg = mantissa::testing::error_of([&] { clip_grad_norm_({a}, kNaN); });
  EXPECT_NE(msg.find("[clip_grads_with_norm_] max_norm must be a number >= 0 (inf turns "
                     "clipping off), got nan"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("negative"), std::string::npos) << msg;
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3.0f, -4.0f}));
  EXPECT_EQ(clip_grad_norm_({a}, kInf).item(), 5.0);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3.0f, -4.0f}));
}

TEST(ClipGradNorm, InfinityNorm) {
  const std::vector<double> g1 = {-7.0, 2.0}, g2 = {3.0, 5.0, -6.5};
  Tensor a = with_grad(g1), b = with_grad(g2);
  Tensor total = clip_grad_norm_({a, b}, 3.5, kInf);
  EXPECT_EQ(total.item(), 7.0);
  const float c = coef_f32(7.0f, 3.5);
  EXPECT_EQ(a.grad().to_vector<float>(), scaled(g1, c));
  EXPECT_EQ(b.grad().to_vector<float>(), scaled(g2, c));
}

TEST(ClipGradNorm, OneNormAndGeneralP) {
  Tensor a = with_grad({1.0, -2.0}), b = with_grad({3.0});
  EXPECT_EQ(clip_grad_norm_({a, b}, 100.0, 1.0).item(), 6.0);
  // p = 3, two stages: per-tensor norms rounded to fp32, then their 3-norm.
  Tensor c = with_grad({1.0, -2.0}), d = with_grad({3.0});
  const double n1 = static_cast<float>(std::cbrt(9.0));
  const double expected = static_cast<float>(std::pow(n1 * n1 * n1 + 27.0, 1.0 / 3.0));
  EXPECT_EQ(clip_grad_norm_({c, d}, 100.0, 3.0).item(), expected);
  EXPECT_NEAR(expected, std::cbrt(36.0), 1e-6);
  // norm_type 0 counts non-zero entries per tensor (2 and 0 here), then the non-zero tensor
  // norms: PyTorch's two-stage vector_norm(ord=0) quirk gives the number of tensors with a
  // non-zero gradient, 1 even for a single tensor with two non-zeros.
  Tensor e = with_grad({0.0, 2.0, 0.0, -1.0}), f = with_grad({0.0}), h = with_grad({4.0});
  EXPECT_EQ(get_total_norm({e.grad(), f.grad()}, 0.0).item(), 1.0);
  EXPECT_EQ(get_total_norm({e.grad()}, 0.0).item(), 1.0);
  EXPECT_EQ(get_total_norm({e.grad(), f.grad(), h.grad()}, 0.0).item(), 2.0);
}

TEST(ClipGradNorm, BelowMaxNormMultipliesByOneExactly) {
  const std::vector<double> g = {0.1, -0.2, 0.3};
  Tensor a = with_grad(g);
  Tensor total = clip_grad_norm_({a}, 1.0);
  EXPECT_FLOAT_EQ(total.item(), std::sqrt(0.14));
  EXPECT_EQ(a.grad().to_vector<float>(), scaled(g, 1.0f));
}

TEST(ClipGradNorm, Float64GradientsGiveFloat64Norm) {
  const std::vector<double> g = {0.1, 0.2, 0.3, -0.4};
  Tensor a = with_grad(g, kFloat64);
  Tensor total = clip_grad_norm_({a}, 0.25);
  EXPECT_EQ(total.dtype(), kFloat64);
  const double n = std::sqrt(0.1 * 0.1 + 0.2 * 0.2 + 0.3 * 0.3 + 0.4 * 0.4);
  EXPECT_NEAR(total.item(), n, 1e-16);
  const double c = (1.0 / (total.item() + 1e-6)) * 0.25;
  const auto out = a.grad().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(out[i], g[i] * c);
  // Mixed f32 + f64 gradients: the norm is f64.
  Tensor b = with_grad({1.0}), d = with_grad({1.0}, kFloat64);
  EXPECT_EQ(clip_grad_norm_({b, d}, 10.0).dtype(), kFloat64);
}

TEST(ClipGradNorm, ReducedPrecisionGradientsNormInFp32) {
  for (DType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    // 300^2 * 4 overflows fp16 if squared in fp16; the norm is 600 in fp32.
    Tensor a = with_grad({300.0, -300.0, 300.0, 300.0}, dt);
    Tensor total = clip_grad_norm_({a}, 100.0);
    EXPECT_EQ(total.dtype(), kFloat32);
    EXPECT_EQ(total.item(), 600.0);
    const float c = coef_f32(600.0f, 100.0);
    // x * c in fp32, rounded once to the gradient dtype.
    const double expected = tensor_of({300.0f * c}, {1}, dt).item();
    EXPECT_EQ(a.grad().to_vector<double>()[0], expected);
    EXPECT_EQ(a.grad().to_vector<double>()[1], -expected);
    EXPECT_EQ(a.grad().dtype(), dt);
  }
}

TEST(ClipGradNorm, NonFiniteNorms) {
  // NaN: the norm is NaN and every gradient becomes NaN (multiplied always).
  Tensor a = with_grad({1.0, kNaN}), b = with_grad({2.0});
  EXPECT_TRUE(std::isnan(clip_grad_norm_({a, b}, 1.0).item()));
  EXPECT_TRUE(std::isnan(b.grad().item()));
  // inf: the coefficient is 0, finite entries become 0 and inf * 0 is NaN.
  Tensor c = with_grad({1.0, kInf}), d = with_grad({2.0});
  EXPECT_EQ(clip_grad_norm_({c, d}, 1.0).item(), kInf);
  EXPECT_EQ(d.grad().item(), 0.0);
  EXPECT_EQ(c.grad().to_vector<float>()[0], 0.0f);
  EXPECT_TRUE(std::isnan(c.grad().to_vector<float>()[1]));
  // The inf-norm propagates NaN as well.
  Tensor e = with_grad({kNaN, 5.0});
  EXPECT_TRUE(std::isnan(clip_grad_norm_({e}, 1.0, kInf).item()));
  // error_if_nonfinite: throws and leaves the gradients alone.
  Tensor f = with_grad({1.0, kInf}), g = with_grad({2.0});
  expect_error(
      [&] {
        clip_grad_norm_({f, g}, 1.0, 2.0, true);
      },
      "[clip_grad_norm_] The total norm of order 2.0 for gradients from `parameters` is "
      "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
      "by the non-finite norm anyway, set `error_if_nonfinite=False`");
  EXPECT_EQ(g.grad().item(), 2.0);
  expect_error([&] { clip_grad_norm_({f}, 1.0, kInf, true); }, "order inf for");
  Tensor h = with_grad({kNaN});
  expect_error([&] { clip_grad_norm_({h}, 1.0, 0.5, true); }, "order 0.5 for");
  // A finite norm does not throw.
  Tensor k = with_grad({3.0, 4.0});
  EXPECT_EQ(clip_grad_norm_({k}, 1.0, 2.0, true, true).item(), 5.0);
}

TEST(ClipGradNorm, NoGradientsReturnsZeroAndErrors) {
  Tensor p = zeros({2});
  p.requires_grad_(true);
  Tensor total = clip_grad_norm_({p}, 1.0);
  EXPECT_EQ(total.item(), 0.0);
  EXPECT_EQ(total.dtype(), kFloat32);
  EXPECT_EQ(clip_grad_norm_({}, 1.0).item(), 0.0);
  expect_error([&] { clip_grad_norm_({Tensor()}, 1.0); }, "undefined");
}

TEST(ClipGradNorm, LargeGradientsAreAccurateAndDeterministic) {
  const int64_t n = 300007;
  Generator gen(11);
  Tensor p = zeros({n});
  p.requires_grad_(true);
  p.set_grad(uniform({n}, -1.0, 1.0, kFloat32, &gen));
  const auto v = p.grad().to_vector<double>();
  double ref = 0;
  for (double x : v) ref += x * x;
  ref = std::sqrt(ref);
  const Tensor t1 = get_total_norm({p.grad()});
  const Tensor t2 = get_total_norm({p.grad()});
  EXPECT_EQ(t1.item(), static_cast<double>(static_cast<float>(ref)));  // double accumulation
  EXPECT_EQ(t1.item(), t2.item());
  // Splitting the work does not change get_total_norm + clip_grads_with_norm_ = clip_grad_norm_.
  Tensor q = zeros({n});
  q.requires_grad_(true);
  q.set_grad(p.grad().clone());
  clip_grads_with_norm_({p}, 10.0, t1);
  EXPECT_EQ(clip_grad_norm_({q}, 10.0).item(), t1.item());
  EXPECT_EQ(p.grad().to_vector<float>(), q.grad().to_vector<float>());
  const float c = coef_f32(static_cast<float>(t1.item()), 10.0);
  EXPECT_EQ(q.grad().to_vector<float>()[n - 1], static_cast<float>(v[n - 1]) * c);
}

TEST(ClipGradNorm, NonContiguousGradientIsClippedInPlace) {
  Tensor p = zeros({2, 2});
  p.requires_grad_(true);
  p.set_grad(tensor_of({3.0, 0.0, 4.0, 0.0}, {2, 2}, kFloat32).t());  // [[3, 4], [0, 0]]
  ASSERT_FALSE(p.grad().is_contiguous());
  EXPECT_EQ(clip_grad_norm_({p}, 2.5).item(), 5.0);
  const float c = coef_f32(5.0f, 2.5);
  EXPECT_EQ(p.grad().to_vector<float>(), (std::vector<float>{3.0f * c, 4.0f * c, 0.0f, 0.0f}));
}

TEST(ClipGradValue, ClampsAndKeepsNaN) {
  Tensor a = with_grad({-3.0, -0.5, 0.2, 2.5, kNaN, 1.0});
  Tensor none = zeros({1});
  clip_grad_value_({a, none}, 1.0);
  const auto v = a.grad().to_vector<float>();
  EXPECT_EQ(v[0], -1.0f);
  EXPECT_EQ(v[1], -0.5f);
  EXPECT_EQ(v[2], 0.2f);
  EXPECT_EQ(v[3], 1.0f);
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(v[5], 1.0f);

  Tensor d = with_grad({-3.0, 0.05, 2.0}, kFloat64);
  clip_grad_value_({d}, 0.1);
  EXPECT_EQ(d.grad().to_vector<double>(), (std::vector<double>{-0.1, 0.05, 0.1}));
}

TEST(ClipGradValue, BoundsRoundedToGradientDtypeAndNegativeValue) {
  Tensor h = with_grad({5.0, -5.0, 0.01}, kFloat16);
  clip_grad_value_({h}, 0.1);
  const double b = tensor_of({0.1}, {1}, kFloat16).item();  // 0.0999755859375
  EXPECT_EQ(b, 0.0999755859375);
  EXPECT_EQ(h.grad().to_vector<double>(),
            (std::vector<double>{b, -b, tensor_of({0.01}, {1}, kFloat16).item()}));
  Tensor bf = with_grad({5.0, -5.0}, kBFloat16);
  clip_grad_value_({bf}, 0.1);
  const double bb = tensor_of({0.1}, {1}, kBFloat16).item();
  EXPECT_EQ(bf.grad().to_vector<double>(), (std::vector<double>{bb, -bb}));
  // min > max (negative clip_value): torch.clamp gives max everywhere.
  Tensor n = with_grad({5.0, -5.0, 0.0});
  clip_grad_value_({n}, -2.0);
  EXPECT_EQ(n.grad().to_vector<float>(), (std::vector<float>{-2.0f, -2.0f, -2.0f}));
}

}  // namespace
}  // namespace mantissa::nn::utils
