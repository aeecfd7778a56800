#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/node.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/softmax.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

// The logits and targets of every PyTorch reference below (float64; target 1 of row 1 is
// ignore_index -100).
Tensor logits() {
  return tensor<double>({0.5, -1.25, 2.0, 0.0, 1.5, 0.25, -0.75, 3.0, -2.0, 1.0, 0.5, -0.5},
                        {3, 4});
}
Tensor targets() { return tensor<int64_t>({1, -100, 3}); }

// d(loss)/d(logits) with reduction none (upstream ones) or sum, from PyTorch.
const std::vector<double> kGradNoSmoothing = {
    0.15969355003210825, -0.9722494220673196, 0.7156968377823844, 0.09685903425282705, 0, 0, 0, 0,
    0.02649026274135227, 0.5320711503963734,  0.3227174658639722, -0.8812788790016979};
const std::vector<double> kGradSmoothing = {
    0.13469355003210826,  -0.8972494220673196, 0.6906968377823843, 0.07185903425282705, 0, 0, 0, 0,
    0.001490262741352267, 0.5070711503963734,  0.2977174658639722, -0.8062788790016979};

struct CeCase {
  Reduction reduction;
  double smoothing;
  std::vector<double> loss;
  std::vector<double> grad;  // for upstream gradient ones
};

TEST(LossOp, CrossEntropyMatchesPyTorchForEachReductionAndLabelSmoothing) {
  auto half = [](std::vector<double> g) {  // mean over the 2 non-ignored rows
    for (double& v : g) v /= 2;
    return g;
  };
  const std::vector<CeCase> cases = {
      {Reduction::kNone, 0.0, {3.5844986126036624, 0.0, 2.1309780572365025}, kGradNoSmoothing},
      {Reduction::kNone, 0.1, {3.4282486126036624, 0.0, 2.1059780572365026}, kGradSmoothing},
      {Reduction::kMean, 0.0, {2.8577383349200822}, half(kGradNoSmoothing)},
      {Reduction::kMean, 0.1, {2.7671133349200825}, half(kGradSmoothing)},
      {Reduction::kSum, 0.0, {5.7154766698401644}, kGradNoSmoothing},
      {Reduction::kSum, 0.1, {5.534226669840165}, kGradSmoothing},
  };
  for (const auto& c : cases) {
    for (DType dt : {kFloat64, kFloat32}) {
      SCOPED_TRACE(std::string(dt.name()) + " smoothing " + std::to_string(c.smoothing) +
                   " reduction " + std::to_string(static_cast<int>(c.reduction)));
      const double tol = dt == kFloat64 ? 1e-14 : 2e-6;
      Tensor x = logits().to(dt).detach();
      x.requires_grad_();
      Tensor loss = cross_entropy(x, targets(), {-100, c.reduction, c.smoothing});
      EXPECT_EQ(loss.dtype(), dt);
      EXPECT_EQ(loss.shape(), c.reduction == Reduction::kNone ? Shape{3} : Shape{});
      expect_near_all(vals(loss), c.loss, tol);
      loss.backward(ones(loss.shape(), dt));
      expect_near_all(vals(x.grad()), c.grad, tol);
    }
  }
}

TEST(LossOp, CrossEntropyCustomIgnoreIndexAndOneDimInput) {
  // PyTorch: F.cross_entropy(x, [2, 0, 3], ignore_index=2, label_smoothing=0.1).
  Tensor x = logits();
  x.requires_grad_();
  Tensor loss = cross_entropy(x, tensor<int64_t>({2, 0, 3}), {2, Reduction::kMean, 0.1});
  EXPECT_NEAR(loss.item(), 1.9632223074226758, 1e-14);
  loss.backward();
  expect_near_all(vals(x.grad()),
                  {0, 0, 0, 0, -0.37737323139537293, 0.011889227546433099, -0.0035277045996150447,
                   0.36901170844855485, 0.0007451313706761335, 0.2535355751981867,
                   0.1488587329319861, -0.40313943950084896},
                  1e-14);
  // (C) logits with a 0-dim target: F.cross_entropy(x[0], tensor(2), label_smoothing=0.1).
  Tensor row = logits()[0];
  EXPECT_NEAR(cross_entropy(row, scalar_tensor(2, kInt64), {-100, Reduction::kMean, 0.1}).item(),
              0.5032486126036626, 1e-14);
  Tensor none = cross_entropy(row, scalar_tensor(2, kInt64), {-100, Reduction::kNone, 0.1});
  EXPECT_EQ(none.shape(), Shape{});
  // int32 targets are accepted.
  EXPECT_NEAR(cross_entropy(logits(), tensor<int32_t>({1, -100, 3})).item(), 2.8577383349200822,
              1e-14);
}

