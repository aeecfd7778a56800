#include "mantissa/kernels/kernel_paths.h"

#include <fmt/format.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/elementwise/vec_math.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/gemm/gemm_f64.h"
#include "kernels/cpu/gemm/gemm_lowbit.h"
#include "kernels/cpu/gemm/gemm_native.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/onednn_matmul.h"
#include "kernels/cpu/quant/four_bit_amx.h"
#include "kernels/cpu/quant/four_bit_gemv.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/core/warning.h"

namespace mantissa {

std::string onednn_isa_name() {
  kernels::limit_onednn_isa_to_cpu_features();
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    default:
      return "generic";
  }
}

bool has_native_bf16() {
  const auto& f = cpu_features();
  return f.avx512_bf16 || f.amx_bf16;
}

namespace {

// The GEMM a dtype's products run on, given its oneDNN description (MANTISSA_GEMM applied).
std::string gemm_path(DType dtype, const std::string& onednn) {
  using kernels::GemmBackend;
  const GemmBackend backend = kernels::gemm_backend();
  if (backend == GemmBackend::kOnednn || !kernels::gemm_native_supported(dtype)) return onednn;
  if (kernels::gemm_avx2_path(dtype)) {
    // The AVX2 path (at level avx2; bf16 and f16 at the AVX-512 levels, on 6x32 zmm tiles):
    // bf16/f16 operands are widened to fp32 while packed (gemm_native.h).
    const std::string native =
        dtype == kFloat32 ? "native AVX2 GEMM (6x16 tiles)"
        : kernels::gemm_avx2::wide_tiles(dtype)
            ? "native GEMM on the AVX2 path's driver (6x32 AVX-512 tiles, widened to fp32 while "
              "packed)"
            : "native AVX2 GEMM (6x16 tiles, widened to fp32 while packed)";
    const std::string narrow = fmt::format(
        "products with N <= {}, K >= {} and A not transposed: native dot-product kernel",
        kernels::kAvx2NarrowMaxN, kernels::kAvx2NarrowMinK);
    if (backend == GemmBackend::kNative) return native + "; " + narrow;
    if (dtype == kFloat32)
      return fmt::format(
          "{}; {} for transposed-A products with every side >= {} and N >= {} (or M and K >= "
          "{}), for products that read A's rows in place{} and for N and K >= {}, else {}",
          narrow, native, kernels::kAvx2NativeMinSideF32, kernels::kAvx2NativeMinNF32,
          kernels::kAvx2NativeMinMKF32,
          kernels::l1_has_twelve_ways()
              ? std::string()
              : fmt::format(" with K >= {} (this L1 has {} ways)", kernels::kAvx2InPlaceMinKSmallL1,
                            cpu_identity().l1d_ways),
          kernels::kAvx2NativeMinNKF32, onednn);
    return fmt::format("{}; {}, unless M or N < {}: {}", narrow, native,
                       kernels::kAvx2NativeMinSideLow, onednn);
  }
  if (backend == GemmBackend::kNative) return "native AVX-512 GEMM (14x32 tiles)";
  return fmt::format("native AVX-512 GEMM when M, N, K >= {}, else {}", kernels::kNativeMinSide,
                     onednn);
}

}  // namespace

