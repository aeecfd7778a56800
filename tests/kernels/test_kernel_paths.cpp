// What `mantissa info` says about the kernel paths matches what the dispatch runs on this CPU:
// the AVX2 GEMM on AVX2 CPUs (with its per-shape rule), the AVX-512 one above, oneDNN when
// MANTISSA_GEMM=onednn.
#include "mantissa/kernels/kernel_paths.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/quant/four_bit_amx.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa {
namespace {

const KernelPath& path_of(const std::vector<KernelPath>& paths, DType dtype) {
  for (const auto& p : paths)
    if (p.dtype == dtype) return p;
  throw std::runtime_error("no kernel path for " + std::string(dtype.name()));
}

bool has(const std::string& s, const std::string& piece) {
  return s.find(piece) != std::string::npos;
}

class KernelPaths : public ::testing::Test {
 protected:
  void TearDown() override { kernels::set_gemm_backend(saved_); }
  kernels::GemmBackend saved_ = kernels::gemm_backend();
};

TEST_F(KernelPaths, NameTheGemmThisCpuRuns) {
  kernels::set_gemm_backend(kernels::GemmBackend::kAuto);
  const auto paths = kernel_paths();
  const std::string f32 = path_of(paths, kFloat32).matmul;
  const std::string f16 = path_of(paths, kFloat16).matmul;
  if (simd_level() == SimdLevel::kAvx2) {
    EXPECT_TRUE(has(f32, "native AVX2 GEMM")) << f32;
    EXPECT_TRUE(has(f32, "N >= 512")) << f32;  // the per-shape rule, gemm_backend.h
    EXPECT_TRUE(has(f16, "widened to fp32 while packed")) << f16;
    // An AVX2 CPU has no bf16 dot products: bf16 is widened like f16, in mantissa's GEMM and in
    // oneDNN's, which MANTISSA_DISABLE_SIMD=avx512f caps to AVX2 on a bigger CPU (AMX goes too).
    const std::string bf16 = path_of(paths, kBFloat16).matmul;
    EXPECT_TRUE(has(bf16, "widened to fp32 while packed")) << bf16;
    EXPECT_FALSE(has(bf16, "native bf16")) << bf16;
    EXPECT_FALSE(has(bf16, "amx")) << bf16;
    EXPECT_FALSE(cpu_features().amx_bf16);
    EXPECT_TRUE(has(path_of(paths, kFloat8_e4m3fn).conversion, "AVX2"));
    EXPECT_TRUE(has(path_of(paths, kFloat8_e5m2).matmul, "inside the native AVX2 GEMM"));
  } else if (simd_level() >= SimdLevel::kAvx512) {
    EXPECT_TRUE(has(f32, "native AVX-512 GEMM")) << f32;
    // f16 (and bf16 without AVX-512 BF16) on the 6x32 zmm tile, widened while packed.
    EXPECT_TRUE(has(f16, "6x32 AVX-512 tiles, widened to fp32 while packed")) << f16;
    const std::string bf16 = path_of(paths, kBFloat16).matmul;
    EXPECT_EQ(has(bf16, "6x32 AVX-512 tiles"), simd_level() == SimdLevel::kAvx512) << bf16;
  } else {
    EXPECT_FALSE(has(f32, "native")) << f32;
  }
  kernels::set_gemm_backend(kernels::GemmBackend::kOnednn);
  const std::string forced = path_of(kernel_paths(), kFloat32).matmul;
  EXPECT_TRUE(has(forced, "oneDNN")) << forced;
  EXPECT_FALSE(has(forced, "native")) << forced;
}

// The quantized layers' products as the dispatch runs them: LLM.int8 on oneDNN's s8 matmul only
// with AVX-512 VNNI, 4-bit blocks decoded in the AVX2 GEMM's packing on the AVX2 level and
// dequantized by chunks above it, the products of few rows on AMX tiles where the process may use
// them, forwards of up to 8 rows decoded in registers unless oneDNN is forced.
TEST_F(KernelPaths, NameTheQuantizedProducts) {
  kernels::set_gemm_backend(kernels::GemmBackend::kAuto);
  const auto q = quantized_weight_paths();
  ASSERT_EQ(q.size(), 2u);
  const std::string& four = q[0].product;
  const std::string& int8 = q[1].product;
  const bool vnni = simd_level() >= SimdLevel::kAvx512 && cpu_features().avx512_vnni;
  EXPECT_EQ(has(int8, "s8 x s8 -> s32"), vnni) << int8;
  if (simd_level() == SimdLevel::kAvx2) {
    EXPECT_TRUE(has(four, "AVX2 GEMM's packing")) << four;
    EXPECT_TRUE(has(int8, "vpmaddwd")) << int8;
  } else if (simd_level() >= SimdLevel::kAvx512) {
    EXPECT_TRUE(has(four, "AVX-512 block tables")) << four;
  }
  EXPECT_EQ(has(four, "decoded into AMX tiles"), kernels::quant::amx_bf16_usable()) << four;
  EXPECT_TRUE(has(four, "forward of up to 8 input rows")) << four;
  kernels::set_gemm_backend(kernels::GemmBackend::kOnednn);  // MANTISSA_GEMM=onednn: oneDNN only
  EXPECT_FALSE(has(quantized_weight_paths()[0].product, "decoded in registers"));
  kernels::set_gemm_backend(kernels::GemmBackend::kNative);  // MANTISSA_GEMM=native: no AMX kernel
  EXPECT_FALSE(has(quantized_weight_paths()[0].product, "AMX tiles"));
  kernels::set_gemm_backend(kernels::GemmBackend::kAuto);
}

// The 8-bit optimizers' codec as their kernel dispatch picks it.
TEST_F(KernelPaths, NameTheEightBitOptimizerCodec) {
  const std::string path = optimizer_8bit_path();
  if (simd_level() >= SimdLevel::kAvx512) {
    EXPECT_TRUE(has(path, "AVX-512")) << path;
    EXPECT_EQ(has(path, "byte-plane"), cpu_features().avx512_vbmi) << path;
    EXPECT_EQ(has(path, "word-plane"), !cpu_features().avx512_vbmi) << path;
  } else if (simd_level() == SimdLevel::kAvx2) {
    EXPECT_TRUE(has(path, "AVX2, codes decoded by scalar table reads")) << path;
  } else {
    EXPECT_TRUE(has(path, "scalar")) << path;
  }
}

}  // namespace
}  // namespace mantissa
