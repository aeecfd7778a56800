// The float32 product for few rows (kernels/cpu/gemm/dense_gemv.h): against the float64 product
// within the bound of its fp32 sums, every SIMD level against the scalar one bit for bit, on
// shapes whose rows end anywhere inside sixteen elements, with W's rows apart by more than K;
// and a float32 Linear's forward of up to kDenseGemvMaxRows rows taking it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "kernels/cpu/gemm/dense_gemv.h"
#include "kernels/cpu/gemm/gemm_backend.h"
#include "mantissa/core/generator.h"
#include "mantissa/ops/linear.h"
#include "support/simd_levels.h"
#include "support/sixteen_lane_bound.h"

namespace mantissa::kernels {
namespace {

using mantissa::testing::expect_within_sixteen_lane_bound;
using mantissa::testing::simd_levels_here;

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

// (N, K, W's row stride): four rows of W at a time and the rows past the last four; K below,
// at and past sixteen, and a generation's 768 and 3072; rows apart by more than K.
using Shape3 = std::tuple<int64_t, int64_t, int64_t>;
const Shape3 kShapes[] = {{11, 128, 128}, {6, 96, 100}, {5, 100, 100},  {7, 37, 40},     {3, 5, 5},
                          {9, 17, 17},    {1, 1, 1},    {64, 768, 768}, {13, 3072, 3080}};

TEST(DenseGemv, WithinFp32BoundOfFloat64AndEveryLevelSameBits) {
  Generator gen(5);
  for (const auto& [n, k, ldw] : kShapes) {
    const Tensor w = randn({n, ldw}, kFloat32, &gen);
    const float* wd = w.data<float>();
    const Tensor bias = randn({n}, kFloat32, &gen);
    for (int64_t m = 1; m <= kDenseGemvMaxRows; ++m) {
      SCOPED_TRACE(::testing::Message() << "N " << n << " K " << k << " M " << m);
      const Tensor x = randn({m, k + 3}, kFloat32, &gen);  // rows apart by K + 3
      const float* xd = x.data<float>();
      std::vector<float> want;
      for (SimdLevel level : simd_levels_here()) {
        std::vector<float> y(static_cast<size_t>(m * n), 7.0f);
        dense_gemv_f32(wd, ldw, n, k, xd, k + 3, m, bias.data<float>(), y.data(), n, level);
        if (level == SimdLevel::kScalar) {
          want = y;
          expect_within_sixteen_lane_bound(
              y.data(), xd, k + 3, [&](int64_t j, int64_t c) { return double(wd[j * ldw + c]); },
              bias.data<float>(), m, n, k);
        } else {
          EXPECT_EQ(bits(y), bits(want)) << "level " << simd_level_name(level);
        }
      }
    }
  }
}

// A NaN in one row of W reaches only that output; no bias leaves the sums as they are.
TEST(DenseGemv, NanReachesOnlyItsOutputAndNoBiasAddsNothing) {
  Generator gen(7);
  const int64_t n = 9, k = 40;
  Tensor w = randn({n, k}, kFloat32, &gen);
  w.data<float>()[5 * k + 33] = NAN;
  const Tensor x = randn({1, k}, kFloat32, &gen);
  for (SimdLevel level : simd_levels_here()) {
    std::vector<float> y(n);
    dense_gemv_f32(w.data<float>(), k, n, k, x.data<float>(), k, 1, nullptr, y.data(), n, level);
    for (int64_t j = 0; j < n; ++j)
      EXPECT_EQ(std::isnan(y[j]), j == 5) << "output " << j << " at " << simd_level_name(level);
  }
}

// A float32 Linear's forward of 1 to kDenseGemvMaxRows rows is this kernel's product (same
// bits); MANTISSA_GEMM=onednn keeps oneDNN's, within fp32 sums of it.
TEST(DenseGemvDispatch, Float32LinearOfFewRowsTakesIt) {
  if (simd_level() < SimdLevel::kAvx2) GTEST_SKIP() << "the kernel is routed at AVX2 and above";
  Generator gen(10);
  const int64_t n = 300, k = 768;  // W of 230400 elements: above the routing's minimum
  const Tensor w = randn({n, k}, kFloat32, &gen);
  const Tensor bias = randn({n}, kFloat32, &gen);
  for (int64_t m = 1; m <= kDenseGemvMaxRows; ++m) {
    SCOPED_TRACE(::testing::Message() << "rows " << m);
    const Tensor x = randn({m, k}, kFloat32, &gen);
    const Tensor y = linear(x, w, bias);
    std::vector<float> want(static_cast<size_t>(m * n));
    dense_gemv_f32(w.data<float>(), k, n, k, x.data<float>(), k, m, bias.data<float>(), want.data(),
                   n);
    ASSERT_EQ(y.dtype(), kFloat32);
    EXPECT_EQ(std::memcmp(y.data<float>(), want.data(), want.size() * sizeof(float)), 0);
    const GemmBackend before = gemm_backend();
    set_gemm_backend(GemmBackend::kOnednn);
    const Tensor other = linear(x, w, bias);
    set_gemm_backend(before);
    for (int64_t i = 0; i < other.numel(); ++i)
      EXPECT_NEAR(y.data<float>()[i], other.data<float>()[i],
                  1e-4 * (1 + std::fabs(other.data<float>()[i])))
          << i;
  }
}

}  // namespace
}  // namespace mantissa::kernels
