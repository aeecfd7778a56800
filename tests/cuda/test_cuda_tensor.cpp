// Tensors on a GPU: allocation and the caching allocator's counters, copies between the CPU
// and the GPU, casts and strided copies there, and the errors without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "cuda_test_util.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/tensor.h"

namespace mantissa {
namespace {
using cuda_test::kGpu;

TEST(CudaDevice, ParsesTheSpellingsTorchAccepts) {
  EXPECT_EQ(parse_device("cpu"), kCPU);
  EXPECT_EQ(parse_device("cuda"), cuda_device(0));
  EXPECT_EQ(parse_device("gpu"), cuda_device(0));
  EXPECT_EQ(parse_device("cuda:3"), cuda_device(3));
  EXPECT_EQ(cuda_device(2).str(), "cuda:2");
  for (const char* bad : {"cuda:", "cuda:x", "tpu", "CUDA", "cuda:-1"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cpu, cuda, cuda:N or gpu"), std::string::npos);
    }
  }
}

TEST(CudaDevice, WithoutAGpuAllocationSaysWhy) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_FALSE(cuda::unavailable_reason().empty());
  EXPECT_FALSE(cuda::is_bf16_supported());
  try {
    (void)empty({4}, kFloat32, cuda_device(0));
    ADD_FAILURE() << "a CUDA tensor was made without a GPU";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:0 was asked for"), std::string::npos) << msg;
    EXPECT_NE(msg.find(cuda::unavailable_reason()), std::string::npos) << msg;
  }
  EXPECT_EQ(cuda::memory_allocated(), 0);
}

TEST(CudaTensor, RoundTripsEveryStoredDtypeBitForBit) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kInt8, kBool}) {
    const Tensor h = cuda_test::randn_cpu({3, 5}, 7, 20.0).to(dt);
    const Tensor g = h.to(kGpu);
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.device(), kGpu);
    EXPECT_EQ(g.dtype(), dt);
    const Tensor back = g.cpu();
    ASSERT_EQ(back.nbytes(), h.nbytes());
    EXPECT_EQ(std::memcmp(back.data_ptr(), h.data_ptr(), h.nbytes()), 0) << dt.name();
  }
}

TEST(CudaTensor, CastsOnTheGpuEqualTheCpuCastsBitForBit) {
  MANTISSA_REQUIRE_GPU();
  // Values that round differently at each width, halfway cases and out-of-range values.
  const Tensor h = cuda_test::randn_cpu({1000}, 11, 3000.0, kFloat64);
  for (DType from : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    const Tensor src = h.to(from);
    for (DType to : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt32, kInt64}) {
      const Tensor cpu = src.to(to);
      const Tensor gpu = src.to(kGpu).to(to).cpu();
      EXPECT_EQ(std::memcmp(cpu.data_ptr(), gpu.data_ptr(), cpu.nbytes()), 0)
          << from.name() << " -> " << to.name();
    }
  }
}

TEST(CudaTensor, TypedCastPathsEqualTheCpuBitForBit) {
  MANTISSA_REQUIRE_GPU();
  // The typed kernels: contiguous casts at odd lengths and misaligned offsets (the packed loads,
  // the element-by-element tail and the unaligned path), and strided / broadcast casts.
  const Tensor h = cuda_test::randn_cpu({3, 7, 37}, 23, 300.0, kFloat64);
  for (DType from : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    const Tensor src = h.to(from);
    const Tensor g = src.to(kGpu);
    for (DType to : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      const std::string what = std::string(from.name()) + " -> " + std::string(to.name());
      // Contiguous, whole and from an odd offset (a flat slice starting at element 1 or 3).
      for (int64_t off : {0, 1, 3}) {
        const int64_t n = h.numel() - off - 2;
        const Tensor cpu = src.reshape({h.numel()}).narrow(0, off, n).to(to);
        const Tensor gpu = g.reshape({h.numel()}).narrow(0, off, n).to(to).cpu();
        ASSERT_EQ(cpu.nbytes(), gpu.nbytes());
        EXPECT_EQ(std::memcmp(cpu.data_ptr(), gpu.data_ptr(), cpu.nbytes()), 0)
            << what << " offset " << off;
      }
      // Strided: a permutation and a step slice.
      const Tensor cpu_p = src.permute({2, 0, 1}).contiguous().to(to);
      const Tensor gpu_p = g.permute({2, 0, 1}).to(to).contiguous().cpu();
      EXPECT_EQ(std::memcmp(cpu_p.data_ptr(), gpu_p.data_ptr(), cpu_p.nbytes()), 0) << what;
      Tensor cpu_s = zeros({3, 7, 19}, to), gpu_s = zeros({3, 7, 19}, to, kGpu);
      cpu_s.copy_(src.slice(2, 0, 37, 2));
      gpu_s.copy_(g.slice(2, 0, 37, 2));
      const Tensor back = gpu_s.cpu();
      EXPECT_EQ(std::memcmp(cpu_s.data_ptr(), back.data_ptr(), cpu_s.nbytes()), 0) << what;
      // Broadcast of a row.
      Tensor cpu_b = zeros({5, 37}, to), gpu_b = zeros({5, 37}, to, kGpu);
      cpu_b.copy_(src.select(0, 1).select(0, 2));
      gpu_b.copy_(g.select(0, 1).select(0, 2));
      const Tensor back_b = gpu_b.cpu();
      EXPECT_EQ(std::memcmp(cpu_b.data_ptr(), back_b.data_ptr(), cpu_b.nbytes()), 0) << what;
    }
  }
}

