#pragma once
// The native AVX2 GEMM (gemm_native.h) with low-bit operands decoded while they are packed:
// FP8 codes (float8_e4m3fn / float8_e5m2) and bitsandbytes NF4/FP4 weights go straight from
// their stored bytes into the kernel's fp32 panels, so no full-size dequantised copy of an
// operand is ever made. B is packed one (K block, N block) at a time by the task that uses it
// (at most 256 x 256 fp32 values per thread), so even the packed form of a large weight never
// exists in full. Each output element is still one fixed sequence of fp32 FMAs over k, so
// results do not depend on the thread count.
//
// AVX2 level only (gemm_native_lowbit_supported()); other CPUs keep the callers' dequantise
// then GEMM path, and the AVX-512 driver is untouched.
#include <cstdint>

#include "kernels/cpu/gemm/gemm_native.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels {

// A bitsandbytes 4-bit operand: element i of the flat weight is
//   round_to(table[code(i)] * absmax[i / blocksize])
// with code(i) the high nibble of packed[i / 2] for even i and the low nibble for odd i, the
// product in fp32 and round_to one RNE rounding to bf16 or f16 (none for f32) -- exactly what
// quant::dequantize(q, round_to) stores. absmax is the fp32 absmax per block (a double-quantized
// one already resolved).
struct GemmFourBit {
  const uint8_t* packed = nullptr;
  const float* absmax = nullptr;
  const float* table = nullptr;  // 16 fp32 values
  int64_t blocksize = 64;        // a multiple of 16
  DType round_to = kFloat32;     // f32, bf16 or f16
};

struct GemmLowbit {
  // Storage dtypes of A and B: f32, bf16, f16, float8_e4m3fn or float8_e5m2 (FP8 codes are
  // decoded to their exact value; a scale belongs in `alpha`). GemmArgs::dtype is not used.
  DType a_dtype = kFloat32, b_dtype = kFloat32;
  // When set, B is this 4-bit tensor: GemmArgs::b.data is ignored and element (k, n) of batch
  // entry i is flat element offsets[i] + k * row_stride + n * col_stride.
  const GemmFourBit* b_four_bit = nullptr;
  DType bias_dtype = kFloat32;  // dtype of GemmArgs::bias (f32, bf16 or f16)
  // false: c = bias + sum_k a*b (the bias starts the sum, as gemm_native does).
  // true:  c = (sum_k a*b) * alpha + bias, the multiply and the add rounded separately in fp32
  //        (the FP8 GEMM's epilogue: both scale_invs applied once after the code product).
  bool scale_epilogue = false;
  float alpha = 1.0f;
  // With scale_epilogue, for a single product (batch 1) whose A is not read by the narrow
  // kernel (gemm_avx2::narrow_applies; FP8 A never is): null, or M fp32 multipliers of the output
  // rows and N of its columns, applied after alpha and before the bias, each multiply rounded:
  //   c = f32(f32(f32(sum * alpha) * row_scale[m]) * col_scale[n]) + bias.
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  // With scale_epilogue and a bf16/f16 output: the bias is added to the product rounded to the
  // output dtype (in fp32), and the sum rounded again (Epilogue::bias_after_rounding).
  bool bias_after_rounding = false;
};

// Whether gemm_native_lowbit runs here: SIMD level avx2 (AVX2, FMA, F16C, no AVX-512), after
// MANTISSA_DISABLE_SIMD.
bool gemm_native_lowbit_supported();

// c = a @ b as described above; out_dtype f32, bf16 or f16. Requires
// gemm_native_lowbit_supported() and M, N, K >= 1.
void gemm_native_lowbit(const GemmArgs& args, const GemmLowbit& lowbit);

}  // namespace mantissa::kernels
