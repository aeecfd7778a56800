#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "mantissa/ops/shape_ops.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(CatStackOp, CatAlongEachDim) {
  Tensor a = arange(6, kFloat32).reshape({2, 3});
  Tensor b = arange(6, 10, 1, kFloat32).reshape({2, 2});
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 5}));
  EXPECT_EQ(vals(c), (std::vector<double>{0, 1, 2, 6, 7, 3, 4, 5, 8, 9}));
  EXPECT_EQ(vals(cat({a, b}, -1)), vals(c));
  Tensor r = cat({a, a.narrow(0, 1, 1)}, 0);
  EXPECT_EQ(r.shape(), (Shape{3, 3}));
  EXPECT_EQ(vals(r), (std::vector<double>{0, 1, 2, 3, 4, 5, 3, 4, 5}));
  // Non-contiguous input (a transposed view) and a single input.
  EXPECT_EQ(vals(cat({a.t(), b.t()}, 0)), (std::vector<double>{0, 3, 1, 4, 2, 5, 6, 8, 7, 9}));
  EXPECT_EQ(vals(cat({a}, 0)), vals(a));
}

TEST(CatStackOp, CatPromotesDtypes) {
  Tensor f = tensor<float>({1.5f});
  EXPECT_EQ(cat({f, tensor<double>({2.25})}).dtype(), kFloat64);
  Tensor mixed = cat({arange(2), f});
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_EQ(vals(mixed), (std::vector<double>{0, 1, 1.5}));
  EXPECT_EQ(cat({f.to(kBFloat16), f.to(kFloat16)}).dtype(), kFloat32);
  EXPECT_EQ(cat({arange(2), arange(2, kInt32)}).dtype(), kInt64);
}

TEST(CatStackOp, CatEmptyTensorRules) {
  Tensor a = ones({2, 3});
  // Zero-size along the cat dimension joins normally.
  EXPECT_EQ(cat({zeros({0, 3}), a}, 0).shape(), (Shape{2, 3}));
  EXPECT_EQ(cat({a, zeros({2, 0})}, 1).shape(), (Shape{2, 3}));
  // A 1-D empty tensor is skipped whatever the other shapes (PyTorch's legacy rule).
  Tensor e = zeros({0});
  e.requires_grad_();
  Tensor x = ones({2, 3});
  x.requires_grad_();
  Tensor c = cat({e, x}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  c.backward(ones({2, 3}));
  EXPECT_EQ(e.grad().shape(), (Shape{0}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>(6, 1.0)));
  EXPECT_EQ(cat({zeros({0}), zeros({0})}).shape(), (Shape{0}));
  // Zero-size elsewhere must still match.
  expect_error([] { cat({zeros({0, 3}), zeros({0, 2})}, 0); }, {"tensor 1", "[0, 2]", "[0, 3]"});
}

TEST(CatStackOp, CatErrorsNameTheTensorAndShapes) {
  expect_error(
      [] {
        cat({ones({2, 3}), ones({2, 3}), ones({3, 3})}, 1);
      },
      {"dimension 1", "tensor 2", "[3, 3]", "[2, 3]"});
  expect_error([] { cat({ones({2, 3}), ones({2, 3, 1})}, 0); }, {"tensor 1", "[2, 3, 1]"});
  expect_error([] { cat({ones({2}), scalar_tensor(1)}); }, {"zero-dimensional", "position 1"});
  expect_error([] { cat({}); }, {"non-empty"});
  expect_error([] { cat({ones({2, 3})}, 2); }, {"dimension 2 out of range"});
}

TEST(CatStackOp, CatGradientSlicesBackInEachInputsDtype) {
  Tensor a = tensor<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = tensor<double>({5, 6}, {2, 1});
  a.requires_grad_();
  b.requires_grad_();
  Tensor c = cat({a, b}, 1);
  c.backward(tensor<double>({10, 20, 30, 40, 50, 60}, {2, 3}));
  EXPECT_EQ(a.grad().dtype(), kFloat32);
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{10, 20, 40, 50}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{30, 60}));
}

TEST(CatStackOp, StackValuesAndErrors) {
  Tensor a = tensor<float>({1, 2, 3});
  Tensor b = tensor<float>({4, 5, 6});
  Tensor s0 = stack({a, b});
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(s0), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  Tensor s1 = stack({a, b}, -1);
  EXPECT_EQ(s1.shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(s1), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(stack({scalar_tensor(1), scalar_tensor(2)}).shape(), (Shape{2}));
  expect_error([&] { stack({a, tensor<float>({1, 2})}); }, {"entry 1", "[2]", "[3]"});
  expect_error([&] { stack({a, b}, 2); }, {"dimension 2 out of range"});
  expect_error([] { stack({}); }, {"non-empty"});
}

TEST(CatStackOp, GradcheckF64) {
  expect_gradcheck(
      [](const auto& in) {
        return cat({in[0], in[1], in[2]}, 1);
      },
      {random_input({2, 3, 2}, 1), random_input({2, 1, 2}, 2), random_input({2, 4, 2}, 3)});
  expect_gradcheck(
      [](const auto& in) {
        return cat({in[0].t(), in[1]}, -2);
      },
      {random_input({3, 2}, 4), random_input({1, 3}, 5)});
  for (int64_t d : {0, 1, 2, -1})
    expect_gradcheck(
        [d](const auto& in) {
          return stack({in[0], in[1]}, d);
        },
        {random_input({2, 3}, 6), random_input({2, 3}, 7)});
}

TEST(CatStackOp, LowPrecisionMatchesF64) {
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    expect_matches_f64(
        [](const auto& in) {
          return cat({in[0], in[1]}, 0);
        },
        {random_input({2, 3}, 8), random_input({1, 3}, 9)}, dt, tol.atol, tol.rtol);
    expect_matches_f64(
        [](const auto& in) {
          return stack({in[0], in[1]}, 1);
        },
        {random_input({2, 3}, 10), random_input({2, 3}, 11)}, dt, tol.atol, tol.rtol);
  }
}

}  // namespace
}  // namespace mantissa
