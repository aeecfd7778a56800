#pragma once
// The bound of a product for few rows that sums each output in sixteen fp32 lanes (the 4-bit and
// the float32 few-rows kernels): ceil(K / 16) FMAs per lane, four adds across the lanes and the
// bias, each rounding at most 2^-24 relative to a partial sum bounded by sum |x w| + |bias|.
// Checks y (m x n, row-major) against the float64 sum of x[i, c] * w(j, c) plus bias[j].
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace mantissa::testing {

// w(j, c) gives W's element (row j, column c) as a double.
template <typename WeightAt>
void expect_within_sixteen_lane_bound(const float* y, const float* x, int64_t ldx, WeightAt w,
                                      const float* bias, int64_t m, int64_t n, int64_t k) {
  const double eps = std::ldexp((k + 15) / 16 + 5, -24);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias[j], mag = std::fabs(sum);
      for (int64_t c = 0; c < k; ++c) {
        const double p = double(x[i * ldx + c]) * w(j, c);
        sum += p;
        mag += std::fabs(p);
      }
      EXPECT_LE(std::fabs(y[i * n + j] - sum), eps * mag)
          << "y[" << i << "][" << j << "] = " << y[i * n + j] << ", float64 " << sum;
    }
}

}  // namespace mantissa::testing
