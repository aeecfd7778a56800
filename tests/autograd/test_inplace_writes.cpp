// In-place writes (Tensor::copy_, fill_, zero_) record no autograd. In grad mode a write whose
// gradient would silently be wrong is refused with what to do instead (docs/guide.md,
// "Autograd"); under NoGradGuard, or into tensors outside the graph, every write works.
#include <gtest/gtest.h>

#include "mantissa/mantissa.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using testing::error_of;

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

bool has(const std::string& e, const std::string& piece) {
  return e.find(piece) != std::string::npos;
}

// y = w * 2; y.fill_(1); sum(y).backward() would give w.grad == 2 although y does not depend on
// w any more (PyTorch: 0), so the write is refused; under NoGradGuard it is allowed.
TEST(InPlaceWrites, WriteIntoAGraphResultIsRefusedInGradMode) {
  Tensor w = tensor<double>({1, 2, 3}).requires_grad_();
  Tensor y = mul(w, 2.0);
  const std::string e = error_of([&] { y.fill_(1.0); });
  EXPECT_TRUE(has(e, "[fill_] a tensor that is part of the autograd graph (grad_fn MulBackward"))
      << e;
  EXPECT_TRUE(has(e, "autograd does not record in-place writes")) << e;
  EXPECT_TRUE(has(e, "NoGradGuard")) << e;
  EXPECT_TRUE(has(e, "t.detach()")) << e;
  EXPECT_TRUE(has(e, "out-of-place op")) << e;
  EXPECT_TRUE(has(error_of([&] { y.zero_(); }), "[zero_] a tensor that is part of the autograd"));
  EXPECT_TRUE(has(error_of([&] { y.copy_(zeros({3}, kFloat64)); }),
                  "[copy_] a tensor that is part of the autograd graph"));
  // Nothing was written: the gradient is still that of y = 2w.
  EXPECT_EQ(vals(y), (std::vector<double>{2, 4, 6}));
  sum(y).backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{2, 2, 2}));
  // The out-of-place way: a new tensor that does not depend on w gets no gradient to w.
  {
    NoGradGuard no_grad;
    Tensor z = mul(w, 2.0);
    z.fill_(7.0);  // allowed under no_grad
    EXPECT_EQ(vals(z), (std::vector<double>{7, 7, 7}));
  }
}

// PyTorch: "a leaf Variable that requires grad is being used in an in-place operation."
TEST(InPlaceWrites, WriteIntoALeafThatRequiresGradIsRefusedInGradMode) {
  Tensor w = tensor<float>({1, 2, 3}).requires_grad_();
  for (const std::string& e : {error_of([&] { w.fill_(0.5); }), error_of([&] { w.zero_(); }),
                               error_of([&] { w.copy_(ones({3})); })}) {
    EXPECT_TRUE(has(e, "a leaf tensor that requires grad is being used in an in-place operation"))
        << e;
    EXPECT_TRUE(has(e, "NoGradGuard")) << e;
  }
  EXPECT_TRUE(has(error_of([&] { w.copy_(ones({3})); }), "[copy_] a leaf tensor"));
  EXPECT_EQ(vals(w), (std::vector<double>{1, 2, 3}));
  // A view of the leaf (made in grad mode) is in the graph: refused too.
  const std::string v = error_of([&] { w.narrow(0, 1, 2).zero_(); });
  EXPECT_TRUE(has(v, "[zero_] a tensor that is part of the autograd graph")) << v;
  EXPECT_TRUE(has(v, "view of a tensor that requires grad")) << v;
  EXPECT_EQ(vals(w), (std::vector<double>{1, 2, 3}));
  // Under NoGradGuard, or through detach(), the same writes are allowed (as torch.no_grad()).
  {
    NoGradGuard no_grad;
    w.fill_(4.0);
    EXPECT_EQ(vals(w), (std::vector<double>{4, 4, 4}));
    w.narrow(0, 1, 2).copy_(tensor<float>({5, 6}));
    EXPECT_EQ(vals(w), (std::vector<double>{4, 5, 6}));
  }
  w.detach().zero_();
  EXPECT_EQ(vals(w), (std::vector<double>{0, 0, 0}));
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
}

// out.narrow(...).copy_(x) with x requiring grad would lose x's gradient (PyTorch records
// CopySlices), so it is refused; cat keeps the gradient.
TEST(InPlaceWrites, CopyFromASourceThatRequiresGradIsRefusedInGradMode) {
  Tensor x = tensor<double>({1, 2}).requires_grad_();
  Tensor out = zeros({4}, kFloat64);
  const std::string e = error_of([&] { out.narrow(0, 1, 2).copy_(x); });
  EXPECT_TRUE(has(e, "[copy_] the source requires grad")) << e;
  EXPECT_TRUE(has(e, "its gradient would be lost")) << e;
  EXPECT_TRUE(has(e, "cat")) << e;
  EXPECT_TRUE(has(e, "src.detach()")) << e;
  EXPECT_EQ(vals(out), (std::vector<double>{0, 0, 0, 0}));
  // A non-leaf source too.
  EXPECT_TRUE(
      has(error_of([&] { out.copy_(mul(sum(x), 1.0)); }), "[copy_] the source requires grad"));
  // The out-of-place way keeps the gradient.
  Tensor built = cat({zeros({1}, kFloat64), x, zeros({1}, kFloat64)}, 0);
  sum(mul(built, tensor<double>({1, 2, 3, 4}))).backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 3}));
  // Allowed: a detached source, or any copy under NoGradGuard.
  out.narrow(0, 1, 2).copy_(x.detach());
  EXPECT_EQ(vals(out), (std::vector<double>{0, 1, 2, 0}));
  {
    NoGradGuard no_grad;
    out.narrow(0, 0, 2).copy_(x);
  }
  EXPECT_EQ(vals(out), (std::vector<double>{1, 2, 2, 0}));
  EXPECT_FALSE(out.requires_grad());
}

