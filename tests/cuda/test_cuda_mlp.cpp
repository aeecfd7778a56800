// A 2-layer MLP trained by hand with SGD on the CPU and on a GPU from the same start: the
// losses must agree step by step. Needs linear's CUDA branch (the GEMM), which lands
// separately: until both branches are merged this test fails on a GPU at the first linear.
#include <gtest/gtest.h>

#include "cuda_op_check.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/ops/linear.h"
#include "mantissa/ops/loss.h"

namespace mantissa {
namespace {
using cuda_test::kGpu;
using cuda_test::randn_cpu;

std::vector<double> train(Device device, int steps) {
  const int64_t B = 50, I = 37, H = 65, C = 10;
  std::vector<Tensor> p = {randn_cpu({H, I}, 1, 0.2), randn_cpu({H}, 2, 0.1),
                           randn_cpu({C, H}, 3, 0.2), randn_cpu({C}, 4, 0.1)};
  for (Tensor& t : p) {
    t = t.to(device);
    t.requires_grad_(true);
  }
  const Tensor x = randn_cpu({B, I}, 5).to(device);
  std::vector<int64_t> y(B);
  for (int64_t i = 0; i < B; ++i) y[i] = (i * 7) % C;
  const Tensor target = tensor(y, {B}).to(device);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    const Tensor h = relu(linear(x, p[0], p[1]));
    const Tensor loss = cross_entropy(linear(h, p[2], p[3]), target);
    losses.push_back(loss.cpu().item<double>());
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor& t : p) {
      EXPECT_EQ(t.grad().device(), device);
      t.copy_(sub(t, mul(t.grad(), 0.5)));
      t.reset_grad();
    }
  }
  return losses;
}

TEST(CudaMlp, SgdStepsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  const std::vector<double> cpu = train(kCPU, 5), gpu = train(kGpu, 5);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-4 * cpu[0]) << i;
  EXPECT_LT(cpu.back(), cpu.front());
}

}  // namespace
}  // namespace mantissa
