#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "mantissa/autograd/node.h"
#include "mantissa/core/allocator.h"
#include "mantissa/core/tensor.h"
#include "mantissa/core/warning.h"
#include "mantissa/mantissa.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

TEST(Autograd, ViewChainsRouteGradientsToTheRightElements) {
  Tensor x = arange(6, kFloat64).reshape({2, 3});
  x.requires_grad_();
  Tensor y = x.t().narrow(0, 1, 2).reshape({4});  // elements x[0][1], x[1][1], x[0][2], x[1][2]
  y.backward(tensor<double>({1, 2, 3, 4}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 1, 3, 0, 2, 4}));
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = ones({3}, kFloat32);
  x.requires_grad_();
  x.expand({2, 3}).backward(ones({2, 3}));
  x.expand({2, 3}).backward(ones({2, 3}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{4, 4, 4}));
  x.reset_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, CastIsAGraphNodeAndGradientArrivesInFp32) {
  Tensor w = tensor<float>({1.0f, 2.0f});
  w.requires_grad_();
  Tensor wb = w.to(kBFloat16);
  ASSERT_EQ(wb.dtype(), kBFloat16);
  ASSERT_EQ(wb.grad_fn()->name(), "ToCopyBackward");
  wb.backward(tensor<float>({0.5f, 0.25f}).to(kBFloat16));
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{0.5, 0.25}));
}

TEST(Autograd, NoGradAndEnableGradGuardsNest) {
  Tensor x = ones({2});
  x.requires_grad_();
  {
    NoGradGuard ng;
    EXPECT_FALSE(x.reshape({2, 1}).requires_grad());
    {
      EnableGradGuard eg;
      EXPECT_TRUE(x.reshape({2, 1}).requires_grad());
    }
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
}

// Guards held by unique_ptr and closed outermost first: the mode is what the innermost open
// guard set while any is open, and what it was before the first once all are closed, with one
// warning. The outer NoGradGuard restored "on" at once and the inner EnableGradGuard then
// restored the outer's "off", leaving recording off with no guard open.
TEST(Autograd, GradGuardsClosedOutOfOrderRestoreTheModeBeforeThem) {
  forget_warnings_said_once();
  WarningRecorder warnings;
  ASSERT_TRUE(GradMode::is_enabled());
  auto outer = std::make_unique<NoGradGuard>();
  auto inner = std::make_unique<EnableGradGuard>();
  outer.reset();
  EXPECT_TRUE(GradMode::is_enabled());  // the innermost open guard's mode
  inner.reset();
  EXPECT_TRUE(GradMode::is_enabled());
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_NE(warnings.messages()[0].find("closed out of order"), std::string::npos);

  // Three deep, closed middle first, then outer, then inner: off, on, off in, on out.
  std::optional<NoGradGuard> a;
  std::optional<EnableGradGuard> b;
  std::optional<NoGradGuard> c;
  a.emplace();
  b.emplace();
  c.emplace();
  b.reset();
  EXPECT_FALSE(GradMode::is_enabled());
  a.reset();
  EXPECT_FALSE(GradMode::is_enabled());
  Tensor x = ones({2});
  x.requires_grad_();
  EXPECT_FALSE(x.reshape({2, 1}).requires_grad());
  c.reset();
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_TRUE(x.reshape({2, 1}).requires_grad());

  // Started inside a no_grad region: it ends off again.
  {
    NoGradGuard outside;
    auto on = std::make_unique<EnableGradGuard>();
    auto off = std::make_unique<NoGradGuard>();
    on.reset();
    EXPECT_FALSE(GradMode::is_enabled());
    off.reset();
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
}

TEST(Autograd, DetachCutsHistoryAndSharesStorage) {
  Tensor x = ones({2});
  x.requires_grad_();
  Tensor y = x.reshape({2, 1});
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_EQ(d.data_ptr(), x.data_ptr());
}

TEST(Autograd, ErrorsAreClear) {
  Tensor x = ones({2});
  // PyTorch's words, then the likely causes (a frozen model, no_grad, layers swapped out).
  mantissa::testing::expect_error([&] { sum(x).backward(); },
                                  {"element 0 of tensors does not require grad and does not have "
                                   "a grad_fn (nothing it was computed from requires grad",
                                   "swapped out of the model's slots"});
  x.requires_grad_();
  Tensor y = x.reshape({2, 1});
  EXPECT_THROW(y.backward(), Error);           // not a scalar, no gradient given
  EXPECT_THROW(y.backward(ones({3})), Error);  // wrong gradient shape
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = ones({2});
  x.requires_grad_();
  Tensor y = x.to(kFloat64);
  y.backward(ones({2}, kFloat64), /*retain_graph=*/true);
  y.backward(ones({2}, kFloat64));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 2}));
  EXPECT_THROW(y.backward(ones({2}, kFloat64)), Error);
}

TEST(Autograd, GraphIsFreedWithItsTensors) {
  const int64_t live = allocation_count();
  {
    Tensor x = ones({8});
    x.requires_grad_();
    Tensor y = x.to(kBFloat16).reshape({2, 4}).t().contiguous();
    y.backward(ones({4, 2}, kBFloat16));
  }
  EXPECT_EQ(allocation_count(), live);
}