// Writes that involve no tensor requiring grad stay allowed in grad mode; the library's own
// writes of parameters (initialisers, optimizer steps, load_state_dict) work in grad mode, while
// the user's direct write of a parameter in grad mode is refused.
TEST(InPlaceWrites, LibraryWritesOfParametersStillWorkInGradMode) {
  ASSERT_TRUE(GradMode::is_enabled());
  Tensor a = zeros({2, 2});
  a.fill_(3.0);
  a.narrow(0, 0, 1).copy_(tensor<float>({1, 2}));
  a.select(1, 1).zero_();
  EXPECT_EQ(vals(a), (std::vector<double>{1, 0, 3, 0}));

  nn::Linear lin(2, 1, true, kFloat64);
  EXPECT_TRUE(has(error_of([&] { lin.weight.fill_(0.0); }), "a leaf tensor that requires grad"));
  nn::init::constant_(lin.weight, 0.5);
  nn::init::zeros_(lin.bias);
  EXPECT_EQ(vals(lin.weight), (std::vector<double>{0.5, 0.5}));

  optim::SGD opt(lin.parameters(), 0.1);
  Tensor loss = sum(lin.forward(tensor<double>({1, 2}, {1, 2})));
  loss.backward();
  opt.step();
  EXPECT_EQ(vals(lin.weight), (std::vector<double>{0.4, 0.3}));
  opt.zero_grad();

  nn::Linear other(2, 1, true, kFloat64);
  nn::StateDict sd = lin.state_dict();
  EXPECT_EQ(error_of([&] { other.load_state_dict(sd); }), "");
  EXPECT_EQ(vals(other.weight), (std::vector<double>{0.4, 0.3}));
  EXPECT_TRUE(other.weight.requires_grad());
}

// A view taken under NoGradGuard does not require grad itself, yet a write into it in grad mode
// would change its base: w.narrow(...).fill_ would change the leaf w (whose gradient would then
// describe other values), and a view of y = 2w written would change y behind its backward. The
// view knows its base, and the write is refused as PyTorch refuses it; under NoGradGuard, or into a
// view of base.detach(), it is allowed.
TEST(InPlaceWrites, WriteThroughAViewTakenUnderNoGradIsRefusedInGradMode) {
  Tensor w = tensor<double>({1, 2, 3, 4}).requires_grad_();
  Tensor v, vv;
  {
    NoGradGuard no_grad;
    v = w.narrow(0, 1, 2);
    vv = v.view({2, 1}).transpose(0, 1);  // a view of the view: the base is still w
  }
  EXPECT_FALSE(v.requires_grad());
  for (const std::string& e :
       {error_of([&] { v.fill_(0.0); }), error_of([&] { v.zero_(); }),
        error_of([&] { v.copy_(ones({2}, kFloat64)); }), error_of([&] { vv.fill_(9.0); })}) {
    EXPECT_TRUE(has(e, "view, taken under NoGradGuard, of a leaf tensor that requires grad")) << e;
    EXPECT_TRUE(has(e, "modified in place with grad mode enabled")) << e;
    EXPECT_TRUE(has(e, "NoGradGuard as well")) << e;
  }
  EXPECT_EQ(vals(w), (std::vector<double>{1, 2, 3, 4}));  // nothing written

  // A base in the graph: its backward would use values changed behind it.
  Tensor y = mul(w, 2.0);
  Tensor yv;
  {
    NoGradGuard no_grad;
    yv = y.slice(0, 0, 4, 2);
  }
  const std::string g = error_of([&] { yv.fill_(0.0); });
  EXPECT_TRUE(has(g,
                  "[fill_] the tensor written is a view, taken under NoGradGuard, of a tensor "
                  "that is part of the autograd graph (grad_fn MulBackward"))
      << g;
  EXPECT_EQ(vals(y), (std::vector<double>{2, 4, 6, 8}));
  sum(y).backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{2, 2, 2, 2}));

  // The ways that remain: write under NoGradGuard, or view the detached base.
  {
    NoGradGuard no_grad;
    v.fill_(7.0);
  }
  EXPECT_EQ(vals(w), (std::vector<double>{1, 7, 7, 4}));
  Tensor d = w.detach().narrow(0, 0, 1);
  d.fill_(5.0);
  EXPECT_EQ(vals(w), (std::vector<double>{5, 7, 7, 4}));
  // A base that does not require grad: views of it are written freely in grad mode.
  Tensor plain = zeros({3}, kFloat64);
  Tensor pv;
  {
    NoGradGuard no_grad;
    pv = plain.narrow(0, 1, 1);
  }
  pv.fill_(3.0);
  EXPECT_EQ(vals(plain), (std::vector<double>{0, 3, 0}));
}

}  // namespace
}  // namespace mantissa
