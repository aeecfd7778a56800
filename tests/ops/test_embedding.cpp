// embedding: row lookup, scatter-add gradient with repeated indices, dtypes, errors.
#include <gtest/gtest.h>

#include "mantissa/ops/embedding.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(Embedding, LooksUpRows) {
  Tensor w = tensor<double>({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor idx = tensor<int64_t>({2, 0, 2, 1}, {2, 2});
  Tensor y = embedding(w, idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(vals(y), (std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11}));
  EXPECT_EQ(embedding(w.to(kBFloat16), tensor<int32_t>({1})).dtype(), kBFloat16);
}

TEST(Embedding, RepeatedIndicesAccumulate) {
  Tensor w = zeros({3, 2}, kFloat64).requires_grad_();
  Tensor idx = tensor<int64_t>({2, 0, 2, 2});
  embedding(w, idx).backward(tensor<double>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8}));
  auto w2 = random_input({4, 3}, 11);
  expect_gradcheck(
      [](const auto& v) {
        return embedding(v[0], tensor<int64_t>({3, 1, 3, 0, 3}, {5}));
      },
      {w2});
}

TEST(Embedding, HalfGradientSumsInFp32) {
  // 256 repeats of 1/256 in bf16 steps would stall; the fp32 sum gives exactly 1.
  Tensor w = zeros({1, 1}, kBFloat16).requires_grad_();
  Tensor idx = zeros({4096}, kInt64);
  embedding(w, idx).backward(full({4096, 1}, 1.0 / 4096, kBFloat16));
  EXPECT_EQ(w.grad().dtype(), kBFloat16);
  EXPECT_EQ(vals(w.grad())[0], 1.0);
}

TEST(Embedding, Errors) {
  Tensor w = zeros({3, 2});
  expect_error(
      [&] {
        embedding(w, tensor<int64_t>({0, 5}));
      },
      {"embedding", "index 5", "position 1", "3 rows"});
  expect_error([&] { embedding(w, tensor<int64_t>({-1})); }, "index -1");
  expect_error([&] { embedding(w, tensor<float>({0})); }, {"embedding", "float32"});
  expect_error([&] { embedding(zeros({3}), tensor<int64_t>({0})); }, {"2-D", "[3]"});
}

}  // namespace
}  // namespace mantissa
