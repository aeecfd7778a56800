#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "mantissa/ops/shape_ops.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

Tensor grid() { return tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}); }

TEST(IndexOp, IndexSelectValues) {
  Tensor a = grid();
  Tensor r = index_select(a, 1, tensor<int64_t>({2, 0, 2}));
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(r), (std::vector<double>{3, 1, 3, 6, 4, 6}));
  EXPECT_EQ(vals(index_select(a, 0, tensor<int32_t>({1}))), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(vals(index_select(a, -2, tensor<int64_t>({1, 1}))),
            (std::vector<double>{4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(index_select(a, 0, tensor<int64_t>(std::vector<int64_t>{})).shape(), (Shape{0, 3}));
  // Non-contiguous input, integer input, 0-dim index, 0-dim input.
  EXPECT_EQ(vals(index_select(a.t(), 0, tensor<int64_t>({2}))), (std::vector<double>{3, 6}));
  EXPECT_EQ(index_select(arange(5), 0, tensor<int64_t>({4, 0})).to_vector<int64_t>(),
            (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(vals(index_select(a, 1, scalar_tensor(1, kInt64))), (std::vector<double>{2, 5}));
  Tensor s = index_select(scalar_tensor(7.5), 0, tensor<int64_t>({0}));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item(), 7.5);
}

TEST(IndexOp, IndexSelectBackwardAccumulatesDuplicates) {
  Tensor a = grid();
  a.requires_grad_();
  index_select(a, 1, tensor<int64_t>({2, 0, 2}))
      .backward(tensor<float>({1, 10, 100, 1000, 10000, 100000}, {2, 3}));
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{10, 0, 101, 10000, 0, 101000}));
}

// Duplicates add in fp32 and round once: 1 + 2^-8 + 2^-8 is 1.0078125 (exact in bf16), while
// adding in bf16 step by step would tie-round back to 1 each time.
TEST(IndexOp, ReducedPrecisionBackwardRoundsOnce) {
  const std::vector<double> up = {1, 0.00390625, 0.00390625};
  Tensor a = zeros({2}, kBFloat16);
  a.requires_grad_();
  index_select(a, 0, tensor<int64_t>({1, 1, 1})).backward(tensor_of(up, {3}, kBFloat16));
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{0, 1.0078125}));
  Tensor b = zeros({2}, kBFloat16);
  b.requires_grad_();
  gather(b, 0, tensor<int64_t>({0, 0, 0})).backward(tensor_of(up, {3}, kBFloat16));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{1.0078125, 0}));
}

// An embedding-sized table above the parallel grain, with repeated rows.
TEST(IndexOp, IndexSelectLargeTableBackward) {
  const int64_t rows = 500, width = 96, k = 700;
  Generator gen(9);
  Tensor table = zeros({rows, width});
  table.requires_grad_();
  Tensor idx = randint(0, rows, {k}, kInt64, &gen);
  Tensor up = randint(-8, 8, {k, width}, kInt64, &gen).to(kFloat32);  // integer sums are exact
  index_select(table, 0, idx).backward(up);
  std::vector<double> want(rows * width, 0.0);
  const auto iv = idx.to_vector<int64_t>();
  const auto uv = vals(up);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t i = 0; i < width; ++i) want[iv[j] * width + i] += uv[j * width + i];
  EXPECT_EQ(vals(table.grad()), want);
}

TEST(IndexOp, IndexSelectErrors) {
  expect_error(
      [] {
        index_select(grid(), 1, tensor<int64_t>({0, 3}));
      },
      {"index 3", "dimension 1", "size 3"});
  expect_error([] { index_select(grid(), 0, tensor<int64_t>({-1})); }, {"index -1", "size 2"});
  expect_error([] { index_select(grid(), 0, tensor<float>({0})); }, {"int64", "float32"});
  expect_error([] { index_select(grid(), 0, tensor<int64_t>({0, 1}, {1, 2})); }, {"1-D", "[1, 2]"});
  expect_error([] { index_select(grid(), 2, tensor<int64_t>({0})); }, {"out of range"});
}

