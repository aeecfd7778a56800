#include <gtest/gtest.h>

#include <sstream>

#include "mantissa/core/allocator.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

TEST(Allocator, BF16TensorOfOneMillionElementsMovesCounterByExactlyTwoMB) {
  const int64_t before = memory_allocated();
  reset_peak_memory_stats();
  {
    Tensor t = empty({1000, 1000}, kBFloat16);
    EXPECT_EQ(memory_allocated() - before, 2'000'000);
    EXPECT_EQ(max_memory_allocated() - before, 2'000'000);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kAllocAlignment, 0u);
  }
  EXPECT_EQ(memory_allocated(), before);
  EXPECT_EQ(max_memory_allocated() - before, 2'000'000);
  reset_peak_memory_stats();
  EXPECT_EQ(max_memory_allocated(), before);
}

TEST(Allocator, ViewsShareStorage) {
  Tensor t = zeros({64, 64});
  const int64_t held = memory_allocated();
  Tensor v = t.transpose(0, 1).narrow(0, 3, 10).unsqueeze(0).expand({4, 10, 64});
  (void)v;
  EXPECT_EQ(memory_allocated(), held);
}

TEST(Tensor, CreationAndMetadata) {
  Tensor t = arange(6, kFloat32).reshape({2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(vals(t), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(vals(full({2}, 2.5, kBFloat16)), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(vals(ones({3}, kInt32)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(arange(1, 2, 0.25, kFloat64).numel(), 4);
  EXPECT_DOUBLE_EQ(scalar_tensor(3.0).item(), 3.0);
  EXPECT_EQ(scalar_tensor(3.0).dim(), 0);
}

TEST(Tensor, ViewsSeeTheRightElements) {
  Tensor t = arange(24, kFloat32).reshape({2, 3, 4});
  EXPECT_EQ(vals(t.transpose(0, 2).contiguous().select(0, 1).select(0, 2)),
            (std::vector<double>{9, 21}));
  EXPECT_EQ(vals(t.permute({2, 0, 1}).select(0, 3)), (std::vector<double>{3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(vals(t.narrow(2, 1, 2).select(0, 0).select(0, 0)), (std::vector<double>{1, 2}));
  EXPECT_EQ(vals(t.slice(2, 0, 4, 2).select(0, 1).select(0, 2)), (std::vector<double>{20, 22}));
  EXPECT_EQ(t.unsqueeze(1).shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(t.unsqueeze(1).squeeze().shape(), (Shape{2, 3, 4}));
  Tensor e = tensor<float>({1, 2, 3}, {3, 1}).expand({3, 2});
  EXPECT_EQ(vals(e), (std::vector<double>{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(e.strides(), (Shape{1, 0}));
  EXPECT_FALSE(t.transpose(0, 1).is_contiguous());
  EXPECT_EQ(t.flatten(1).shape(), (Shape{2, 12}));
}

TEST(Tensor, ViewOfNonContiguousNeedsReshape) {
  Tensor t = arange(6, kFloat32).reshape({2, 3}).t();
  EXPECT_THROW(t.view({6}), Error);
  EXPECT_EQ(vals(t.reshape({6})), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Tensor, BadShapesAreErrorsNamingTheShapes) {
  Tensor t = zeros({2, 3});
  try {
    t.reshape({4, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[4, 2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.expand({3, 3}), Error);
  EXPECT_THROW(t.select(0, 2), Error);
  EXPECT_THROW(t.permute({0, 0}), Error);
  EXPECT_THROW(t.item(), Error);
  EXPECT_THROW(zeros({2}, kInt64).requires_grad_(), Error);
}

TEST(Tensor, CopyCastsAndBroadcasts) {
  Tensor dst = zeros({2, 3}, kFloat64);
  dst.copy_(tensor<float>({1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(vals(dst), (std::vector<double>{1.5, 2.5, 3.5, 1.5, 2.5, 3.5}));
  dst.t().narrow(0, 1, 1).fill_(-1);
  EXPECT_EQ(vals(dst), (std::vector<double>{1.5, -1, 3.5, 1.5, -1, 3.5}));
  EXPECT_THROW(dst.copy_(zeros({4})), Error);
}

TEST(Tensor, ToDTypeRoundsToNearestEven) {
  // 1 + 2^-8 is a bf16 tie between 1 and 1 + 2^-7: rounds to the even (1.0).
  Tensor t = tensor<float>({1.00390625f, 1.01171875f});
  EXPECT_EQ(vals(t.to(kBFloat16)), (std::vector<double>{1.0, 1.015625}));
  EXPECT_EQ(t.to(kBFloat16).nbytes(), 4u);
  EXPECT_TRUE(t.to(kFloat32).is_same(t));
}

TEST(Generator, SeedReproducesAndStateRestores) {
  Generator a(42), b(42);
  EXPECT_EQ(vals(randn({5}, kFloat64, &a)), vals(randn({5}, kFloat64, &b)));
  std::string st = a.state();
  Tensor x = rand({7}, kFloat64, &a);
  Generator c(0);
  c.set_state(st);
  EXPECT_EQ(vals(rand({7}, kFloat64, &c)), vals(x));
  Tensor r = randint(0, 10, {1000}, kInt64, &a);
  for (double v : vals(r)) EXPECT_TRUE(v >= 0 && v < 10);
  auto p = vals(randperm(10, &a));
  std::sort(p.begin(), p.end());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p[i], i);
  // Mean and variance of many normals are near 0 and 1.
  auto n = vals(randn({20000}, kFloat64, &a));
  double m = 0, v = 0;
  for (double x : n) m += x;
  m /= n.size();
  for (double x : n) v += (x - m) * (x - m);
  v /= n.size();
  EXPECT_NEAR(m, 0.0, 0.03);
  EXPECT_NEAR(v, 1.0, 0.05);
}

TEST(Tensor, Printing) {
  Tensor t = tensor<float>({1, 2.5f, -3, 4}, {2, 2});
  EXPECT_EQ(t.to_string(), "tensor([[1.0000, 2.5000],\n        [-3.0000, 4.0000]])");
  EXPECT_EQ(t.to(kBFloat16).to_string().find("dtype=bfloat16") != std::string::npos, true);
}

// Shapes whose element count or byte size is past int64, negative sizes given to the random
// factories and a null buffer are errors, not a wrapped count (zeros({2^33, 2^31}) had numel 0
// and then wrote past its allocation) or a std::length_error.
TEST(Tensor, ImpossibleShapesAndBuffersAreErrors) {
  using testing::expect_error;
  expect_error(
      [] {
        zeros({int64_t{1} << 33, int64_t{1} << 31});
      },
      "has more elements than an int64 counts");
  expect_error([] { empty({int64_t{1} << 62}, kFloat32); },
               "needs more bytes than an int64 counts");
  // No elements, but strides past int64 (they overflowed: undefined behaviour, UBSan's report
  // on a hostile checkpoint).
  expect_error(
      [] {
        empty({0, int64_t{1} << 62, int64_t{1} << 62, 8}, kFloat32);
      },
      "its strides overflow int64");
  expect_error([] { randn({-3}); }, "negative dimension in shape [-3]");
  expect_error([] { from_buffer(nullptr, kFloat32, {3}); }, "null buffer for shape [3]");
  EXPECT_EQ(from_buffer(nullptr, kFloat32, {0}).numel(), 0);
}

// A dtype prints as its name, as a tensor prints as its values.
TEST(Tensor, DTypePrintsItsName) {
  std::ostringstream os;
  os << kBFloat16 << " " << zeros({2}, kFloat16).dtype();
  EXPECT_EQ(os.str(), "bfloat16 float16");
}

}  // namespace
}  // namespace mantissa
