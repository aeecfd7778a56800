// Autocast for CUDA: ops whose inputs are on a GPU follow the policy table with the CUDA
// autocast dtype (float16 by default), CPU tensors are left to CPU autocast, and the cast
// cache keeps GPU weight casts on the GPU. They skip without a GPU.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "cuda_test_util.h"
#include "kernels/cpu/amp/unscale_kernel.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/tensor.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/linear.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/ops/softmax.h"

namespace mantissa {
namespace {
using amp::autocast;
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::rel_error;

TEST(CudaAutocast, RegionIsEnabledWithFloat16ByDefault) {
  MANTISSA_REQUIRE_GPU();
  autocast ac(DeviceType::kCUDA);
  EXPECT_TRUE(ac.enabled());
  EXPECT_EQ(ac.dtype(), kFloat16);
  EXPECT_TRUE(amp::is_autocast_enabled(DeviceType::kCUDA));
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::kCPU));
}

TEST(CudaAutocast, LinearAndMatmulRunInFloat16OnGpuInputs) {
  MANTISSA_REQUIRE_GPU();
  const Tensor x = randn_cpu({7, 33}, 1), w = randn_cpu({129, 33}, 2), b = randn_cpu({129}, 3);
  const Tensor ref =
      linear(x.to(kFloat16).to(kFloat64), w.to(kFloat16).to(kFloat64), b.to(kFloat16).to(kFloat64));
  autocast ac(DeviceType::kCUDA);
  const Tensor y = linear(x.to(kGpu), w.to(kGpu), b.to(kGpu));
  EXPECT_TRUE(y.is_cuda());
  EXPECT_EQ(y.dtype(), kFloat16);
  EXPECT_LE(rel_error(y, ref), 2e-3);
  const Tensor m = matmul(x.to(kGpu), w.to(kGpu).t());
  EXPECT_EQ(m.dtype(), kFloat16);
}

TEST(CudaAutocast, ARegionCastsThePreviousRegionsWeightsAheadWithTheSameBits) {
  MANTISSA_REQUIRE_GPU();
  // Region 1 casts two weights; region 2's first cast makes both (one launch), and the copies
  // are the plain casts bit for bit. A weight written after that is cast again, not served stale.
  const Tensor a = randn_cpu({64, 32}, 1).to(kGpu).requires_grad_(true);
  const Tensor b = randn_cpu({16, 64}, 2).to(kGpu).requires_grad_(true);
  const Tensor x = randn_cpu({8, 32}, 3).to(kGpu);
  amp::clear_autocast_cache();
  {
    amp::autocast ac(DeviceType::kCUDA, kFloat16);
    (void)linear(linear(x, a), b);
  }
  EXPECT_EQ(amp::autocast_cache_size(), 0u);
  Tensor y;
  {
    amp::autocast ac(DeviceType::kCUDA, kFloat16);
    const Tensor h = linear(x, a);
    EXPECT_EQ(amp::autocast_cache_size(), 2u);  // b's copy was made with a's
    {
      NoGradGuard no_grad;
      Tensor(b).copy_(mul(b, 2.0));
    }
    y = linear(h, b);
  }
  const Tensor want =
      linear(linear(x.to(kFloat16), a.detach().to(kFloat16)), b.detach().to(kFloat16));
  ASSERT_EQ(y.dtype(), kFloat16);
  EXPECT_EQ(y.to(kCPU).to(kFloat32).to_vector<float>(),
            want.to(kCPU).to(kFloat32).to_vector<float>());
  sum(y).backward();  // the gradient still reaches the fp32 weights through the early copies
  ASSERT_TRUE(a.grad().defined() && b.grad().defined());
  EXPECT_EQ(a.grad().dtype(), kFloat32);
}

TEST(CudaAutocast, Bfloat16WhereTheGpuSupportsIt) {
  MANTISSA_REQUIRE_GPU();
  if (!cuda::is_bf16_supported()) {
    EXPECT_THROW({ autocast ac(DeviceType::kCUDA, kBFloat16); }, Error);
    GTEST_SKIP() << "no bf16 on this GPU";
  }
  autocast ac(DeviceType::kCUDA, kBFloat16);
  EXPECT_EQ(linear(randn_cpu({4, 8}, 1).to(kGpu), randn_cpu({3, 8}, 2).to(kGpu)).dtype(),
            kBFloat16);
}

TEST(CudaAutocast, OtherDtypesAreRefused) {
  MANTISSA_REQUIRE_GPU();
  try {
    autocast ac(DeviceType::kCUDA, kFloat32);
    ADD_FAILURE() << "float32 CUDA autocast was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA autocast supports dtype float16"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::kCUDA));
  autocast off(DeviceType::kCUDA, kFloat32, /*enabled=*/false);  // "AMP off" is accepted
  EXPECT_EQ(amp::get_autocast_dtype(DeviceType::kCUDA), kFloat16);
}

