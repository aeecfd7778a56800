#pragma once
// MXFP4 with stochastic rounding, as Tseng, Yu and Park train in MXFP4 ("Training LLMs with
// MXFP4", 2025; their microxcaling `dither_scale` rounding): the backward products' operands of
// the mxfp4 recipe under --fp8-enable-stochastic-rounding (docs/fp8.md "MX recipes"). Per 1x32
// block of a row (mx_cast.h's layout and scales):
//   * the E8M0 scale is mx_quantize's kFloor one, 2^(floor(log2 amax) - 2);
//   * each element is divided by it (exact) and multiplied by 3/4 (one float32 rounding), so the
//     block's largest |y| lies in [3, 6): nothing saturates, which stochastic rounding needs to
//     stay unbiased (6 is E2M1's largest value, and a value above it could only round down);
//   * y rounds stochastically to E2M1 (scalar::e2m1_code_stochastic), element (r, c) drawing
//     the 8 bits philox.h's sr_byte(seed, offset, r, c), so the codes depend on
//     (seed, offset, r, c) only, not on threads.
// A code then stands for value(code) * 2^(scale - 127) * 4/3: kMxfp4SrTensorScale is the
// per-tensor scale its product applies (gemm::block_scaled's tensor_scale). The expected value
// of a code times that is the source element (to float32 rounding of y and of 4/3).
#include <cstdint>

#include "kernels/cpu/mx/mx_stats.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::mx {

inline constexpr float kMxfp4SrPrescale = 0.75f;
inline constexpr float kMxfp4SrTensorScale = 4.0f / 3.0f;

// src: rows x cols float32 or bfloat16, row-major; codes rows x ceil(cols / 2) bytes, scales
// rows x ceil(cols / 32). With `stats`, the cast's statistics (mx_stats.h; a block's multiplier
// is 3/4 / 2^(scale - 127)). Runs on `level`, clamped to what the CPU has (every level gives the
// same bits); long casts go over threads by rows, which changes nothing.
void mxfp4_quantize_sr(const void* src, DType src_dtype, int64_t rows, int64_t cols, uint64_t seed,
                       uint64_t offset, uint8_t* codes, uint8_t* scales,
                       SimdLevel level = simd_level(), MxCastStats* stats = nullptr);

}  // namespace mantissa::kernels::mx