// A leaf keeps one AccumulateGrad for its lifetime (it is not rebuilt for every graph), and
// the accumulator refers to the leaf weakly: a graph that outlives its leaf neither keeps it
// alive nor fails when backward reaches the place its gradient would have gone.
TEST(Autograd, LeafKeepsOneAccumulatorAndAGraphDoesNotKeepTheLeaf) {
  Tensor x = tensor<float>({1, 2});
  x.requires_grad_();
  std::weak_ptr<autograd::Node> first;
  {
    Tensor y = mul(x, 2.0);
    first = y.grad_fn()->next[0];
  }
  ASSERT_FALSE(first.expired());  // the graph is gone, the leaf's accumulator is not
  Tensor z = mul(x, 3.0);
  EXPECT_EQ(z.grad_fn()->next[0].get(), first.lock().get());
  EXPECT_EQ(first.lock()->name(), "AccumulateGrad");
  sum(z).backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{3, 3}));

  std::weak_ptr<TensorImpl> gone;
  Tensor orphan_out;
  {
    Tensor leaf = tensor<float>({1, 2});
    leaf.requires_grad_();
    gone = leaf.impl_ptr();
    orphan_out = add(leaf, tensor<float>({5, 5}));
  }
  EXPECT_TRUE(gone.expired());
  sum(orphan_out).backward();  // the leaf's gradient has nowhere to go: dropped
  EXPECT_TRUE(gone.expired());
}

// add and sub keep an operand's shape only where it was broadcast; the gradients of both
// broadcast and same-shape operands (and alpha) must still come back in the operands' shapes.
TEST(Autograd, AddAndSubGradientsOfBroadcastAndSameShapeOperands) {
  Tensor a = tensor<double>({1, 2, 3, 4, 5, 6}).reshape({2, 3});
  Tensor row = tensor<double>({1, 1, 1});
  Tensor same = tensor<double>({0, 0, 0, 0, 0, 0}).reshape({2, 3});
  a.requires_grad_();
  row.requires_grad_();
  same.requires_grad_();
  Tensor y = add(add(a, row, 2.0), same);
  Tensor w = sub(y, row, 0.5);
  w.backward(tensor<double>({1, 2, 3, 4, 5, 6}).reshape({2, 3}));
  EXPECT_EQ(a.grad().shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(same.grad().shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(same.grad()), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // row: 2 * column sums (5, 7, 9) from the add, -0.5 * the same from the sub.
  EXPECT_EQ(row.grad().shape(), (Shape{3}));
  EXPECT_EQ(vals(row.grad()), (std::vector<double>{7.5, 10.5, 13.5}));
}

TEST(Autograd, BranchThatReturnsNoGradientStillLetsOthersRun) {
  // x -> a (backward returns "no gradient") -> c ; x -> b (reshape) -> c. Only b's path
  // contributes; the engine must still run x's accumulator exactly once.
  Tensor x = tensor<double>({1, 2});
  x.requires_grad_();
  Tensor a = autograd::record(zeros({2}, kFloat64), {x}, "NoGrad",
                              [](const Tensor&) { return std::vector<Tensor>{Tensor()}; });
  Tensor a2 = autograd::record(zeros({2}, kFloat64), {a}, "PassThrough",
                               [](const Tensor& g) { return std::vector<Tensor>{g}; });
  Tensor b = x.reshape({2});
  Tensor c = autograd::record(zeros({2}, kFloat64), {a2, b}, "Join", [](const Tensor& g) {
    return std::vector<Tensor>{g, g};
  });
  c.backward(tensor<double>({3, 4}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{3, 4}));
}

TEST(Autograd, DiamondGraphSumsBothPaths) {
  Tensor x = tensor<float>({1, 2, 3});
  x.requires_grad_();
  Tensor y = x.reshape({3, 1}).expand({3, 2});  // each element used twice
  Tensor z = y.t().contiguous();
  z.backward(ones({2, 3}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 2, 2}));
}

// A tensor a backward reads, written in place after the forward, would give a gradient of the
// new values: backward refuses, as PyTorch does ("modified by an inplace operation"). A tensor
// no backward reads (an input of add) may be written. (A graph result is written through
// detach() here: its copy_ in grad mode is refused at once, test_inplace_writes.cpp.)
TEST(Autograd, InPlaceWriteOfASavedTensorIsRefused) {
  using testing::error_of;
  Tensor w = tensor<float>({1, 2, 3}).requires_grad_();
  Tensor a = mul(w, 1.0);
  Tensor b = mul(a, a);  // saves a
  a.detach().copy_(zeros({3}));
  const std::string e = error_of([&] { sum(b).backward(); });
  EXPECT_NE(e.find("a tensor MulBackward saved for its backward (number 0 of its saved tensors) "
                   "was modified in place after the forward (version 0, now 1)"),
            std::string::npos)
      << e;
  // matmul and linear save their operands too.
  Tensor x = ones({2, 3});
  Tensor m = tensor<float>({1, 2, 3, 4, 5, 6}, {3, 2}).requires_grad_();
  Tensor y = matmul(x, m);
  x.fill_(2.0);
  EXPECT_NE(error_of([&] { sum(y).backward(); }).find("MatmulBackward"), std::string::npos);
  // add reads neither input: writing one after the forward is fine.
  Tensor c = ones({3});
  Tensor d = add(w, c);
  c.fill_(5.0);
  EXPECT_EQ(error_of([&] { sum(d).backward(); }), "");
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

}  // namespace
}  // namespace mantissa
