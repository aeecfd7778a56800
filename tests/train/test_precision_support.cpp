// The precision x accelerator table (precision_support.h): every cell from the registry's
// `math`, the reasons of "no" and "emulated", what make_precision does with each, and the
// table `mantissa info` prints.
#include <gtest/gtest.h>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/warning.h"

#include "mantissa/train/precision_support.h"
#include "support/test_util.h"

namespace mantissa::train {
namespace {

using mantissa::testing::error_of;

bool has(const std::string& s, const std::string& piece) {
  return s.find(piece) != std::string::npos;
}

const PrecisionEntry& entry(const std::string& name) { return *find_precision(name); }

constexpr MachineCaps kAvx2Cpu{.native_bf16 = false, .cuda_build = false, .gpu_present = false};
constexpr MachineCaps kBf16Cpu{.native_bf16 = true, .cuda_build = false, .gpu_present = false};

TEST(PrecisionSupport, Fp32AndFp64RunOnEveryCpuAndNowhereElse) {
  for (const char* name : {"32-true", "64-true"}) {
    for (const MachineCaps& caps : {kAvx2Cpu, kBf16Cpu}) {
      EXPECT_EQ(precision_support(entry(name), AcceleratorKind::kCpu, caps).support, Support::kYes);
      EXPECT_EQ(precision_support(entry(name), AcceleratorKind::kCpuAvx512Bf16, caps).support,
                Support::kYes);
      const SupportCell gpu = precision_support(entry(name), AcceleratorKind::kCuda, caps);
      EXPECT_EQ(gpu.support, Support::kNo);
      EXPECT_TRUE(has(gpu.reason, "no CUDA backend (configured without CUDA)")) << gpu.reason;
      EXPECT_TRUE(has(gpu.reason, "has no NVIDIA GPU")) << gpu.reason;
    }
  }
}

TEST(PrecisionSupport, Bf16IsEmulatedWithoutAvx512Bf16AndNativeWithIt) {
  for (const char* name : {"bf16-mixed", "bf16-true"}) {
    const SupportCell plain = precision_support(entry(name), AcceleratorKind::kCpu, kAvx2Cpu);
    EXPECT_EQ(plain.support, Support::kEmulated) << name;
    EXPECT_TRUE(has(plain.reason, "no AVX-512 BF16")) << plain.reason;
    EXPECT_TRUE(has(plain.reason, "no faster than 32-true")) << plain.reason;
    const SupportCell native =
        precision_support(entry(name), AcceleratorKind::kCpuAvx512Bf16, kAvx2Cpu);
    EXPECT_EQ(native.support, Support::kYes) << name;
    EXPECT_TRUE(native.reason.empty());
  }
}

TEST(PrecisionSupport, Fp16AndFp8AreEmulatedOnEveryCpu) {
  for (AcceleratorKind cpu : {AcceleratorKind::kCpu, AcceleratorKind::kCpuAvx512Bf16}) {
    for (const char* name : {"16-mixed", "16-true"}) {
      const SupportCell c = precision_support(entry(name), cpu, kBf16Cpu);
      EXPECT_EQ(c.support, Support::kEmulated) << name;
      EXPECT_TRUE(has(c.reason, "widened to fp32")) << c.reason;
    }
    const SupportCell fp8 = precision_support(entry("transformer-engine"), cpu, kBf16Cpu);
    EXPECT_EQ(fp8.support, Support::kEmulated);
    EXPECT_TRUE(has(fp8.reason, "no CPU has FP8 or FP4 arithmetic")) << fp8.reason;
    // Every recipe but delayed and current decodes inside the GEMM's packing, into fp32 panels
    // or, where the CPU has bf16 dot products, into bf16 pairs; delayed and current take the
    // bf16 dot products where the CPU has them.
    EXPECT_EQ(has(fp8.reason, "widened to fp32 inside the GEMM's packing"),
              cpu == AcceleratorKind::kCpu)
        << fp8.reason;
    EXPECT_EQ(has(fp8.reason, "multiplied with bf16 dot products that give fp32 products' bits"),
              cpu == AcceleratorKind::kCpuAvx512Bf16)
        << fp8.reason;
    EXPECT_EQ(has(fp8.reason, "under the delayed and current recipes"),
              cpu == AcceleratorKind::kCpuAvx512Bf16)
        << fp8.reason;
    EXPECT_EQ(precision_support(entry("int8"), cpu, kBf16Cpu).support, Support::kYes);
  }
}

// The 4-bit modes compute in bf16 by default: emulated where bf16 is, as bf16-mixed (not "yes"
// on every CPU beside bf16-mixed's "emulated"). int8's products are int8 dot products
// with int32 sums (its compute dtype, fp16 by default, only for the outlier columns): "yes".
TEST(PrecisionSupport, FourBitModesFollowBf16OnTheCpu) {
  for (const char* name : {"nf4", "nf4-dq", "fp4", "fp4-dq"}) {
    const SupportCell plain = precision_support(entry(name), AcceleratorKind::kCpu, kAvx2Cpu);
    EXPECT_EQ(plain.support, Support::kEmulated) << name;
    EXPECT_TRUE(has(plain.reason,
                    "compute dtype, bf16 by default (--quant-dtype), and bf16 is "
                    "emulated on this CPU: "))
        << plain.reason;
    EXPECT_TRUE(has(plain.reason, "no faster than 32-true")) << plain.reason;
    EXPECT_EQ(precision_support(entry(name), AcceleratorKind::kCpuAvx512Bf16, kBf16Cpu).support,
              Support::kYes)
        << name;
  }
  for (const char* name : {"int8", "int8-training"}) {
    EXPECT_EQ(precision_support(entry(name), AcceleratorKind::kCpu, kAvx2Cpu).support,
              Support::kYes)
        << name;
  }
  // No warning from the precision check: the compute dtype may be fp32 (--quant-dtype).
  forget_warnings_said_once();
  WarningRecorder warnings;
  check_precision_support(entry("nf4"), "cpu", kAvx2Cpu);
  EXPECT_TRUE(warnings.messages().empty());
}

TEST(PrecisionSupport, TheCudaColumnNamesWhatIsMissing) {
  const MachineCaps gpu_no_build{.native_bf16 = false, .cuda_build = false, .gpu_present = true};
  EXPECT_TRUE(
      has(precision_support(entry("bf16-mixed"), AcceleratorKind::kCuda, gpu_no_build).reason,
          "although this machine has an NVIDIA GPU"));
  const MachineCaps build_no_gpu{.native_bf16 = false, .cuda_build = true, .gpu_present = false};
  const SupportCell c = precision_support(entry("16-mixed"), AcceleratorKind::kCuda, build_no_gpu);
  EXPECT_EQ(c.support, Support::kNo);
  EXPECT_EQ(c.reason, "no usable NVIDIA GPU on this machine");
  const MachineCaps turing{.native_bf16 = false, .cuda_build = true, .gpu_present = true};
  const MachineCaps ampere{
      .native_bf16 = false, .cuda_build = true, .gpu_present = true, .gpu_bf16 = true};
  for (const char* name : {"32-true", "64-true", "16-mixed", "16-true"}) {
    EXPECT_EQ(precision_support(entry(name), AcceleratorKind::kCuda, turing).support, Support::kYes)
        << name;
  }
  for (const char* name : {"bf16-mixed", "bf16-true"}) {
    const SupportCell old_gpu = precision_support(entry(name), AcceleratorKind::kCuda, turing);
    EXPECT_EQ(old_gpu.support, Support::kNo) << name;
    EXPECT_TRUE(has(old_gpu.reason, "compute capability 8.0")) << old_gpu.reason;
    EXPECT_EQ(precision_support(entry(name), AcceleratorKind::kCuda, ampere).support, Support::kYes)
        << name;
  }
  // FP8 runs where the GPU has FP8 matrix products (8.9); an Ampere GPU is refused, saying why.
  const MachineCaps hopper{.native_bf16 = false,
                           .cuda_build = true,
                           .gpu_present = true,
                           .gpu_bf16 = true,
                           .gpu_fp8 = true};
  for (const char* name : {"transformer-engine", "transformer-engine-float16"}) {
    EXPECT_EQ(precision_support(entry(name), AcceleratorKind::kCuda, hopper).support, Support::kYes)
        << name;
    const SupportCell a100 = precision_support(entry(name), AcceleratorKind::kCuda, ampere);
    EXPECT_EQ(a100.support, Support::kNo) << name;
    EXPECT_TRUE(has(a100.reason, "compute capability 8.9")) << a100.reason;
  }
  // The 4-bit layers run on a GPU; the LLM.int8 ones have CPU kernels only: refused, saying so.
  for (const char* name : {"nf4", "nf4-dq", "fp4", "fp4-dq"})
    EXPECT_EQ(precision_support(entry(name), AcceleratorKind::kCuda, hopper).support, Support::kYes)
        << name;
  for (const char* name : {"int8", "int8-training"}) {
    const SupportCell q = precision_support(entry(name), AcceleratorKind::kCuda, hopper);
    EXPECT_EQ(q.support, Support::kNo) << name;
    EXPECT_TRUE(has(q.reason, "not on the CUDA backend yet: the LLM.int8 layers")) << q.reason;
  }
}

TEST(PrecisionSupport, TableHasARowPerPrecisionAndMarksThisCpu) {
  const std::string t = precision_support_table(kAvx2Cpu);
  EXPECT_EQ(t.rfind("  precision ", 0), 0u) << t;
  EXPECT_TRUE(has(t, " CPU *  ")) << t;
  EXPECT_TRUE(has(t, " CPU with AVX-512 BF16 ")) << t;
  EXPECT_TRUE(has(t, " CUDA GPU\n")) << t;
  for (const auto& name : supported_precisions()) EXPECT_TRUE(has(t, "\n  " + name + " ")) << name;
  EXPECT_TRUE(has(t, "emulated (")) << t;
  EXPECT_TRUE(has(t, "(1) ")) << t;
  // This machine's reason: an Intel core's AVX-512 BF16 without AMX is set aside
  // (core/cpu_features.h), the other CPUs in this column have none.
  if (avx512_bf16_set_aside())
    EXPECT_TRUE(has(t, "an Intel core without AMX runs bf16 dot products at half")) << t;
  else
    EXPECT_TRUE(has(t, "no AVX-512 BF16 or AMX") || has(t, "AVX-512 without its BF16")) << t;
  EXPECT_TRUE(has(t, "no CUDA backend (configured without CUDA)")) << t;
  // A reason is listed once however many cells share it.
  EXPECT_EQ(t.find("no CUDA backend (configured"), t.rfind("no CUDA backend (configured"));
  const std::string b = precision_support_table(kBf16Cpu);
  EXPECT_TRUE(has(b, "CPU with AVX-512 BF16 *")) << b;
  EXPECT_FALSE(has(b, "CPU *")) << b;
}

TEST(PrecisionSupport, AGpuAcceleratorFailsWithTheReasonWhereNoGpuCanBeUsed) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU can be used here";
  const std::string msg = error_of([] { make_precision("bf16-mixed", {.accelerator = "gpu"}); });
  EXPECT_TRUE(has(msg, "precision 'bf16-mixed' cannot run on accelerator 'gpu'")) << msg;
  const std::string reason = cuda::is_built() ? "no usable NVIDIA GPU on this machine"
                                              : "no CUDA backend (configured without CUDA)";
  EXPECT_TRUE(has(msg, reason)) << msg;
  EXPECT_TRUE(has(msg, "mantissa info")) << msg;
}

TEST(PrecisionSupport, AnEmulatedPrecisionWarnsOncePerProcess) {
  register_precision({.name = "test-fp16-emulated",
                      .description = "a registered precision that needs fp16 math",
                      .make = make_true_precision,
                      .math = PrecisionMath::kFloat16});
  ::testing::internal::CaptureStderr();
  make_precision("test-fp16-emulated");
  make_precision("test-fp16-emulated");
  const std::string err = ::testing::internal::GetCapturedStderr();
  unregister_precision("test-fp16-emulated");
  EXPECT_TRUE(has(err, "mantissa: warning: precision 'test-fp16-emulated' is emulated on this CPU"))
      << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << err;
}

}  // namespace
}  // namespace mantissa::train