std::vector<KernelPath> kernel_paths() {
  const auto& f = cpu_features();
  const std::string isa = onednn_isa_name();
  const std::string simd = f.avx512f ? "AVX-512F" : f.avx2 ? "AVX2" : "scalar";
  const std::string bf16_conv =
      f.avx512_bf16 ? "AVX-512 BF16 (vcvtneps2bf16)" : simd + " integer RNE";
  const std::string f16_conv = f.avx512f ? "AVX-512F (vcvtps2ph)"
                               : f.f16c  ? "F16C (vcvtps2ph)"
                                         : "scalar";
  // Where oneDNN's bf16 matmul would emulate the dot products (AVX-512 without BF16), matmul
  // widens the operands for its fp32 kernels instead (ops/matmul.cpp, run_onednn).
  const std::string bf16_mm =
      kernels::onednn_native_bf16()
          ? fmt::format("oneDNN {} (native bf16 dot products, fp32 accumulation)", isa)
          : fmt::format("widened to fp32, oneDNN {} (fp32 accumulation), rounded once", isa);
  // FP8 is a storage format on every CPU: fp8::Linear's GEMMs decode the codes exactly to
  // bf16 or fp32 and apply the scales in the epilogue (docs/fp8.md).
  const std::string fp8_conv = simd_level() >= SimdLevel::kAvx512 ? "AVX-512 RNE (saturating)"
                               : simd_level() >= SimdLevel::kAvx2 ? "AVX2 RNE (saturating)"
                                                                  : "scalar RNE (saturating)";
  const std::string fp8_mm =
      kernels::gemm_native_lowbit_supported() &&
              kernels::gemm_backend() != kernels::GemmBackend::kOnednn
          ? "decoded to fp32 inside the native AVX2 GEMM's packing, scales in the epilogue"
      : has_native_bf16() ? fmt::format(
                                "widened to bf16 by the cast, oneDNN {} (native bf16 dot "
                                "products, fp32 accumulation), scale and bias as its post-ops",
                                isa)
                          : "decoded to fp32, then the float32 GEMM, scales in the epilogue";
  // The float64 GEMM (kernels/cpu/gemm/gemm_f64.h), which the f64 convolution runs on too
  // (im2col, kernels/cpu/conv/conv_f64.h).
  const std::string f64_mm =
      kernels::gemm_f64_avx2_path()
          ? "native AVX2+FMA GEMM (6x8 tiles, double accumulation); conv2d as im2col + GEMM"
          : "blocked reference GEMM (double accumulation, scalar); conv2d as im2col + GEMM";
  // exp/log/tanh/sigmoid/erf (and softmax's exp) in fp32 go through the vector math.
  const std::string vm = fmt::format("; exp/log/tanh/sigmoid/erf: {} vector math",
                                     simd_level_name(std::min(simd_level(), SimdLevel::kAvx512)));
  return {
      {kFloat64, f64_mm, "scalar", "double registers, OpenMP"},
      {kFloat32, gemm_path(kFloat32, fmt::format("oneDNN {} (fp32)", isa)), "-",
       "fp32, OpenMP" + vm},
      {kBFloat16, gemm_path(kBFloat16, bf16_mm), bf16_conv,
       "fp32 registers, rounded once (RNE)" + vm},
      {kFloat16,
       gemm_path(kFloat16, fmt::format("widened to fp32, oneDNN {} (fp32 accumulation)", isa)),
       f16_conv, "fp32 registers, rounded once (RNE)" + vm},
      {kFloat8_e4m3fn, fp8_mm, fp8_conv, "storage only"},
      {kFloat8_e5m2, fp8_mm, fp8_conv, "storage only"},
  };
}

namespace {

// Whether the 4-bit layers' bf16 products write oneDNN's tiled B layout here: oneDNN allowed,
// and its bf16 matmul choosing that layout (asked for a representative 64 x 1024 x 1024 product).
bool tiled_bf16_operands() {
  return has_native_bf16() && kernels::gemm_backend() != kernels::GemmBackend::kNative &&
         kernels::onednn_bf16_tiled_b_layout(64, 1024, 1024).has_value();
}

// Whether the 4-bit layers' bf16 products run on mantissa's AMX kernels for few input rows.
bool amx_four_bit_products() {
  return kernels::gemm_backend() != kernels::GemmBackend::kNative &&
         kernels::quant::amx_bf16_usable();
}

}  // namespace

