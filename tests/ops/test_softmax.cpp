#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mantissa/ops/softmax.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

// Reference values from torch.softmax / torch.log_softmax (float64).
TEST(SoftmaxOp, LastDimMatchesPyTorchIncludingMaskedEntry) {
  Tensor x = tensor<double>({1, 2, 3, -1, 0, -kInf}, {2, 3});
  expect_near_all(vals(softmax(x, 1)),
                  {0.09003057317038045, 0.2447284710547976, 0.6652409557748218, 0.26894142136999516,
                   0.7310585786300049, 0.0},
                  1e-15);
  expect_near_all(vals(log_softmax(x, -1)),
                  {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804,
                   -1.3132616875182228, -0.31326168751822286, -kInf},
                  1e-15);
  // f32 computes in fp32 and keeps its dtype.
  Tensor y = softmax(x.to(kFloat32), 1);
  EXPECT_EQ(y.dtype(), kFloat32);
  expect_near_all(vals(y),
                  {0.09003057317038045, 0.2447284710547976, 0.6652409557748218, 0.26894142136999516,
                   0.7310585786300049, 0.0},
                  1e-7);
}

TEST(SoftmaxOp, StridedDimMatchesPyTorch) {
  Tensor x = tensor<double>({1, 2, -1, 0}, {2, 2});
  expect_near_all(
      vals(softmax(x, 0)),
      {0.8807970779778823, 0.8807970779778823, 0.11920292202211755, 0.11920292202211755}, 1e-15);
}

TEST(SoftmaxOp, FullyMaskedRowGivesNaNLikePyTorch) {
  Tensor x = tensor<float>({-INFINITY, -INFINITY, -INFINITY, 0.0f, 1.0f, 2.0f}, {2, 3});
  for (const Tensor& y : {softmax(x, 1), log_softmax(x, 1)}) {
    const auto v = vals(y);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(v[i])) << i;
    for (int i = 3; i < 6; ++i) EXPECT_FALSE(std::isnan(v[i])) << i;
  }
  // Masked along a strided dimension too.
  const auto v0 = vals(softmax(tensor<float>({-INFINITY, 1, -INFINITY, 2}, {2, 2}), 0));
  EXPECT_TRUE(std::isnan(v0[0]) && std::isnan(v0[2]));
  EXPECT_NEAR(v0[1], 0.2689414213699951, 1e-7);
}

TEST(SoftmaxOp, LargeLogitsDoNotOverflow) {
  Tensor x = tensor<float>({1000.0f, 1001.0f}, {2});
  expect_near_all(vals(softmax(x, 0)), {0.2689414213699951, 0.7310585786300049}, 1e-7);
  // 1000 and 1001 are exact in f16 (not in bf16, whose spacing there is 4).
  expect_near_all(vals(log_softmax(x.to(kFloat16), 0)), {-1.3132616875182228, -0.31326168751822286},
                  1e-3);
}

TEST(SoftmaxOp, MiddleDimAgreesWithLastDimOnPermutedCopyAndNonContiguousInput) {
  Tensor x = random_input({2, 5, 3}, 7, -3, 3).detach();
  for (bool log : {false, true}) {
    auto op = [log](const Tensor& t, int64_t d) { return log ? log_softmax(t, d) : softmax(t, d); };
    Tensor mid = op(x, 1);
    Tensor last = op(x.transpose(1, 2).contiguous(), 2).transpose(1, 2);
    expect_near_all(vals(mid), vals(last), 1e-15);
    // A transposed (non-contiguous) input gives the same numbers as its contiguous copy.
    Tensor xt = x.transpose(0, 2);
    expect_near_all(vals(op(xt, 0)), vals(op(xt.contiguous(), 0)), 0.0);
  }
  // Each softmax slice sums to one.
  const auto s = vals(softmax(x, 1));
  for (int o = 0; o < 2; ++o)
    for (int j = 0; j < 3; ++j) {
      double sum = 0;
      for (int k = 0; k < 5; ++k) sum += s[(o * 5 + k) * 3 + j];
      EXPECT_NEAR(sum, 1.0, 1e-15);
    }
}