TEST(IndexOp, GatherValues) {
  Tensor a = grid();
  // out[i][j] = a[i][index[i][j]]
  EXPECT_EQ(vals(gather(a, 1, tensor<int64_t>({0, 0, 2, 1}, {2, 2}))),
            (std::vector<double>{1, 1, 6, 5}));
  // out[i][j] = a[index[i][j]][j]; the index may be smaller than the input.
  Tensor g0 = gather(a, 0, tensor<int64_t>({1, 0, 1}, {1, 3}));
  EXPECT_EQ(g0.shape(), (Shape{1, 3}));
  EXPECT_EQ(vals(g0), (std::vector<double>{4, 2, 6}));
  // Along dim the index may be larger than the input.
  EXPECT_EQ(vals(gather(a, -1, tensor<int32_t>({2, 2, 2, 2}, {1, 4}))),
            (std::vector<double>{3, 3, 3, 3}));
  // Non-contiguous input: a.t() is [[1, 4], [2, 5], [3, 6]].
  EXPECT_EQ(vals(gather(a.t(), 1, tensor<int64_t>({1, 0, 1}, {3, 1}))),
            (std::vector<double>{4, 2, 6}));
  // 0-dim input and index.
  Tensor s = gather(scalar_tensor(2.5), 0, scalar_tensor(0, kInt64));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item(), 2.5);
  // 3-D, gather along the middle dimension.
  Tensor c = arange(12, kFloat64).reshape({2, 3, 2});
  EXPECT_EQ(vals(gather(c, 1, tensor<int64_t>({2, 0, 1, 1}, {2, 1, 2}))),
            (std::vector<double>{4, 1, 8, 9}));
}

TEST(IndexOp, GatherBackwardScatterAdds) {
  Tensor a = grid();
  a.requires_grad_();
  gather(a, 1, tensor<int64_t>({0, 0, 2, 1}, {2, 2})).backward(tensor<float>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{3, 0, 0, 0, 4, 3}));
  // Through a transposed view the gradient lands on the right elements of the base.
  Tensor b = grid();
  b.requires_grad_();
  gather(b.t(), 1, tensor<int64_t>({1, 0, 1}, {3, 1})).backward(tensor<float>({1, 2, 3}, {3, 1}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{0, 2, 0, 1, 0, 3}));
}

TEST(IndexOp, GatherErrors) {
  expect_error(
      [] {
        gather(grid(), 1, tensor<int64_t>({0, 3}, {1, 2}));
      },
      {"index 3", "dimension 1", "size 3"});
  expect_error([] { gather(grid(), 0, tensor<int64_t>({0, 1})); }, {"[2]", "[2, 3]"});
  expect_error(
      [] {
        gather(grid(), 1, tensor<int64_t>({0, 0, 0}, {3, 1}));
      },
      {"[3, 1]", "[2, 3]", "dimension 0"});
  expect_error([] { gather(grid(), 1, tensor<double>({0, 0}, {1, 2})); }, {"int64"});
  expect_error([] { gather(grid(), 2, tensor<int64_t>({0, 0}, {1, 2})); }, {"out of range"});
}

TEST(IndexOp, GradcheckF64) {
  const Tensor idx = tensor<int64_t>({3, 0, 3, 1, 3});
  for (int64_t d : {0, 1, 2})
    expect_gradcheck(
        [&](const auto& in) { return index_select(in[0], d, idx.narrow(0, 0, 4 - d)); },
        {random_input({4, 4, 4}, 51)});
  const Tensor gi = tensor<int64_t>({2, 0, 2, 1, 1, 1, 0, 0}, {2, 4});
  expect_gradcheck([&](const auto& in) { return gather(in[0], 1, gi); },
                   {random_input({2, 3}, 52)});
  expect_gradcheck([&](const auto& in) { return gather(in[0].t(), 0, gi.narrow(1, 0, 2)); },
                   {random_input({2, 3}, 53)});
}

TEST(IndexOp, LowPrecisionMatchesF64) {
  const Tensor idx = tensor<int64_t>({2, 0, 2, 2});
  const Tensor gi = tensor<int64_t>({2, 0, 2, 1, 1, 1, 0, 0}, {2, 4});
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    expect_matches_f64([&](const auto& in) { return index_select(in[0], 1, idx); },
                       {random_input({3, 4}, 54)}, dt, tol.atol, tol.rtol);
    expect_matches_f64([&](const auto& in) { return gather(in[0], 1, gi); },
                       {random_input({2, 3}, 55)}, dt, tol.atol, tol.rtol);
  }
}

}  // namespace
}  // namespace mantissa
