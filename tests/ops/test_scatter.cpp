// scatter, scatter_add, index_add, index_put: values (worked by hand, as torch gives them),
// duplicates, errors, and gradients against finite differences in f64.
#include <gtest/gtest.h>

#include "mantissa/ops/reduce.h"
#include "mantissa/ops/scatter.h"
#include "support/gradcheck.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return tensor<int64_t>(v, s); }

TEST(ScatterOp, ScatterValues) {
  // torch.zeros(3, 4).scatter(0, index, src) with src larger than index in dimension 1.
  Tensor src = tensor<float>({1, 2, 3, 4, 0, 5, 6, 7, 8, 0}, {2, 5});
  Tensor index = i64({0, 1, 2, 0, 2, 0, 0, 1}, {2, 4});
  Tensor out = scatter(zeros({3, 4}), 0, index, src);
  EXPECT_EQ(vals(out), (std::vector<double>{1, 6, 7, 4, 0, 2, 0, 8, 5, 0, 3, 0}));
  // int32 index, negative dim, a non-contiguous self.
  Tensor self = zeros({4, 3}).t();
  EXPECT_EQ(vals(scatter(self, -2, index.to(kInt32), src)), vals(out));
  // Integer tensors move as they are.
  EXPECT_EQ(scatter(zeros({3}, kInt64), 0, i64({2}, {1}), i64({9}, {1})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 0, 9}));
}

TEST(ScatterOp, ScatterDuplicateLastWinsAndTakesTheGradient) {
  Tensor self = zeros({2, 3});
  Tensor src = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  self.requires_grad_();
  src.requires_grad_();
  Tensor index = i64({0, 0, 2, 1, 1, 1}, {2, 3});
  Tensor out = scatter(self, 1, index, src);
  EXPECT_EQ(vals(out), (std::vector<double>{2, 0, 3, 0, 6, 0}));
  out.backward(tensor<float>({10, 20, 30, 40, 50, 60}, {2, 3}));
  EXPECT_EQ(vals(src.grad()), (std::vector<double>{0, 10, 30, 0, 0, 50}));
  EXPECT_EQ(vals(self.grad()), (std::vector<double>{0, 20, 0, 40, 0, 60}));
}

TEST(ScatterOp, ScatterAddDuplicatesAddUp) {
  Tensor self = ones({2, 3});
  Tensor src = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  self.requires_grad_();
  src.requires_grad_();
  Tensor out = scatter_add(self, 1, i64({0, 0, 2, 1, 1, 1}, {2, 3}), src);
  EXPECT_EQ(vals(out), (std::vector<double>{4, 1, 4, 1, 16, 1}));
  out.backward(tensor<float>({10, 20, 30, 40, 50, 60}, {2, 3}));
  EXPECT_EQ(vals(src.grad()), (std::vector<double>{10, 10, 30, 50, 50, 50}));
  EXPECT_EQ(vals(self.grad()), (std::vector<double>{10, 20, 30, 40, 50, 60}));
}

TEST(ScatterOp, IndexAddValues) {
  Tensor source = tensor<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor out = index_add(zeros({3, 2}), 0, i64({0, 2, 0}, {3}), source, 2.0);
  EXPECT_EQ(vals(out), (std::vector<double>{12, 16, 0, 0, 6, 8}));
  // Along dim 1.
  Tensor out1 = index_add(ones({2, 3}), 1, i64({2, 2}, {2}), tensor<float>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(vals(out1), (std::vector<double>{1, 1, 4, 1, 1, 8}));
}

TEST(ScatterOp, IndexPutValues) {
  Tensor self = zeros({3, 4});
  Tensor values = tensor<float>({1, 2, 3}, {3});
  const std::vector<Tensor> idx = {i64({0, 2, 0}, {3}), i64({1, 3, 1}, {3})};
  Tensor put = index_put(self, idx, values);
  EXPECT_EQ(put.to_vector<double>()[1], 3);   // last duplicate wins
  EXPECT_EQ(put.to_vector<double>()[11], 2);  // [2][3]
  Tensor acc = index_put(self, idx, values, true);
  EXPECT_EQ(acc.to_vector<double>()[1], 4);
  EXPECT_EQ(acc.to_vector<double>()[11], 2);
  EXPECT_EQ(sum(acc).item(), 6);
  // One index tensor: whole rows, negative index, values broadcast over the row.
  Tensor rows = index_put(self, {i64({-1}, {1})}, tensor<float>({1, 2, 3, 4}, {4}));
  EXPECT_EQ(vals(rows), (std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}));
  // A length-1 index broadcasts against the others.
  Tensor col = index_put(self, {i64({1}, {1}), i64({0, 2}, {2})}, scalar_tensor(7.0), false);
  EXPECT_EQ(vals(col), (std::vector<double>{0, 0, 0, 0, 7, 0, 7, 0, 0, 0, 0, 0}));
}