std::vector<QuantizedPath> quantized_weight_paths() {
  const std::string isa = onednn_isa_name();
  const bool fused = kernels::gemm_native_lowbit_supported() &&
                     kernels::gemm_backend() != kernels::GemmBackend::kOnednn;
  const std::string decode = simd_level() >= SimdLevel::kAvx512Bf16
                                 ? "AVX-512 block tables rounded by vcvtneps2bf16"
                             : simd_level() >= SimdLevel::kAvx512 ? "AVX-512 block tables"
                             : simd_level() >= SimdLevel::kAvx2   ? "AVX2, via fp32"
                                                                  : "scalar, via fp32";
  // Small batches first (what a fine-tune step usually is), then the general path.
  const std::string amx =
      amx_four_bit_products()
          ? fmt::format(
                "bf16 compute with up to {} input rows (tokens x batch): decoded into "
                "AMX tiles a few weight rows at a time, no dequantized weight. Otherwise: ",
                kernels::quant::kFourBitAmxMaxRows)
          : "";
  // The forward of few rows (generation) first: dispatch.cpp takes it before the others.
  const std::string gemv =
      kernels::gemm_backend() == kernels::GemmBackend::kOnednn
          ? ""
          : fmt::format(
                "forward of up to {} input rows{}: codes decoded in registers ({} block "
                "tables, fp32 FMAs), no dequantized weight. Otherwise: ",
                kernels::quant::kFourBitGemvMaxRows,
                amx_four_bit_products() ? " in fp32 or fp16 compute" : "",
                simd_level() >= SimdLevel::kAvx512 ? "AVX-512 VPERMPS"
                : simd_level() >= SimdLevel::kAvx2 ? "AVX2 VPERMPS"
                                                   : "scalar");
  const std::string four_bit =
      gemv +
      (fused ? "blocks decoded inside the native AVX2 GEMM's packing (no dequantized weight)"
             : fmt::format(
                   "{}dequantized to the compute dtype ({}) a chunk of at most 1 MiB at a time "
                   "(the default quant::four_bit_chunk_bytes(); never the whole of a larger "
                   "weight), one matmul per chunk{}",
                   amx, decode,
                   tiled_bf16_operands()
                       ? "; in bf16 the chunks are decoded straight into oneDNN's tile layout "
                         "(input gradient; forward from 1024 rows)"
                       : ""));
  const bool vnni = simd_level() >= SimdLevel::kAvx512 && cpu_features().avx512_vnni;
  const std::string int8 =
      vnni ? fmt::format("oneDNN {} s8 x s8 -> s32 (exact int32 sums)", isa)
      : simd_level() >= SimdLevel::kAvx2
          ? "AVX2 vpmaddwd kernel (exact int32 sums; oneDNN's int8 kernels without VNNI "
            "saturate)"
          : "scalar (exact int32 sums)";
  return {{"nf4/fp4 (4-bit)", four_bit}, {"int8 (LLM.int8)", int8}};
}

std::string optimizer_8bit_path() {
  const std::string encode =
      "encoded by per-decade affine counts (exact table for undecided lanes)";
  if (simd_level() >= SimdLevel::kAvx512)
    return fmt::format("AVX-512, codes decoded {}, {}; update and encoding pipelined across blocks",
                       cpu_features().avx512_vbmi ? "by byte-plane table lookups (VBMI)"
                                                  : "by word-plane table lookups (no VBMI)",
                       encode);
  if (simd_level() >= SimdLevel::kAvx2)
    return fmt::format("AVX2, codes decoded by scalar table reads, {}", encode);
  return "scalar, exact table search";
}

std::string why_bf16_products_are_widened() {
  if (has_native_bf16()) return "";
  if (avx512_bf16_set_aside())
    return fmt::format(
        "this CPU has AVX-512 BF16, but {}, so mantissa does not use them "
        "(MANTISSA_USE_AVX512_BF16=1 would)",
        kAvx512Bf16SetAsideReason);
  return "this CPU has no AVX-512 BF16 or AMX";
}

std::string bf16_emulation_warning() {
  if (has_native_bf16()) return "";
  return why_bf16_products_are_widened() +
         "; bf16 math is emulated through fp32 (operands widened for every product), so bf16 is "
         "no faster than fp32 here (memory savings still apply)";
}

void warn_once_if_bf16_emulated() {
  const std::string warning = bf16_emulation_warning();
  if (!warning.empty()) warn_once(warning);
}

}  // namespace mantissa
