#pragma once
// Shared by the CUDA tests: skip where no GPU can run them (every CI machine), and random
// inputs that are the same on the CPU and the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "mantissa/core/cuda.h"
#include "mantissa/core/tensor.h"

#define MANTISSA_REQUIRE_GPU()                                                     \
  do {                                                                             \
    if (!::mantissa::cuda::is_available())                                         \
      GTEST_SKIP() << "no usable GPU: " << ::mantissa::cuda::unavailable_reason(); \
  } while (0)

namespace mantissa::cuda_test {

inline const Device kGpu = cuda_device(0);

// Normal(0, scale) values on the CPU, in `dtype`.
inline Tensor randn_cpu(const Shape& shape, uint32_t seed, double scale = 1.0,
                        DType dtype = kFloat32) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (double& x : v) x = dist(gen);
  return tensor_of(v, shape, dtype);
}

// max |a - b| / max(max |b|, tiny), both brought to the CPU in float64.
inline double rel_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(kCPU).to_vector<double>();
  const std::vector<double> y = b.to(kCPU).to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;
    num = std::max(num, std::abs(x[i] - y[i]));
    den = std::max(den, std::abs(y[i]));
  }
  return num / den;
}

}  // namespace mantissa::cuda_test