TEST(CudaAutocast, CpuTensorsAreNotAffectedAndTheReverse) {
  MANTISSA_REQUIRE_GPU();
  const Tensor x = randn_cpu({4, 8}, 1), w = randn_cpu({3, 8}, 2);
  {
    autocast ac(DeviceType::kCUDA);
    EXPECT_EQ(linear(x, w).dtype(), kFloat32);  // CPU op under CUDA autocast
    EXPECT_EQ(linear(x.to(kGpu), w.to(kGpu)).dtype(), kFloat16);
  }
  {
    autocast ac(DeviceType::kCPU);  // bfloat16 for CPU ops only
    EXPECT_EQ(linear(x, w).dtype(), kBFloat16);
    EXPECT_EQ(linear(x.to(kGpu), w.to(kGpu)).dtype(), kFloat32);  // GPU op under CPU autocast
  }
  {
    autocast cpu(DeviceType::kCPU), gpu(DeviceType::kCUDA);  // both: each device its own dtype
    EXPECT_EQ(linear(x, w).dtype(), kBFloat16);
    EXPECT_EQ(linear(x.to(kGpu), w.to(kGpu)).dtype(), kFloat16);
  }
}

// Needs the CUDA softmax kernel (element-wise/reduction families).
TEST(CudaAutocast, SoftmaxStaysFloat32) {
  MANTISSA_REQUIRE_GPU();
  autocast ac(DeviceType::kCUDA);
  const Tensor s = softmax(randn_cpu({4, 9}, 5).to(kGpu), -1);
  EXPECT_TRUE(s.is_cuda());
  EXPECT_EQ(s.dtype(), kFloat32);
  const Tensor h = softmax(randn_cpu({4, 9}, 6, 1.0, kFloat16).to(kGpu), -1);
  EXPECT_EQ(h.dtype(), kFloat32);  // fp16 input cast up by the fp32 policy
}

TEST(CudaAutocast, CastCacheKeepsGpuWeightCastsOnTheGpu) {
  MANTISSA_REQUIRE_GPU();
  Tensor w = randn_cpu({5, 8}, 2).to(kGpu);
  w.requires_grad_();
  const Tensor x = randn_cpu({4, 8}, 1).to(kGpu);
  Tensor y;
  {
    autocast ac(DeviceType::kCUDA);
    y = linear(x, w);
    (void)linear(x, w);  // the same cached fp16 copy of w
    EXPECT_EQ(amp::autocast_cache_size(), 1u);
  }
  EXPECT_EQ(amp::autocast_cache_size(), 0u);  // cleared when the region exits
  EXPECT_EQ(y.dtype(), kFloat16);
  y.backward(randn_cpu({4, 5}, 3, 1.0, kFloat16).to(kGpu));
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(w.grad().is_cuda());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
}

// The GPU's check-and-unscale goes over many gradients per launch (up to 64): 150 of them, of
// sizes around the launch's 2048-element chunks, empty ones and a strided one among them, give
// the CPU's values bit for bit; an inf in the last one (a later launch) raises the flag, and
// with inv_scale 1 nothing is written.
TEST(CudaGradScaler, ManyGradientsInMultiTensorLaunchesMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dtype : {kFloat32, kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype.name());
    std::vector<Tensor> cpu, gpu;
    for (int i = 0; i < 150; ++i) {
      const int64_t n = i % 7 == 3 ? 0 : (i * 397) % 5000 + 1;
      const Tensor g = cuda_test::randn_cpu({n}, 100 + i, 8.0, dtype);
      cpu.push_back(g.clone());
      gpu.push_back(g.to(cuda_test::kGpu));
    }
    // A strided gradient: every other column of a (40, 64) matrix.
    const Tensor wide = cuda_test::randn_cpu({40, 64}, 7, 8.0, dtype);
    cpu.push_back(wide.clone().narrow(1, 0, 32));
    const Tensor wide_gpu = wide.to(cuda_test::kGpu);
    gpu.push_back(wide_gpu.narrow(1, 0, 32));
    const auto run = [](const std::vector<Tensor>& grads, Device dev, float inv) {
      Tensor found = zeros({1}, kFloat32, dev);
      amp::foreach_non_finite_check_and_unscale_(grads, found, full({1}, inv, kFloat32, dev));
      return found.to(kCPU).item();
    };
    EXPECT_EQ(run(gpu, cuda_test::kGpu, 0.125f), 0.0);
    EXPECT_EQ(run(cpu, kCPU, 0.125f), 0.0);
    for (size_t i = 0; i < cpu.size(); ++i) {
      ASSERT_EQ(cuda_test::rel_error(gpu[i], cpu[i]), 0.0) << "grad " << i;
    }
    // The strided view's other columns are untouched.
    EXPECT_EQ(cuda_test::rel_error(wide_gpu.narrow(1, 32, 32), wide.narrow(1, 32, 32)), 0.0);
    // An inf in the last gradient only, with inv_scale 1: flagged, nothing multiplied.
    Tensor last = gpu[149];
    last.narrow(0, last.numel() - 1, 1).fill_(std::numeric_limits<double>::infinity());
    const std::vector<float> before = gpu[0].to(kCPU).to(kFloat32).to_vector<float>();
    EXPECT_EQ(run(gpu, cuda_test::kGpu, 1.0f), 1.0);
    EXPECT_EQ(gpu[0].to(kCPU).to(kFloat32).to_vector<float>(), before);
  }
}

}  // namespace
}  // namespace mantissa
