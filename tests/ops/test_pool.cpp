// max_pool2d / avg_pool2d / adaptive_avg_pool2d: hand-computed values, a naive reference,
// gradients against finite differences, every dtype against f64, and error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mantissa/ops/pool.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

Tensor arange_image(int64_t h, int64_t w, DType dt = kFloat64) {
  std::vector<double> v(h * w);
  for (int64_t i = 0; i < h * w; ++i) v[i] = static_cast<double>(i);
  return tensor_of(v, {1, 1, h, w}, dt);
}

// max_pool2d by definition on one plane (padding = -inf).
std::vector<double> naive_max(const std::vector<double>& x, int64_t H, int64_t W, Size2 k, Size2 s,
                              Size2 p, Size2 d) {
  const int64_t OH = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) / s[0] + 1;
  const int64_t OW = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
  std::vector<double> y;
  for (int64_t i = 0; i < OH; ++i)
    for (int64_t j = 0; j < OW; ++j) {
      double m = -kInf;
      for (int64_t a = 0; a < k[0]; ++a)
        for (int64_t b = 0; b < k[1]; ++b) {
          const int64_t r = i * s[0] - p[0] + a * d[0], c = j * s[1] - p[1] + b * d[1];
          if (r >= 0 && r < H && c >= 0 && c < W) m = std::max(m, x[r * W + c]);
        }
      y.push_back(m);
    }
  return y;
}

struct MaxCase {
  Size2 k, s, p, d;
};
const MaxCase kMaxCases[] = {
    {{2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}},
    {{3, 2}, {1, 2}, {1, 0}, {2, 1}},
    {{2, 3}, {3, 1}, {0, 1}, {1, 2}},
};

TEST(MaxPool2d, ForwardMatchesNaiveReference) {
  const Tensor x = rnd({2, 3, 7, 8}, kFloat64, 1);
  for (const MaxCase& mc : kMaxCases) {
    const Tensor y = max_pool2d(x, mc.k, mc.s, mc.p, mc.d);
    const auto xv = vals(x), yv = vals(y);
    const int64_t plane_out = y.size(2) * y.size(3);
    for (int64_t pl = 0; pl < 6; ++pl) {
      const std::vector<double> xp(xv.begin() + pl * 56, xv.begin() + (pl + 1) * 56);
      const auto want = naive_max(xp, 7, 8, mc.k, mc.s, mc.p, mc.d);
      ASSERT_EQ(static_cast<int64_t>(want.size()), plane_out);
      const std::vector<double> got(yv.begin() + pl * plane_out, yv.begin() + (pl + 1) * plane_out);
      expect_near_all(got, want, 0);
    }
  }
}

TEST(MaxPool2d, HandComputedAndDefaultStride) {
  // 4x4 arange, 2x2 windows, stride defaults to the kernel: the bottom-right of each window.
  const Tensor y = max_pool2d(arange_image(4, 4), {2, 2});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  expect_near_all(vals(y), {5, 7, 13, 15}, 0);
}

TEST(MaxPool2d, TiesSendTheGradientToTheFirstIndex) {
  Tensor x = ones({1, 1, 2, 4}, kFloat32).requires_grad_(true);
  Tensor y = max_pool2d(x, {2, 2});
  y.backward(tensor_of({3, 5}, {1, 1, 1, 2}, kFloat32));
  expect_near_all(vals(x.grad()), {3, 0, 5, 0, 0, 0, 0, 0}, 0);
  // Overlapping windows sharing the maximum accumulate into it.
  Tensor z = tensor_of({0, 9, 0, 0}, {1, 1, 1, 4}, kFloat64).requires_grad_(true);
  max_pool2d(z, {1, 2}, {1, 1}).backward(ones({1, 1, 1, 3}, kFloat64));
  expect_near_all(vals(z.grad()), {0, 2, 1, 0}, 0);
}

TEST(MaxPool2d, NanPropagates) {
  const Tensor x = tensor_of({1, kNaN, 3, 4}, {1, 1, 2, 2}, kFloat32);
  EXPECT_TRUE(std::isnan(max_pool2d(x, {2, 2}).item()));
}

TEST(MaxPool2d, GradcheckF64) {
  for (const MaxCase& mc : kMaxCases) {
    expect_gradcheck(
        [mc](const std::vector<Tensor>& in) { return max_pool2d(in[0], mc.k, mc.s, mc.p, mc.d); },
        {random_input({2, 2, 6, 7}, 11)});
  }
}

