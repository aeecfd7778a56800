#pragma once
// The FP8 casts' CUDA branch (fp8_cuda.cpp), for fp8::quantize / dequantize / fp8_gemm
// (src/fp8/tensor.cpp). Only code under `#if MANTISSA_HAS_CUDA` calls these.
#include <cstdint>

#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

struct Fp8CastOnGpu {
  Tensor codes;  // contiguous, float8_e4m3fn or float8_e5m2, on x's GPU
  Tensor stats;  // the cast's amax and counts, on the GPU (int64[3], read_fp8_cast_stats)
};

struct Fp8CastStats {
  float amax = 0.0f;
  int64_t saturated = 0, flushed = 0;
};

// codes = satfinite_rne(f32(x * scale)) of a float32/float16/bfloat16 GPU tensor, queued on the
// GPU's stream: nothing waits for it. Its amax and counts stay on the GPU in `stats`.
Fp8CastOnGpu fp8_scaled_cast(const Tensor& x, DType fp8, float scale);
// The amax and counts of the index-th cast in `host_stats`, the casts' `stats` tensors copied to
// the host (one after the other: int64[3 * count]).
Fp8CastStats read_fp8_cast_stats(const Tensor& host_stats, int64_t index = 0);
// value(code) * scale_inv in `out` (float32, float16 or bfloat16), on the codes' GPU.
Tensor fp8_dequantize(const Tensor& codes, float scale_inv, DType out);
// The transpose of 2-D codes, contiguous (cuBLASLt's FP8 products read K-contiguous operands
// only).
Tensor fp8_transpose(const Tensor& codes);

}  // namespace mantissa::kernels::gpu
