#pragma once
// Runs an op on the CPU and on the GPU from the same inputs and compares the outputs and the
// inputs' gradients (after backward with the same random upstream gradient).
#include <functional>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::cuda_test {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Leaves of the inputs on `device`; floating ones require grad when `grads`.
inline std::vector<Tensor> leaves(const std::vector<Tensor>& inputs, Device device, bool grads) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    Tensor l = device.is_cpu() ? t.detach().clone() : t.detach().to(device);
    if (grads && l.is_floating_point()) l.requires_grad_(true);
    out.push_back(l);
  }
  return out;
}

// Output within tol (relative to the largest CPU value), and the gradients when `grads`.
inline void check_op(const std::string& what, const std::vector<Tensor>& inputs, const OpFn& f,
                     double tol, bool grads = true, double grad_tol = -1) {
  SCOPED_TRACE(what);
  if (grad_tol < 0) grad_tol = tol;
  const std::vector<Tensor> hc = leaves(inputs, kCPU, grads);
  const std::vector<Tensor> gc = leaves(inputs, kGpu, grads);
  const Tensor oh = f(hc);
  const Tensor og = f(gc);
  ASSERT_TRUE(og.is_cuda());
  ASSERT_EQ(og.dtype(), oh.dtype());
  ASSERT_EQ(og.shape(), oh.shape());
  EXPECT_LE(rel_error(og, oh), tol) << "forward";
  if (!grads || !oh.is_floating_point() || !oh.requires_grad()) return;
  const Tensor w = randn_cpu(oh.shape(), 1234).to(oh.dtype());
  sum(mul(oh, w)).backward();
  sum(mul(og, w.to(kGpu))).backward();
  for (size_t i = 0; i < hc.size(); ++i) {
    if (!hc[i].requires_grad()) continue;
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    ASSERT_TRUE(hc[i].grad().defined());
    ASSERT_TRUE(gc[i].grad().defined());
    EXPECT_TRUE(gc[i].grad().is_cuda());
    EXPECT_EQ(gc[i].grad().dtype(), hc[i].grad().dtype());
    EXPECT_LE(rel_error(gc[i].grad(), hc[i].grad()), grad_tol);
  }
}

// The tolerance of one rounding in dtype, with some room for fp32 accumulation order.
inline double tol_of(DType dt) {
  if (dt == kBFloat16) return 1.6e-2;
  if (dt == kFloat16) return 2e-3;
  if (dt == kFloat64) return 1e-12;
  return 1e-5;
}

}  // namespace mantissa::cuda_test
