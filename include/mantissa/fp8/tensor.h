#pragma once
// An FP8 tensor with its dequantisation factor, and the FP8 GEMM (docs/fp8.md "What runs on
// the CPU"). The GEMM is exact emulation of an FP8 tensor-core product: FP8 codes are exactly
// representable in float32, so the product of the codes accumulates in fp32 through the
// library's GEMM and the two scale_inv factors are applied once, in the epilogue.
#include "mantissa/core/tensor.h"
#include "mantissa/fp8/meta.h"

namespace mantissa::fp8 {

struct Fp8Tensor {
  Tensor data;             // contiguous, dtype float8_e4m3fn or float8_e5m2
  float scale_inv = 1.0f;  // value = code * scale_inv
  // Optional: the codes themselves (scale_inv not applied) widened to bfloat16, made by the cast
  // itself (quantize(..., widen = true)) where fp8_gemm would widen them, so that no GEMM widens
  // them again. Callers drop it before saving a tensor for backward.
  Tensor widened_codes;
  // Optional, GPU only: the codes of data as a (rows, last dim) matrix, transposed and
  // contiguous, made by the cast itself (quantize(..., transpose = true)) for the products that
  // read data transposed (cuBLASLt's FP8 kernels read K-contiguous operands only), so that no
  // product transposes them again. The CPU's GEMMs read transposed operands in place.
  Tensor transposed;
  DType dtype() const { return data.dtype(); }
  const Shape& shape() const { return data.shape(); }
};

struct QuantizeResult {
  Fp8Tensor q;
  float amax = 0.0f;  // max |x| (NaN ignored)
  CastCounts counts;
  // quantize_async of a GPU tensor only: amax and counts are still on the GPU, not in the two
  // fields above; ScalingState::defer_cast_stats records them when they are needed.
  DeferredCastStats device_stats;
};

// Casts x (float32, bfloat16 or float16, any shape) to `fp8` with `scale`: codes are
// satfinite_rne(f32(x * scale)) and scale_inv is f32(1 / scale).
// With `widen`, and where gemm_widens_codes(), the cast also fills q.widened_codes in the same
// pass over the data.
QuantizeResult quantize(const Tensor& x, DType fp8, float scale, bool widen = false);
// quantize() that does not wait for a GPU: for a GPU tensor the cast is queued and its amax and
// counts stay in device_stats. The same as quantize() for a CPU tensor.
// With `transpose`, a GPU cast also fills q.transposed (ignored on the CPU).
QuantizeResult quantize_async(const Tensor& x, DType fp8, float scale, bool widen = false,
                              bool transpose = false);
// Quantizes x with the state's scale for `slot`, records its amax and counts there (for a GPU
// tensor deferred: ScalingState::defer_cast_stats).
Fp8Tensor quantize_into(const Tensor& x, DType fp8, ScalingState& state, int slot,
                        bool widen = false, bool transpose = false);
// Records a cast's amax and counts in `slot` of the state (deferred where they are on a GPU).
void record_cast(ScalingState& state, int slot, const QuantizeResult& r);
// code * scale_inv in float32 or bfloat16.
Tensor dequantize(const Fp8Tensor& q, DType out = kFloat32);
// Whether fp8_gemm widens its operands' codes to bf16 tensors (CPUs with native bf16 dot
// products: oneDNN's bf16 matmul); else the AVX2 GEMM decodes them while packing.
bool gemm_widens_codes();

// out = (op(A) @ op(B)) * (A.scale_inv * B.scale_inv) + bias, with op the transpose when asked;
// A and B are 2-D. The code product accumulates in fp32; the epilogue multiplies once by the
// fp32 product of the two scale_invs, adds the bias (any float dtype, taken in fp32) and
// rounds once to out_dtype.
Tensor fp8_gemm(const Fp8Tensor& a, bool transpose_a, const Fp8Tensor& b, bool transpose_b,
                const Tensor& bias = Tensor(), DType out_dtype = kFloat32);

}  // namespace mantissa::fp8