TEST(LossOp, AllTargetsIgnoredGivesNaNMeanAndZeroSum) {
  Tensor t = tensor<int64_t>({-100, -100, -100});
  EXPECT_TRUE(std::isnan(cross_entropy(logits(), t).item()));
  EXPECT_TRUE(std::isnan(cross_entropy(logits(), t, {-100, Reduction::kMean, 0.1}).item()));
  EXPECT_EQ(cross_entropy(logits(), t, {-100, Reduction::kSum, 0.0}).item(), 0.0);
  // The sum's gradient is all zeros.
  Tensor x = logits();
  x.requires_grad_();
  cross_entropy(x, t, {-100, Reduction::kSum, 0.1}).backward();
  for (double v : vals(x.grad())) EXPECT_EQ(v, 0.0);
}

TEST(LossOp, CrossEntropyValidatesTargetsShapesAndDtypes) {
  expect_error(
      [] {
        cross_entropy(logits(), tensor<int64_t>({1, 4, 0}));
      },
      {"target 4", "4 classes"});
  expect_error(
      [] {
        cross_entropy(logits(), tensor<int64_t>({1, -1, 0}));
      },
      {"target -1", "4 classes"});
  expect_error([] { cross_entropy(logits(), tensor<double>({1, 2, 0})); }, {"integer", "float64"});
  expect_error([] { cross_entropy(logits(), tensor<int64_t>({1, 2})); }, {"[2]", "[3, 4]"});
  expect_error(
      [] {
        cross_entropy(logits(), tensor<int64_t>({1, 2, 3}, {3, 1}));
      },
      {"[3, 1]", "[3, 4]"});
  expect_error([] { cross_entropy(zeros({2, 3, 4}), tensor<int64_t>({1, 2})); }, {"[2, 3, 4]"});
  expect_error([] { cross_entropy(arange(4), scalar_tensor(1, kInt64)); }, {"floating"});
  expect_error(
      [] {
        cross_entropy(logits(), targets(), {-100, Reduction::kMean, 1.5});
      },
      {"label_smoothing"});
  expect_error([] { nll_loss(logits(), tensor<int64_t>({1, 9, 0})); }, {"target 9", "4 classes"});
}

TEST(LossOp, CrossEntropyGradcheckF64) {
  Tensor t = tensor<int64_t>({1, -100, 3, 0});
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    for (double eps : {0.0, 0.1}) {
      expect_gradcheck(
          [&](const auto& in) {
            return cross_entropy(in[0], in[1], {-100, r, eps});
          },
          {random_input({4, 5}, 31, -2, 2), t});
    }
  }
  expect_gradcheck(
      [](const auto& in) {
        return cross_entropy(in[0], scalar_tensor(3, kInt64), {-100, Reduction::kMean, 0.2});
      },
      {random_input({5}, 32, -2, 2)});
}

TEST(LossOp, CrossEntropyLowPrecisionMatchesF64) {
  Tensor t = tensor<int64_t>({1, -100, 3, 0, 2, 4});
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    const auto tol = tolerance_for(dt);
    for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
      expect_matches_f64(
          [&](const auto& in) {
            return cross_entropy(in[0], in[1], {-100, r, 0.1});
          },
          {random_input({6, 5}, 33, -3, 3), t}, dt, 2 * tol.atol, tol.rtol);
    }
  }
}

// Above the parallel grain rows are split across threads; each row's loss equals the same row
// computed alone, and the mean is the same for any thread count (fixed chunking).
TEST(LossOp, CrossEntropyParallelPathMatchesRowByRow) {
  Generator g(4);
  Tensor x = uniform({64, 1000}, -4, 4, kFloat32, &g);
  Tensor t = randint(0, 1000, {64}, kInt64, &g);
  const auto per_row = vals(cross_entropy(x, t, {-100, Reduction::kNone, 0.1}));
  const auto tv = t.to_vector<int64_t>();
  for (int64_t r : {0, 31, 63}) {
    EXPECT_EQ(per_row[r], cross_entropy(x[r], scalar_tensor(static_cast<double>(tv[r]), kInt64),
                                        {-100, Reduction::kNone, 0.1})
                              .item())
        << r;
  }
  float sum = 0;
  for (double v : per_row) sum += static_cast<float>(v);
  EXPECT_EQ(cross_entropy(x, t, {-100, Reduction::kSum, 0.1}).item(), sum);
}

