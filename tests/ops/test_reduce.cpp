// Reductions: values, shapes with keepdim, dtype rules, accumulation precision, determinism,
// gradients (ties included) and errors.
#include <gtest/gtest.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmath>
#include <limits>
#include <string>

#include "mantissa/core/generator.h"
#include "mantissa/ops/reduce.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(Reduce, SumAndMeanValuesAndShapes) {
  Tensor a = arange(24, kFloat64).reshape({2, 3, 4});
  EXPECT_EQ(sum(a).dim(), 0);
  EXPECT_EQ(sum(a).item(), 276);
  EXPECT_EQ(mean(a).item(), 11.5);
  EXPECT_EQ(vals(sum(a, {0})),
            (std::vector<double>{12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}));
  EXPECT_EQ(vals(sum(a, {-1})), (std::vector<double>{6, 22, 38, 54, 70, 86}));
  EXPECT_EQ(vals(sum(a, {1})), (std::vector<double>{12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_EQ(vals(sum(a, {0, 2})), (std::vector<double>{60, 92, 124}));  // interleaved dims
  EXPECT_EQ(vals(mean(a, {1, -1})), (std::vector<double>{5.5, 17.5}));
  EXPECT_EQ(sum(a, {1}).shape(), (Shape{2, 4}));
  EXPECT_EQ(sum(a, {1}, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(sum(a, {0, 2}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(mean(a, {-1}, true).shape(), (Shape{2, 3, 1}));
  // dim=[] reduces everything (PyTorch), keepdim keeps every dim as 1.
  EXPECT_EQ(sum(a, {}).dim(), 0);
  EXPECT_EQ(sum(a, {}).item(), 276);
  EXPECT_EQ(sum(a, {}, true).shape(), (Shape{1, 1, 1}));
  // A 4-d interleaved case (reduced dims 0 and 2 of 4, needs the permuted path).
  Tensor b = arange(120, kFloat64).reshape({2, 3, 4, 5});
  const auto s = vals(sum(b, {0, 2}));
  ASSERT_EQ(s.size(), 15u);
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t l = 0; l < 5; ++l) {
      double want = 0;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t k = 0; k < 4; ++k) want += ((i * 3 + j) * 4 + k) * 5 + l;
      EXPECT_EQ(s[j * 5 + l], want);
    }
  // Non-contiguous input.
  EXPECT_EQ(vals(sum(a.transpose(0, 2), {0})), (std::vector<double>{6, 54, 22, 70, 38, 86}));
  // 0-dim input.
  EXPECT_EQ(sum(scalar_tensor(3.0), {0}).item(), 3.0);
  EXPECT_EQ(sum(scalar_tensor(3.0), {0}, true).dim(), 0);
}

TEST(Reduce, DtypeRules) {
  EXPECT_EQ(sum(tensor<int32_t>({1, 2, 3})).dtype(), kInt64);
  EXPECT_EQ(sum(tensor<int32_t>({1, 2, 3})).item(), 6);
  EXPECT_EQ(sum(tensor_of({1, 0, 1, 1}, {4}, kBool)).item(), 3);
  EXPECT_EQ(sum(tensor_of({200, 200}, {2}, kUInt8)).item(), 400);  // no wrap in int64
  EXPECT_EQ(sum(ones({4}, kBFloat16)).dtype(), kBFloat16);
  EXPECT_EQ(amax(tensor<int64_t>({3, -1, 7}), {0}).dtype(), kInt64);
  EXPECT_EQ(amax(tensor<int64_t>({3, -1, 7}), {0}).item(), 7);
  EXPECT_EQ(amax(tensor_of({0, 1, 0}, {3}, kBool), {}).item(), 1);
  // Empty reductions: sum is 0, mean is NaN.
  EXPECT_EQ(vals(sum(zeros({0, 3}), {0})), (std::vector<double>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(mean(zeros({0}, kFloat32)).item()));
}

TEST(Reduce, LowPrecisionSumsAccumulateInFp32AndRoundOnce) {
  // 4096 ones: an fp16 accumulator would stop at 2048; fp32 accumulation is exact.
  EXPECT_EQ(sum(ones({4096}, kFloat16)).item(), 4096);
  EXPECT_EQ(sum(ones({64, 4096}, kBFloat16), {1}).to_vector<double>(),
            std::vector<double>(64, 4096));
  EXPECT_EQ(mean(ones({3, 5000}, kFloat16), {1}).to_vector<double>(), std::vector<double>(3, 1));
  // 1 followed by 1000 x 2^-11: an fp16 accumulator never leaves 1 (each step is a tie that
  // rounds to even); fp32 accumulation gives 1.48828125, exact in fp16.
  std::vector<double> v(1001, std::ldexp(1.0, -11));
  v[0] = 1;
  EXPECT_EQ(sum(tensor_of(v, {1001}, kFloat16)).item(), 1.48828125);
}

TEST(Reduce, LargeReductionsMatchADoubleReference) {
  // The training-loop shapes: [256, 1024] over the last dim, over dim 0, and everything.
  Generator g(3);
  Tensor a = uniform({256, 1024}, -1, 1, kFloat32, &g);
  const auto av = a.to_vector<float>();
  std::vector<double> rows(256, 0), cols(1024, 0);
  double all = 0;
  for (int64_t i = 0; i < 256; ++i)
    for (int64_t j = 0; j < 1024; ++j) {
      rows[i] += av[i * 1024 + j];
      cols[j] += av[i * 1024 + j];
      all += av[i * 1024 + j];
    }
  const auto rs = vals(sum(a, {-1})), cs = vals(sum(a, {0})), ms = vals(mean(a, {1}));
  for (int64_t i = 0; i < 256; ++i) {
    EXPECT_NEAR(rs[i], rows[i], 2e-5);
    EXPECT_NEAR(ms[i], rows[i] / 1024, 2e-8);
  }
  // Columns accumulate 256 rows in sequence (fp32): a little looser.
  for (int64_t j = 0; j < 1024; ++j) EXPECT_NEAR(cs[j], cols[j], 1e-4);
  EXPECT_NEAR(sum(a).item(), all, 1e-3);
  EXPECT_NEAR(mean(a).item(), all / (256 * 1024), 5e-9);
  // bf16 input: fp32 accumulation then one rounding.
  Tensor b = a.to(kBFloat16);
  const auto bv = b.to_vector<float>();
  double ball = 0;
  for (float v : bv) ball += v;
  EXPECT_EQ(sum(b).to_vector<BFloat16>()[0].x, BFloat16(static_cast<float>(ball)).x);
}

TEST(Reduce, ResultsDoNotDependOnTheThreadCount) {
#ifdef _OPENMP
  Generator g(5);
  Tensor a = uniform({64, 8192}, -1, 1, kFloat32, &g);
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto s1 = vals(sum(a)), r1 = vals(sum(a, {1})), c1 = vals(sum(a, {0}));
  omp_set_num_threads(2);
  const auto s2 = vals(sum(a)), r2 = vals(sum(a, {1})), c2 = vals(sum(a, {0}));
  omp_set_num_threads(before);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(c1, c2);
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

TEST(Reduce, SumAndMeanGradcheck) {
  auto x = random_input({2, 3, 4}, 81);
  expect_gradcheck([](const auto& v) { return sum(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return mean(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return sum(v[0], {1}); }, {x});
  expect_gradcheck([](const auto& v) { return sum(v[0], {0, 2}, true); }, {x});
  expect_gradcheck([](const auto& v) { return mean(v[0], {-1}); }, {x});
  expect_gradcheck([](const auto& v) { return mean(v[0], {0, -1}, true); }, {x});
  expect_gradcheck([](const auto& v) { return sum(v[0].transpose(0, 2), {1}); }, {x});
}

TEST(Reduce, MaxFamilyValues) {
  Tensor a = tensor<double>({1, 5, 3, 5, 2, 0}, {2, 3});
  EXPECT_EQ(vals(amax(a, {1})), (std::vector<double>{5, 5}));
  EXPECT_EQ(vals(amax(a, {0})), (std::vector<double>{5, 5, 3}));
  EXPECT_EQ(amax(a, {0, 1}, true).shape(), (Shape{1, 1}));
  // torch.amax(x): every dim, a 0-dim result, the gradient split between the two maxima.
  Tensor x = tensor<double>({1, 5, 3, 5, 2, 0}, {2, 3}).requires_grad_(true);
  Tensor all = amax(x);
  EXPECT_EQ(all.dim(), 0);
  EXPECT_EQ(all.item(), 5);
  all.backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 0.5, 0, 0.5, 0, 0}));
  EXPECT_EQ(max(a).item(), 5);
  EXPECT_EQ(max(a).dim(), 0);
  auto [v, i] = max(a, 1);
  EXPECT_EQ(vals(v), (std::vector<double>{5, 5}));
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(vals(i), (std::vector<double>{1, 0}));  // first maximum
  auto [v0, i0] = max(a, 0, true);
  EXPECT_EQ(v0.shape(), (Shape{1, 3}));
  EXPECT_EQ(vals(v0), (std::vector<double>{5, 5, 3}));
  EXPECT_EQ(vals(i0), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(vals(argmax(a, -1)), (std::vector<double>{1, 0}));
  EXPECT_EQ(argmax(a, -1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(vals(argmax(tensor<int32_t>({-4, 9, 9, 2}), 0)), (std::vector<double>{1}));
  // NaN is the maximum (first NaN's index), as in PyTorch.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor n = tensor<double>({1, nan, 7, nan});
  EXPECT_TRUE(std::isnan(max(n).item()));
  EXPECT_TRUE(std::isnan(amax(n, {0}).item()));
  EXPECT_EQ(argmax(n, 0).item(), 1);
  // Large row reductions (chunked path) agree with argmax.
  Generator g(9);
  Tensor big = uniform({4, 20000}, -1, 1, kFloat32, &g);
  const auto bv = big.to_vector<float>();
  const auto bm = vals(amax(big, {1}));
  const auto bi = vals(argmax(big, 1));
  for (int64_t r = 0; r < 4; ++r) {
    float m = -2;
    int64_t at = 0;
    for (int64_t c = 0; c < 20000; ++c)
      if (bv[r * 20000 + c] > m) m = bv[r * 20000 + c], at = c;
    EXPECT_EQ(bm[r], m);
    EXPECT_EQ(bi[r], at);
  }
}

TEST(Reduce, MaxGradientsSplitTiesOrPickTheFirstIndex) {
  Tensor x = tensor<double>({1, 3, 3, 2, 3, 0}, {2, 3});
  x.requires_grad_();
  amax(x, {1}).backward(tensor<double>({4, 6}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 2, 2, 0, 6, 0}));
  x.reset_grad();
  max(x).backward();  // three tied maxima share the gradient
  const auto g = vals(x.grad());
  EXPECT_DOUBLE_EQ(g[1], 1.0 / 3);
  EXPECT_DOUBLE_EQ(g[2], 1.0 / 3);
  EXPECT_DOUBLE_EQ(g[4], 1.0 / 3);
  EXPECT_EQ(g[0] + g[3] + g[5], 0);
  x.reset_grad();
  max(x, 1).values.backward(tensor<double>({4, 6}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 4, 0, 0, 6, 0}));  // first max only
  EXPECT_FALSE(max(x, 1).indices.requires_grad());
  EXPECT_FALSE(argmax(x, 1).requires_grad());
}

TEST(Reduce, MaxGradcheck) {
  auto x = random_input({3, 4}, 91);  // distinct values, so no ties
  expect_gradcheck([](const auto& v) { return amax(v[0], {1}); }, {x});
  expect_gradcheck([](const auto& v) { return amax(v[0], {0}, true); }, {x});
  expect_gradcheck([](const auto& v) { return max(v[0]); }, {x});
  expect_gradcheck([](const auto& v) { return max(v[0], 0).values; }, {x});
  expect_gradcheck([](const auto& v) { return max(v[0], -1, true).values; }, {x});
}

TEST(Reduce, LowPrecisionMatchesFloat64) {
  auto x = random_input({6, 40}, 101);
  const std::vector<testing::OpFn> ops = {
      [](const auto& v) { return sum(v[0]); },
      [](const auto& v) { return sum(v[0], {0}); },
      [](const auto& v) { return sum(v[0], {1}, true); },
      [](const auto& v) { return mean(v[0], {-1}); },
      [](const auto& v) { return mean(v[0]); },
      [](const auto& v) { return amax(v[0], {1}); },
      [](const auto& v) { return max(v[0]); },
      [](const auto& v) { return max(v[0], 0).values; },
  };
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = tolerance_for(dt);
    for (size_t i = 0; i < ops.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << dt.name() << " op " << i);
      expect_matches_f64(ops[i], {x}, dt, tol.atol, tol.rtol);
    }
  }
}

TEST(Reduce, Errors) {
  Tensor a = ones({2, 3});
  expect_error([&] { sum(a, {2}); }, {"[sum]", "out of range"});
  expect_error([&] { mean(a, {-3}); }, {"[mean]", "out of range"});
  expect_error([&] { sum(a, {1, -1}); }, {"[sum]", "multiple times"});
  expect_error([&] { max(a, 5); }, {"[max]", "out of range"});
  expect_error([&] { argmax(a, -3); }, {"[argmax]", "out of range"});
  expect_error([&] { mean(ones({3}, kInt64)); }, {"[mean]", "int64"});
  expect_error([&] { amax(zeros({2, 0}), {1}); }, {"[amax]", "size 0"});
  expect_error([&] { max(zeros({0})); }, {"[max]", "size 0"});
  expect_error([&] { max(zeros({3, 0}), 1); }, {"[max]", "size 0"});
  expect_error([&] { sum(ones({2}, kFloat8_e4m3fn)); }, {"[sum]", "float8_e4m3fn"});
}

}  // namespace
}  // namespace mantissa
