#pragma once
// The FP8 casts' CUDA branch (fp8_cuda.cpp), for fp8::quantize / dequantize / fp8_gemm
// (src/fp8/tensor.cpp). Only code under `#if MANTISSA_HAS_CUDA` calls these.
#include <cstdint>
#include <memory>

#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

struct Fp8CastOnGpu {
  Tensor codes;  // contiguous, float8_e4m3fn or float8_e5m2, on x's GPU
  // With `transpose`: the codes of x as a (rows, last dim) matrix, transposed (last dim, rows),
  // contiguous, made from the same read of x.
  Tensor codes_t;
  // Where the cast's amax and counts are, on the GPU: an entry of a shared device buffer that
  // many casts write into, so that read_fp8_cast_stats fetches all of them in one transfer.
  std::shared_ptr<void> stats_block;
  int64_t stats_index = -1;
};

struct Fp8CastStats {
  float amax = 0.0f;
  int64_t saturated = 0, flushed = 0;
};

// codes = satfinite_rne(f32(x * scale)) of a float32/float16/bfloat16 GPU tensor (fp8: an FP8
// dtype, checked by the caller, fp8::quantize), queued on the GPU's stream: nothing waits for it.
Fp8CastOnGpu fp8_scaled_cast(const Tensor& x, DType fp8, float scale, bool transpose = false);
// A cast's amax and counts. The first read of an entry not yet on the host waits for the GPU
// and copies every entry of its buffer written so far; later reads of those are host reads.
Fp8CastStats read_fp8_cast_stats(const std::shared_ptr<void>& stats_block, int64_t stats_index);
// value(code) * scale_inv in `out` (float32, float16 or bfloat16), on the codes' GPU.
Tensor fp8_dequantize(const Tensor& codes, float scale_inv, DType out);
// The transpose of 2-D codes, contiguous (cuBLASLt's FP8 products read K-contiguous operands
// only).
Tensor fp8_transpose(const Tensor& codes);

}  // namespace mantissa::kernels::gpu
