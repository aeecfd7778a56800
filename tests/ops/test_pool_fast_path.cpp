// The 2x2 stride-2 pool kernels (kernels/cpu/pool/pool_kernels.h) on every level this CPU runs
// (f32, bf16, and f16 for max),
// against the general pools: max against f64, average against adaptive_avg_pool2d with the
// same windows (the general loops) and a float reference for odd sizes; rows longer than one
// vector, ties, signed zeros, infinities and NaN; forward values and gradients bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/pool/pool_kernels.h"
#include "mantissa/ops/pool.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

// Runs the body on each level, then restores the best one.
template <typename F>
void for_each_level(F&& body) {
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (!kernels::cpu::force_pool_level(level)) continue;
    SCOPED_TRACE(simd_level_name(level));
    body();
  }
  kernels::cpu::force_pool_level(std::nullopt);
}

// Values with ties, signed zeros, infinities and a few NaNs, exactly representable in bf16.
Tensor tricky_input(const Shape& shape, uint64_t seed) {
  std::vector<double> v = vals(rnd(shape, kBFloat16, seed));
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 11 == 3) v[i] = v[i - 1];  // a tie with the left neighbour
    if (i % 17 == 5) v[i] = -0.0;
    if (i % 19 == 7) v[i] = 0.0;
    if (i % 23 == 9) v[i] = -kInf;
    if (i % 29 == 4) v[i] = kInf;
    if (i % 31 == 6) v[i] = kNaN;
  }
  return tensor_of(v, shape, kFloat64);
}

void expect_same_bits(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = vals(got), w = vals(want);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i;
    } else {
      EXPECT_EQ(g[i], w[i]) << "element " << i;
      EXPECT_EQ(std::signbit(g[i]), std::signbit(w[i])) << "element " << i;
    }
  }
}

TEST(MaxPool2x2, MatchesTheGeneralPathOnEveryLevel) {
  const Shape shapes[] = {{2, 3, 8, 8},  {1, 2, 7, 9},   {2, 1, 3, 70},  {1, 1, 2, 2},
                          {3, 2, 33, 5}, {2, 2, 28, 28}, {1, 3, 14, 14}, {1, 1, 5, 34}};
  for_each_level([&] {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(shape_str(shape));
      const Tensor x64 = tricky_input(shape, 5).requires_grad_(true);
      const Tensor y64 = max_pool2d(x64, {2, 2});
      // An upstream gradient with signed zeros: the input gradient is 0 + g.
      std::vector<double> gv = vals(rnd(y64.shape(), kBFloat16, 6));
      for (size_t i = 0; i < gv.size(); i += 5) gv[i] = -0.0;
      y64.backward(tensor_of(gv, y64.shape(), kFloat64));
      for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
        SCOPED_TRACE(dt.name());
        const Tensor x = x64.detach().to(dt).requires_grad_(true);
        const Tensor y = max_pool2d(x, {2, 2});
        EXPECT_EQ(y.dtype(), dt);
        expect_same_bits(y, y64);
        y.backward(tensor_of(gv, y.shape(), dt));
        EXPECT_EQ(x.grad().dtype(), dt);
        expect_same_bits(x.grad(), x64.grad());
      }
    }
  });
}

TEST(MaxPool2x2, NanWinsWhereverItSits) {
  for_each_level([&] {
    for (int tap = 0; tap < 4; ++tap) {
      std::vector<double> v = {1, 2, 3, 4};
      v[tap] = kNaN;
      Tensor x = tensor_of(v, {1, 1, 2, 2}, kFloat32).requires_grad_(true);
      const Tensor y = max_pool2d(x, {2, 2});
      EXPECT_TRUE(std::isnan(y.item()));
      y.backward(ones({1, 1, 1, 1}, kFloat32));
      std::vector<double> want(4, 0.0);
      want[tap] = 1;
      expect_near_all(vals(x.grad()), want, 0);
    }
  });
}

TEST(AvgPool2x2, MatchesTheGeneralPathOnEveryLevel) {
  // Even sizes: adaptive_avg_pool2d to half the size has the same windows and runs the
  // general loops.
  const Shape shapes[] = {{2, 3, 8, 8}, {1, 2, 6, 70}, {2, 1, 34, 2}};
  for_each_level([&] {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(shape_str(shape));
      for (DType dt : {kFloat32, kBFloat16}) {
        SCOPED_TRACE(dt.name());
        const Tensor base = tricky_input(shape, 8).to(dt);
        const Tensor xf = base.detach().requires_grad_(true);
        const Tensor xg = base.detach().requires_grad_(true);
        const Tensor yf = avg_pool2d(xf, {2, 2});
        const Tensor yg = adaptive_avg_pool2d(xg, {shape[2] / 2, shape[3] / 2});
        EXPECT_EQ(yf.dtype(), dt);
        expect_same_bits(yf, yg);
        const Tensor g = rnd(yf.shape(), dt, 9);
        yf.backward(g);
        yg.backward(g);
        expect_same_bits(xf.grad(), xg.grad());
      }
    }
  });
}

// ((0 + a) + b + c + d) / 4 in fp32, rounded once into dt; gradients 0 + g / 4, zeros where no
// window reaches.
void expect_avg_reference(const Tensor& x, const Tensor& g, DType dt) {
  const int64_t h = x.size(2), w = x.size(3), oh = h / 2, ow = w / 2;
  const std::vector<double> xv = vals(x), gv = vals(g);
  std::vector<double> y(oh * ow), gx(h * w, 0.0);
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t j = 0; j < ow; ++j) {
      float s = 0.0f;
      for (int64_t t = 0; t < 4; ++t)
        s += static_cast<float>(xv[(2 * i + t / 2) * w + 2 * j + t % 2]);
      y[i * ow + j] = vals(tensor_of({s / 4.0f}, {1}, kFloat32).to(dt))[0];
      const float share = 0.0f + static_cast<float>(gv[i * ow + j]) / 4.0f;
      for (int64_t t = 0; t < 4; ++t)
        gx[(2 * i + t / 2) * w + 2 * j + t % 2] = vals(tensor_of({share}, {1}, kFloat32).to(dt))[0];
    }
  Tensor xl = x.detach().requires_grad_(true);
  const Tensor out = avg_pool2d(xl, {2, 2});
  expect_same_bits(out, tensor_of(y, out.shape(), kFloat64));
  out.backward(g);
  expect_same_bits(xl.grad(), tensor_of(gx, x.shape(), kFloat64));
}

TEST(AvgPool2x2, OddSizesMatchAFloatReference) {
  for_each_level([&] {
    for (DType dt : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(dt.name());
      for (const Shape& shape : {Shape{1, 1, 7, 9}, Shape{1, 1, 3, 37}, Shape{1, 1, 5, 2}}) {
        SCOPED_TRACE(shape_str(shape));
        const Tensor x = rnd(shape, dt, 10);
        const Tensor g = rnd({1, 1, shape[2] / 2, shape[3] / 2}, dt, 11);
        expect_avg_reference(x, g, dt);
      }
    }
  });
}

}  // namespace
}  // namespace mantissa
