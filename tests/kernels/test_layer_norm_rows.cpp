// Layer norm's row loops (src/kernels/cpu/norm/layer_norm_rows.h) at every level this CPU runs,
// against a double-precision evaluation of the same formulas; row lengths cover the 16-lane
// sums' tails. The op-level tests (tests/ops/test_layer_norm.cpp) check the op's values and
// finite-difference gradients through whichever level is active.
#include "kernels/cpu/norm/layer_norm_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::cpu {
namespace {

struct Level {
  std::string name;
  const LnRowKernels* k;
};

std::vector<Level> levels() {
  std::vector<Level> out{{"baseline", &kLnBaseline}};
  if (simd_level() >= SimdLevel::kAvx2) out.push_back({"avx2", &kLnAvx2});
  return out;
}

std::vector<float> random_values(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(gen);
  return v;
}

constexpr int64_t kLengths[] = {1, 3, 8, 15, 16, 17, 33, 64, 256, 1000};

TEST(LayerNormRows, ForwardMatchesDouble) {
  const float eps = 1e-5f;
  for (const Level& lv : levels()) {
    for (int64_t n : kLengths) {
      // A large mean checks the two-pass variance (no cancellation).
      const auto x = random_values(n, 1, 99.0f, 101.0f);
      const auto w = random_values(n, 2, 0.5f, 1.5f), b = random_values(n, 3, -1.0f, 1.0f);
      std::vector<float> y(n), d(n);
      float mean = 0, rstd = 0;
      lv.k->forward(x.data(), w.data(), b.data(), y.data(), d.data(), n, eps, &mean, &rstd);
      double m = 0, v = 0;
      for (float xi : x) m += xi;
      m /= double(n);
      for (float xi : x) v += (xi - m) * (xi - m);
      const double rs = 1.0 / std::sqrt(v / double(n) + eps);
      EXPECT_NEAR(mean, m, 1e-6 * 100) << lv.name << " n " << n;
      EXPECT_NEAR(rstd, rs, 1e-4 * rs) << lv.name << " n " << n;
      for (int64_t j = 0; j < n; ++j)
        ASSERT_NEAR(y[j], (x[j] - m) * rs * w[j] + b[j], 2e-4)
            << lv.name << " n " << n << " j " << j;
    }
  }
}

TEST(LayerNormRows, BackwardMatchesDouble) {
  for (const Level& lv : levels()) {
    for (int64_t n : kLengths) {
      const auto x = random_values(n, 4, -2.0f, 2.0f), g = random_values(n, 5, -1.0f, 1.0f);
      const auto w = random_values(n, 6, 0.5f, 1.5f);
      const float mean = 0.1f, rstd = 0.8f;
      std::vector<float> dx(n), gh(n), xh(n);
      lv.k->backward(g.data(), x.data(), w.data(), mean, rstd, dx.data(), gh.data(), xh.data(), n);
      double sg = 0, sgx = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double ghj = double(g[j]) * w[j], xhj = (double(x[j]) - mean) * rstd;
        sg += ghj;
        sgx += ghj * xhj;
      }
      sg /= double(n);
      sgx /= double(n);
      for (int64_t j = 0; j < n; ++j) {
        const double want = rstd * (double(g[j]) * w[j] - sg - (double(x[j]) - mean) * rstd * sgx);
        ASSERT_NEAR(dx[j], want, 1e-5) << lv.name << " n " << n << " j " << j;
      }
      // dx may alias x.
      std::vector<float> xa = x;
      lv.k->backward(g.data(), xa.data(), w.data(), mean, rstd, xa.data(), gh.data(), xh.data(), n);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(xa[j], dx[j]) << lv.name << " aliased, j " << j;
    }
  }
}

TEST(LayerNormRows, AccumulateWeightAndBiasSums) {
  for (const Level& lv : levels()) {
    for (int64_t c : {1, 7, 8, 9, 64}) {
      const auto xh = random_values(c, 7, -2.0f, 2.0f), g = random_values(c, 8, -1.0f, 1.0f);
      std::vector<float> sw(c, 0.25f), sb(c, -0.5f);
      lv.k->accumulate_wb(g.data(), xh.data(), sw.data(), sb.data(), c);
      for (int64_t j = 0; j < c; ++j) {
        ASSERT_NEAR(sw[j], 0.25 + double(g[j]) * double(xh[j]), 1e-6) << lv.name;
        ASSERT_NEAR(sb[j], -0.5 + double(g[j]), 1e-7) << lv.name;
      }
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::cpu