TEST(CudaTensor, StridedCopiesAndBroadcastsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  const Tensor h = cuda_test::randn_cpu({4, 6, 5}, 3);
  const Tensor g = h.to(kGpu);
  const Tensor cpu_t = h.permute({2, 0, 1}).contiguous();
  const Tensor gpu_t = g.permute({2, 0, 1}).contiguous();
  EXPECT_TRUE(gpu_t.is_cuda());
  EXPECT_EQ(cuda_test::rel_error(gpu_t, cpu_t), 0.0);
  EXPECT_EQ(cuda_test::rel_error(g.slice(1, 1, 5, 2), h.slice(1, 1, 5, 2).contiguous()), 0.0);
  // copy_ broadcasting a row into a GPU tensor, from the CPU and from the GPU, with a cast.
  const Tensor row = cuda_test::randn_cpu({5}, 4, 1.0, kFloat64);
  Tensor a = zeros({3, 5}, kFloat32, kGpu), b = zeros({3, 5}, kFloat32, kGpu);
  a.copy_(row);
  b.copy_(row.to(kGpu));
  Tensor ref = zeros({3, 5}, kFloat32);
  ref.copy_(row);
  EXPECT_EQ(cuda_test::rel_error(a, ref), 0.0);
  EXPECT_EQ(cuda_test::rel_error(b, ref), 0.0);
  // GPU into a strided CPU view.
  Tensor host = zeros({5, 3});
  host.t().copy_(g.select(1, 2).narrow(0, 0, 3));
  EXPECT_EQ(cuda_test::rel_error(host.t(), h.select(1, 2).narrow(0, 0, 3)), 0.0);
}

TEST(CudaTensor, FactoriesFillOnTheDevice) {
  MANTISSA_REQUIRE_GPU();
  EXPECT_EQ(zeros({2, 3}, kFloat32, kGpu).cpu().to_vector<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(ones({4}, kBFloat16, kGpu).cpu().to_vector<float>(), std::vector<float>(4, 1.f));
  EXPECT_EQ(full({3}, -2.5, kFloat16, kGpu).to_vector<float>(), std::vector<float>(3, -2.5f));
  Tensor t = zeros({3, 4}, kFloat32, kGpu);
  t.t().fill_(7);  // through a strided view
  t.slice(1, 0, 2).zero_();
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 0, 7, 7, 0, 0, 7, 7, 0, 0, 7, 7}));
  EXPECT_EQ(full({}, 3.0, kInt64, kGpu).item(), 3.0);
  EXPECT_TRUE(ones_like(t).is_cuda());
}

TEST(CudaTensor, HostCodeRefusesGpuMemoryWithAMessage) {
  MANTISSA_REQUIRE_GPU();
  const Tensor g = ones({2}, kFloat32, kGpu);
  try {
    (void)g.data_ptr();
    ADD_FAILURE() << "data_ptr of a GPU tensor was handed to host code";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("to(kCPU)"), std::string::npos) << e.what();
  }
  EXPECT_NE(g.device_ptr(), nullptr);
}

TEST(CudaAllocator, CountsHeldAndReservedBytesAndReusesBlocks) {
  MANTISSA_REQUIRE_GPU();
  cuda::empty_cache();
  const int64_t before = cuda::memory_allocated();
  void* first = nullptr;
  {
    const Tensor t = empty({1000}, kFloat32, kGpu);  // 4000 B, rounded to 4096
    first = t.device_ptr();
    EXPECT_EQ(cuda::memory_allocated() - before, 4096);
    EXPECT_GE(cuda::memory_reserved(), cuda::memory_allocated());
  }
  EXPECT_EQ(cuda::memory_allocated(), before);
  const int64_t reserved = cuda::memory_reserved();
  {
    const Tensor again = empty({1024}, kFloat32, kGpu);  // the same 4096-byte block
    EXPECT_EQ(again.device_ptr(), first);
    EXPECT_EQ(cuda::memory_reserved(), reserved);
  }
  cuda::reset_peak_memory_stats();
  EXPECT_EQ(cuda::max_memory_allocated(), cuda::memory_allocated());
  {
    const Tensor big = empty({3 << 20}, kFloat32, kGpu);  // 12 MiB
    EXPECT_GE(cuda::max_memory_allocated() - before, 12 << 20);
  }
  cuda::empty_cache();
  EXPECT_LT(cuda::memory_reserved(), reserved + (12 << 20));
}

TEST(CudaAllocator, AnImpossibleAllocationIsAnOutOfMemoryErrorAndNothingLeaks) {
  MANTISSA_REQUIRE_GPU();
  const int64_t before = cuda::memory_allocated();
  const int64_t huge = cuda::get_device_properties(0).total_memory * 2 / 4;  // floats
  EXPECT_THROW((void)empty({huge}, kFloat32, kGpu), OutOfMemoryError);
  EXPECT_EQ(cuda::memory_allocated(), before);
  // The GPU still works afterwards.
  EXPECT_EQ(ones({2}, kFloat32, kGpu).cpu().to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(CudaTensor, ToDeviceIsDifferentiable) {
  MANTISSA_REQUIRE_GPU();
  Tensor x = cuda_test::randn_cpu({3}, 5).requires_grad_();
  Tensor y = x.to(kGpu);
  EXPECT_TRUE(y.requires_grad());
  y.backward(ones({3}, kFloat32, kGpu));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_FALSE(x.grad().is_cuda());
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

}  // namespace
}  // namespace mantissa
