#pragma once
// Test harness shared by every op test:
//  - expect_gradcheck: analytical gradients (backward with a random upstream gradient) against
//    central finite differences, in f64.
//  - expect_matches_f64: forward values and input gradients of an op run in f32/f16/bf16
//    against the same op run in f64, within a stated tolerance.
// It uses only Tensor members (no ops), so a bug in an op cannot hide a bug in the harness.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Random f64 tensor with values in [lo, hi), requires_grad set.
inline Tensor random_input(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator g(seed);
  Tensor t = uniform(shape, lo, hi, kFloat64, &g);
  t.requires_grad_(true);
  return t;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks d<f(x), r>/dx for every input that requires grad.
inline void expect_gradcheck(const OpFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                             double atol = 1e-6, double rtol = 1e-5) {
  Tensor out = fn(inputs);
  ASSERT_TRUE(out.requires_grad()) << "output does not require grad";
  Generator g(1234);
  Tensor r = uniform(out.shape(), -1.0, 1.0, kFloat64, &g);
  const std::vector<double> rv = r.to_vector<double>();
  for (const Tensor& in : inputs)
    if (in.defined() && in.requires_grad()) in.reset_grad();
  out.backward(r);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& in = inputs[k];
    if (!in.defined() || !in.requires_grad()) continue;
    ASSERT_TRUE(in.grad().defined()) << "input " << k << " received no gradient";
    ASSERT_EQ(in.grad().dtype(), in.dtype());
    ASSERT_EQ(in.grad().shape(), in.shape());
    const std::vector<double> analytic = in.grad().to_vector<double>();
    ASSERT_TRUE(in.is_contiguous());
    auto* x = in.data<double>();
    for (int64_t i = 0; i < in.numel(); ++i) {
      const double saved = x[i];
      x[i] = saved + eps;
      const double fp = dot(fn(inputs).detach().to_vector<double>(), rv);
      x[i] = saved - eps;
      const double fm = dot(fn(inputs).detach().to_vector<double>(), rv);
      x[i] = saved;
      const double numeric = (fp - fm) / (2 * eps);
      EXPECT_NEAR(analytic[i], numeric, atol + rtol * std::abs(numeric))
          << "input " << k << " element " << i;
    }
  }
}

// Runs fn on copies of `inputs` (f64 values) cast to `dtype`, and in f64; compares outputs
// and gradients: |low - ref| <= atol + rtol * |ref|.
inline void expect_matches_f64(const OpFn& fn, const std::vector<Tensor>& inputs, DType dtype,
                               double atol, double rtol) {
  // Fresh leaves in dtype `dt` from the values of `inputs`. The reference (dt = f64) is fed
  // the low-precision inputs widened exactly, so only the op's own rounding is measured.
  auto make_leaves = [&](DType dt) {
    std::vector<Tensor> leaves;
    for (const Tensor& in : inputs) {
      if (!in.defined() || !in.is_floating_point()) {
        leaves.push_back(in);
        continue;
      }
      Tensor c = in.detach().to(dtype).to(dt).clone().detach();
      c.requires_grad_(in.requires_grad());
      leaves.push_back(c);
    }
    return leaves;
  };
  std::vector<Tensor> ref_in = make_leaves(kFloat64);
  std::vector<Tensor> low_in = make_leaves(dtype);
  Tensor ref = fn(ref_in);
  Tensor low = fn(low_in);
  ASSERT_EQ(low.shape(), ref.shape());
  const auto rv = ref.detach().to_vector<double>();
  const auto lv = low.detach().to_vector<double>();
  for (size_t i = 0; i < rv.size(); ++i)
    EXPECT_NEAR(lv[i], rv[i], atol + rtol * std::abs(rv[i])) << "output element " << i;
  if (!ref.requires_grad()) return;
  Generator g(99);
  Tensor r = uniform(ref.shape(), -1.0, 1.0, kFloat64, &g);
  ref.backward(r);
  low.backward(r.to(low.dtype()));
  for (size_t k = 0; k < ref_in.size(); ++k) {
    if (!ref_in[k].defined() || !ref_in[k].requires_grad()) continue;
    ASSERT_TRUE(low_in[k].grad().defined()) << "input " << k << " got no gradient";
    EXPECT_EQ(low_in[k].grad().dtype(), dtype);
    const auto gr = ref_in[k].grad().to_vector<double>();
    const auto gl = low_in[k].grad().to_vector<double>();
    for (size_t i = 0; i < gr.size(); ++i)
      EXPECT_NEAR(gl[i], gr[i], atol + rtol * std::abs(gr[i]))
          << "grad of input " << k << " element " << i;
  }
}

// Typical tolerances: a few ulps of the storage dtype on O(1) values.
struct Tolerance {
  double atol, rtol;
};
inline Tolerance tolerance_for(DType dt) {
  if (dt == kFloat32) return {1e-5, 1e-5};
  if (dt == kFloat16) return {2e-3, 2e-3};
  if (dt == kBFloat16) return {1.6e-2, 1.6e-2};
  return {1e-12, 1e-12};
}

}  // namespace mantissa::testing
