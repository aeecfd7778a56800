#pragma once
// The FP8 casts' CUDA branch (fp8_cuda.cpp), for fp8::quantize / dequantize / fp8_gemm
// (src/fp8/tensor.cpp). Only code under `#if MANTISSA_HAS_CUDA` calls these.
#include <cstdint>

#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

struct Fp8CastOnGpu {
  Tensor codes;  // contiguous, float8_e4m3fn or float8_e5m2, on x's GPU
  float amax = 0.0f;
  int64_t saturated = 0, flushed = 0;
};

// codes = satfinite_rne(f32(x * scale)) of a float32/float16/bfloat16 GPU tensor, with the
// amax and counts read back to the host (the one synchronisation of a cast: delayed scaling
// keeps the amax history on the host, docs/cuda.md).
Fp8CastOnGpu fp8_scaled_cast(const Tensor& x, DType fp8, float scale);
// value(code) * scale_inv in `out` (float32, float16 or bfloat16), on the codes' GPU.
Tensor fp8_dequantize(const Tensor& codes, float scale_inv, DType out);
// The transpose of 2-D codes, contiguous (cuBLASLt's FP8 products read K-contiguous operands
// only).
Tensor fp8_transpose(const Tensor& codes);

}  // namespace mantissa::kernels::gpu
