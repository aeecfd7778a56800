// The 2x2 stride-2 max pool kernels (kernels/cpu/pool_kernels.h) on every level this CPU runs,
// against the general max pool in f64: odd sizes, rows longer than one vector, ties, signed
// zeros, infinities and NaN, forward values and gradients bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/pool_kernels.h"
#include "mantissa/ops/pool.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;
using kernels::cpu::PoolLevel;

// Runs the body on each level, then restores the best one.
template <typename F>
void for_each_level(F&& body) {
  for (PoolLevel level : {PoolLevel::kScalar, PoolLevel::kAvx512}) {
    if (!kernels::cpu::force_pool_level(level)) continue;
    SCOPED_TRACE(level == PoolLevel::kScalar ? "scalar" : "avx512");
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
  const Shape shapes[] = {{2, 3, 8, 8}, {1, 2, 7, 9}, {2, 1, 3, 70}, {1, 1, 2, 2}, {3, 2, 33, 5}};
  for_each_level([&] {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(shape_str(shape));
      const Tensor x64 = tricky_input(shape, 5).requires_grad_(true);
      const Tensor y64 = max_pool2d(x64, {2, 2});
      // An upstream gradient with signed zeros: the input gradient is 0 + g.
      std::vector<double> gv = vals(rnd(y64.shape(), kBFloat16, 6));
      for (size_t i = 0; i < gv.size(); i += 5) gv[i] = -0.0;
      y64.backward(tensor_of(gv, y64.shape(), kFloat64));
      for (DType dt : {kFloat32, kBFloat16}) {
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

}  // namespace
}  // namespace mantissa