TEST(ScatterOp, ErrorsSayWhatToFix) {
  const Tensor self = zeros({2, 3});
  expect_error(
      [&] {
        scatter(self, 0, i64({2, 0, 0}, {1, 3}), ones({1, 3}));
      },
      {"scatter", "index 2 is out of bounds for dimension 0 with size 2"});
  expect_error([&] { scatter_add(self, 0, i64({0}, {1}), ones({1})); },
               "same number of dimensions");
  expect_error(
      [&] {
        scatter_add(self, 0, i64({0, 0, 0}, {1, 3}), ones({1, 3}, kFloat16));
      },
      {"src dtype float16 must match self dtype float32", "autocast"});
  expect_error(
      [&] {
        scatter(self, 0, ones({1, 3}), ones({1, 3}));
      },
      "index must be int64 or int32");
  expect_error(
      [&] {
        index_add(self, 0, i64({0, 1}, {2}), ones({3, 3}));
      },
      "number of indices (2)");
  expect_error(
      [&] {
        index_put(self, {i64({0}, {1}), i64({5}, {1})}, ones({1}));
      },
      "index 5 is out of bounds for dimension 1 with size 3");
  expect_error([&] { index_put(self, {i64({0, 1}, {2})}, ones({3, 3})); }, "does not broadcast");
  expect_error([&] { index_put(self, {}, ones({1})); }, "index tensors");
}

TEST(ScatterOp, GradcheckScatter) {
  // Unique and duplicated destinations; src larger than index.
  const Tensor unique = i64({0, 1, 2, 0, 2, 0, 0, 1}, {2, 4});
  const Tensor dup = i64({0, 0, 2, 2, 1, 1, 1, 0}, {2, 4});
  for (const Tensor& index : {unique, dup}) {
    expect_gradcheck([&](const std::vector<Tensor>& in) { return scatter(in[0], 0, index, in[1]); },
                     {random_input({3, 4}, 1), random_input({2, 5}, 2)});
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, index, in[1]); },
        {random_input({3, 4}, 3), random_input({3, 4}, 4)});
  }
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return scatter_add(in[0], 1, dup.t(), in[1]); },
      {random_input({4, 3}, 5), random_input({4, 2}, 6)});
}

TEST(ScatterOp, GradcheckIndexAdd) {
  const Tensor index = i64({1, 0, 1}, {3});
  expect_gradcheck(
      [&](const std::vector<Tensor>& in) { return index_add(in[0], 1, index, in[1], -1.5); },
      {random_input({2, 2, 3}, 7), random_input({2, 3, 3}, 8)});
}

TEST(ScatterOp, GradcheckIndexPut) {
  const std::vector<Tensor> idx = {i64({0, 2, 0, -1}, {4}), i64({1, 0, 1, 0}, {4})};
  for (bool accumulate : {false, true}) {
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return index_put(in[0], idx, in[1], accumulate); },
        {random_input({3, 2, 2}, 9), random_input({4, 2}, 10)});
    // Broadcast values: the gradient sums over the broadcast.
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) { return index_put(in[0], idx, in[1], accumulate); },
        {random_input({3, 2, 2}, 11), random_input({2}, 12)});
  }
}

// fp16 sums in fp32 and rounds once per element: 2048 + 1 + 1 is 2050 (2048 + 1 alone would
// tie back to 2048 in fp16).
TEST(ScatterOp, ReducedPrecisionAccumulatesInFp32) {
  Tensor self = full({1}, 2048.0, kFloat16);
  Tensor out = scatter_add(self, 0, i64({0, 0}, {2}), ones({2}, kFloat16));
  EXPECT_EQ(out.dtype(), kFloat16);
  EXPECT_EQ(vals(out), (std::vector<double>{2050}));
}

}  // namespace
}  // namespace mantissa