// Rows of 3000 classes (several blocks of the vectorised maximum), the largest logit in the
// last block, with and without label smoothing: fp32 and bf16 rows (whose loss is rounded to
// bf16) against the same values in f64; a NaN anywhere in a row makes that row's loss NaN and
// leaves the others.
TEST(LossOp, CrossEntropyWideRowsMatchF64AndNaNRowsStayNaN) {
  const int64_t C = 3000;
  Generator g(7);
  Tensor x = uniform({3, C}, -5, 5, kFloat64, &g);
  double* p = x.data<double>();
  p[C - 3] = 9;           // row 0's maximum, in the last block
  p[C + 17] = 8;          // row 1's, in the first
  p[2 * C + 2500] = NAN;  // row 2
  const Tensor t = tensor<int64_t>({4, C - 3, 1});
  for (DType dt : {kFloat32, kBFloat16}) {
    for (double eps : {0.0, 0.1}) {
      SCOPED_TRACE(std::string(dt.name()) + " eps " + std::to_string(eps));
      const Tensor xd = x.to(dt);
      const auto got = vals(cross_entropy(xd, t, {-100, Reduction::kNone, eps}));
      const auto want = vals(cross_entropy(xd.to(kFloat64), t, {-100, Reduction::kNone, eps}));
      const double rel = dt == kFloat32 ? 1e-5 : 4e-3;  // bf16 rounds the loss itself
      EXPECT_NEAR(got[0], want[0], rel * std::abs(want[0]));
      EXPECT_NEAR(got[1], want[1], rel * std::abs(want[1]));
      EXPECT_TRUE(std::isnan(got[2]));
    }
  }
}

// Under CPU autocast, fp16/bf16 logits are read as they are rather than copied to fp32 first:
// the loss (fp32) and the gradient (in the logits' dtype) equal, bit for bit, those of an
// explicit fp32 copy outside autocast, for each reduction, with ignored targets and smoothing.
TEST(LossOp, CrossEntropyUnderAutocastEqualsAnFp32CopyBitForBit) {
  const Tensor t = tensor<int64_t>({3, -100, 299, 0, 150, 7});
  for (DType dt : {kBFloat16, kFloat16}) {
    for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
      for (double eps : {0.0, 0.1}) {
        SCOPED_TRACE(std::string(dt.name()) + " reduction " + std::to_string(static_cast<int>(r)) +
                     " eps " + std::to_string(eps));
        const CrossEntropyOptions o{-100, r, eps};
        Tensor a = random_input({6, 300}, 40, -6, 6).to(dt).detach().requires_grad_(true);
        Tensor b = a.detach().clone().requires_grad_(true);
        Tensor la;
        {
          amp::autocast ac(DeviceType::kCPU, dt == kFloat16 ? kFloat16 : kBFloat16);
          la = cross_entropy(a, t, o);
        }
        const Tensor lb = cross_entropy(b.to(kFloat32), t, o);
        EXPECT_EQ(la.dtype(), kFloat32);
        // The loss's node feeds the logits' accumulator directly (no cast node between).
        ASSERT_EQ(la.grad_fn()->name(), "CrossEntropyBackward");
        ASSERT_EQ(la.grad_fn()->next.size(), 1u);
        EXPECT_EQ(la.grad_fn()->next[0]->name(), "AccumulateGrad");
        EXPECT_EQ(vals(la), vals(lb));
        Generator g(41);
        const Tensor up = uniform(la.shape(), 0.5, 2, kFloat32, &g);
        la.backward(up);
        lb.backward(up);
        EXPECT_EQ(a.grad().dtype(), dt);
        EXPECT_EQ(vals(a.grad()), vals(b.grad()));
      }
    }
  }
}

TEST(LossOp, CrossEntropyEqualsNllOfLogSoftmax) {
  Tensor x = random_input({5, 7}, 34, -4, 4).detach();
  Tensor t = tensor<int64_t>({6, 0, -100, 3, 3});
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    expect_near_all(vals(cross_entropy(x, t, {-100, r, 0.0})),
                    vals(nll_loss(log_softmax(x, 1), t, {-100, r, 0.0})), 1e-14);
  }
}