// Above the parallel grain rows are split across threads: each row must equal the same row
// computed alone (serial path), bit for bit.
TEST(SoftmaxOp, ParallelPathMatchesRowByRow) {
  Generator g(3);
  Tensor x = uniform({48, 1024}, -4, 4, kFloat32, &g);
  for (bool log : {false, true}) {
    Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    for (int64_t r : {0, 23, 47}) {
      Tensor row = x[r];
      EXPECT_EQ(vals(y[r]), vals(log ? log_softmax(row, 0) : softmax(row, 0))) << r;
    }
  }
  // Strided dimension with many outer blocks.
  Tensor z = uniform({64, 8, 64}, -4, 4, kFloat32, &g);
  Tensor yz = softmax(z, 1);
  EXPECT_EQ(vals(yz[63]), vals(softmax(z[63], 0)));
}

TEST(SoftmaxOp, ScalarAndEmptyInputs) {
  EXPECT_EQ(softmax(scalar_tensor(3.5), 0).item(), 1.0);
  EXPECT_EQ(log_softmax(scalar_tensor(3.5), -1).item(), 0.0);
  EXPECT_EQ(softmax(zeros({0, 4}), 1).shape(), (Shape{0, 4}));
  EXPECT_EQ(softmax(zeros({3, 0}), 1).shape(), (Shape{3, 0}));
}

TEST(SoftmaxOp, RejectsBadDimAndDtype) {
  EXPECT_THROW(softmax(zeros({2, 3}), 2), Error);
  EXPECT_THROW(log_softmax(zeros({2, 3}), -3), Error);
  EXPECT_THROW(softmax(arange(4), 0), Error);
  EXPECT_THROW(log_softmax(zeros({2}, kFloat8_e4m3fn), 0), Error);
}

TEST(SoftmaxOp, GradcheckF64) {
  for (int64_t dim : {-1, 1, 0}) {
    expect_gradcheck([dim](const auto& in) { return softmax(in[0], dim); },
                     {random_input({3, 4, 5}, 11, -2, 2)});
    expect_gradcheck([dim](const auto& in) { return log_softmax(in[0], dim); },
                     {random_input({3, 4, 5}, 12, -2, 2)});
  }
}

TEST(SoftmaxOp, LowPrecisionMatchesF64) {
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    for (int64_t dim : {-1, 0}) {
      SCOPED_TRACE(std::string(dt.name()) + " dim " + std::to_string(dim));
      expect_matches_f64([dim](const auto& in) { return softmax(in[0], dim); },
                         {random_input({4, 6}, 21, -3, 3)}, dt, tol.atol, tol.rtol);
      // log_softmax values reach ~ -5; its error is relative to |lse| ~ 2, so use 2x atol.
      expect_matches_f64([dim](const auto& in) { return log_softmax(in[0], dim); },
                         {random_input({4, 6}, 22, -3, 3)}, dt, 2 * tol.atol, tol.rtol);
    }
  }
}

// The backward keeps g * y - y * sum(g * y): a constant upstream gradient gives exactly 0 in
// exact arithmetic; log_softmax with g = one-hot gives one-hot - softmax.
TEST(SoftmaxOp, BackwardFormulas) {
  Tensor x = tensor<double>({0.5, -1.0, 2.0}, {3});
  x.requires_grad_();
  log_softmax(x, 0).backward(tensor<double>({0, 1, 0}));
  const auto p = vals(softmax(x.detach(), 0));
  expect_near_all(vals(x.grad()), {-p[0], 1 - p[1], -p[2]}, 1e-15);
  x.reset_grad();
  softmax(x, 0).backward(tensor<double>({2, 2, 2}));
  expect_near_all(vals(x.grad()), {0, 0, 0}, 1e-15);
}

}  // namespace
}  // namespace mantissa