TEST(MaxPool2d, EveryDtypeIsExactAgainstF64) {
  const auto fn = [](const std::vector<Tensor>& in) {
    return max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1});
  };
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    // The maximum is one of the inputs: no rounding at all, in any dtype.
    const Tensor x = rnd({2, 3, 7, 7}, dt, 21);
    const Tensor y = fn({x});
    EXPECT_EQ(y.dtype(), dt);
    expect_near_all(vals(y), vals(fn({x.to(kFloat64)})), 0);
    // Gradients differ from f64 only by the rounding of the upstream gradient.
    const Tolerance t = tolerance_for(dt);
    expect_matches_f64(fn, {random_input({2, 3, 7, 7}, 21)}, dt, t.atol, t.rtol);
  }
}

TEST(AvgPool2d, CountIncludePadHandComputed) {
  const Tensor x = ones({1, 1, 3, 3}, kFloat64);
  // Padded 3x3 windows around a 3x3 image of ones: 4, 6 or 9 real elements of 9.
  expect_near_all(vals(avg_pool2d(x, {3, 3}, {1, 1}, {1, 1})),
                  {4. / 9, 6. / 9, 4. / 9, 6. / 9, 1, 6. / 9, 4. / 9, 6. / 9, 4. / 9}, 1e-15);
  expect_near_all(vals(avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}, false)), std::vector<double>(9, 1.0),
                  1e-15);
  // 4x4 arange, 2x2 windows: means of {0,1,4,5}, {2,3,6,7}, ...
  expect_near_all(vals(avg_pool2d(arange_image(4, 4), {2, 2})), {2.5, 4.5, 10.5, 12.5}, 1e-15);
  // Width 5, k=2, s=2, pad 1: the first window holds the padding and x[0]; count_include_pad
  // divides it by 2 all the same.
  const Tensor r = avg_pool2d(arange_image(1, 5), {1, 2}, {1, 2}, {0, 1});
  expect_near_all(vals(r), {0. / 2, (1 + 2) / 2., (3 + 4) / 2.}, 1e-15);
}

TEST(AvgPool2d, GradcheckF64AndDtypes) {
  for (bool include : {true, false}) {
    const auto fn = [include](const std::vector<Tensor>& in) {
      return avg_pool2d(in[0], {3, 2}, {2, 1}, {1, 1}, include);
    };
    expect_gradcheck(fn, {random_input({2, 2, 5, 6}, 31)});
    for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
      const Tolerance t = tolerance_for(dt);
      expect_matches_f64(fn, {random_input({2, 2, 5, 6}, 32)}, dt, t.atol, t.rtol);
    }
  }
}

TEST(AdaptiveAvgPool2d, WindowsFollowTheStartEndFormulas) {
  // Width 5 -> 3: windows [0,2), [1,4), [3,5) (start floor(i*5/3), end ceil((i+1)*5/3)).
  const Tensor y = adaptive_avg_pool2d(arange_image(1, 5), {1, 3});
  expect_near_all(vals(y), {0.5, 2.0, 3.5}, 1e-15);
  // Output 1x1 is the global mean; output = input size is the identity.
  expect_near_all(vals(adaptive_avg_pool2d(arange_image(4, 4), {1, 1})), {7.5}, 1e-15);
  const Tensor x = rnd({2, 3, 4, 5}, kFloat32, 41);
  expect_near_all(vals(adaptive_avg_pool2d(x, {4, 5})), vals(x), 0);
  // Upsampling repeats: 2 -> 3 gives windows [0,1), [0,2), [1,2).
  expect_near_all(vals(adaptive_avg_pool2d(tensor_of({2, 4}, {1, 1, 1, 2}, kFloat64), {1, 3})),
                  {2, 3, 4}, 1e-15);
}

TEST(AdaptiveAvgPool2d, GradcheckF64AndDtypes) {
  const auto fn = [](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {3, 4}); };
  expect_gradcheck(fn, {random_input({2, 2, 7, 6}, 51)});
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const Tolerance t = tolerance_for(dt);
    expect_matches_f64(fn, {random_input({2, 2, 7, 6}, 52)}, dt, t.atol, t.rtol);
  }
}

TEST(Pool2d, BadInputsGiveClearErrors) {
  const Tensor x = rnd({1, 2, 4, 4}, kFloat32, 1);
  expect_error(
      [&] {
        max_pool2d(x, {2, 2}, {2, 2}, {2, 0});
      },
      {"[max_pool2d]", "at most half of kernel_size"});
  expect_error([&] { max_pool2d(x.flatten(0, 1), {2, 2}); }, {"4-D input", "[2, 4, 4]"});
  expect_error([&] { avg_pool2d(x, {5, 5}); }, {"[avg_pool2d]", "smaller than the window"});
  expect_error([&] { avg_pool2d(x, {0, 2}); }, "must be positive");
  expect_error([&] { adaptive_avg_pool2d(x, {0, 2}); }, {"[adaptive_avg_pool2d]", "(0, 2)"});
  expect_error([&] { max_pool2d(tensor<int64_t>({1, 2, 3, 4}, {1, 1, 2, 2}), {2, 2}); }, "int64");
}

}  // namespace
}  // namespace mantissa