TEST(LossOp, NllLossMatchesPyTorch) {
  // PyTorch: F.nll_loss(F.log_softmax(logits, 1), targets, reduction=...).
  Tensor lp = log_softmax(logits(), 1).detach();
  expect_near_all(vals(nll_loss(lp, targets(), {-100, Reduction::kNone, 0})),
                  {3.5844986126036624, 0.0, 2.1309780572365025}, 1e-14);
  EXPECT_NEAR(nll_loss(lp, targets()).item(), 2.8577383349200822, 1e-14);
  EXPECT_NEAR(nll_loss(lp, targets(), {-100, Reduction::kSum, 0}).item(), 5.7154766698401644,
              1e-14);
  // label_smoothing is not an nll_loss option: it is ignored.
  EXPECT_EQ(nll_loss(lp, targets(), {-100, Reduction::kSum, 0.3}).item(),
            nll_loss(lp, targets(), {-100, Reduction::kSum, 0}).item());
  // Gradient: -scale at each target, zero elsewhere and on ignored rows.
  Tensor x = tensor<float>({-1, -2, -3, -4, -5, -6}, {2, 3});
  x.requires_grad_();
  nll_loss(x, tensor<int64_t>({2, 0})).backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 0, -0.5, -0.5, 0, 0}));
  EXPECT_TRUE(std::isnan(nll_loss(x, tensor<int64_t>({-100, -100})).item()));
}

TEST(LossOp, NllLossGradcheckAndLowPrecision) {
  Tensor t = tensor<int64_t>({2, -100, 0, 2});
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    expect_gradcheck(
        [&](const auto& in) {
          return nll_loss(in[0], in[1], {-100, r, 0});
        },
        {random_input({4, 3}, 35), t});
    for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
      const auto tol = tolerance_for(dt);
      expect_matches_f64(
          [&](const auto& in) {
            return nll_loss(in[0], in[1], {-100, r, 0});
          },
          {random_input({4, 3}, 36), t}, dt, tol.atol, tol.rtol);
    }
  }
}

TEST(LossOp, MseLossMatchesPyTorchWithGradientsForBothInputs) {
  Tensor a = tensor<float>({1, 2, 3, -1.5f}, {2, 2});
  Tensor b = tensor<float>({0.5f, 2.5f, 1, 0.5f}, {2, 2});
  EXPECT_EQ(vals(mse_loss(a, b, Reduction::kNone)), (std::vector<double>{0.25, 0.25, 4, 4}));
  EXPECT_EQ(mse_loss(a, b).item(), 2.125);
  EXPECT_EQ(mse_loss(a, b, Reduction::kSum).item(), 8.5);
  a.requires_grad_();
  b.requires_grad_();
  mse_loss(a, b).backward();
  // 2 (a - b) / 4
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{0.25, -0.25, 1, -1}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{-0.25, 0.25, -1, 1}));
  EXPECT_TRUE(std::isnan(mse_loss(zeros({0}), zeros({0})).item()));
}

TEST(LossOp, MseLossMixedDtypesPromoteAndGradientsKeepTheirDtypes) {
  Tensor a = tensor<float>({1, 2});
  Tensor b = tensor<double>({0, 0});
  a.requires_grad_();
  b.requires_grad_();
  Tensor l = mse_loss(a, b, Reduction::kSum);
  EXPECT_EQ(l.dtype(), kFloat64);
  l.backward();
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{2, 4}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{-2, -4}));
}

TEST(LossOp, MseLossRejectsShapeMismatchAndIntegers) {
  expect_error([] { mse_loss(zeros({2, 3}), zeros({3})); }, {"[2, 3]", "[3]"});
  expect_error([] { mse_loss(zeros({2, 1}), zeros({2, 3})); }, {"[2, 1]", "[2, 3]"});
  expect_error([] { mse_loss(arange(3), arange(3)); }, {"floating"});
}

TEST(LossOp, MseLossGradcheckAndLowPrecision) {
  for (Reduction r : {Reduction::kNone, Reduction::kMean, Reduction::kSum}) {
    expect_gradcheck([r](const auto& in) { return mse_loss(in[0], in[1], r); },
                     {random_input({3, 4}, 41), random_input({3, 4}, 42)});
    // A transposed (non-contiguous) input.
    expect_gradcheck([r](const auto& in) { return mse_loss(in[0].t(), in[1], r); },
                     {random_input({4, 3}, 43), random_input({3, 4}, 44)});
    for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
      const auto tol = tolerance_for(dt);
      expect_matches_f64([r](const auto& in) { return mse_loss(in[0], in[1], r); },
                         {random_input({3, 4}, 45), random_input({3, 4}, 46)}, dt, tol.atol,
                         tol.rtol);
    }
  }
}

TEST(LossOp, ReductionFromString) {
  EXPECT_EQ(reduction_from_string("none"), Reduction::kNone);
  EXPECT_EQ(reduction_from_string("mean"), Reduction::kMean);
  EXPECT_EQ(reduction_from_string("sum"), Reduction::kSum);
  expect_error([] { reduction_from_string("avg"); }, {"avg", "none, mean, sum"});
}

}  // namespace
}  // namespace mantissa
