#pragma once
// FP8 casts on a GPU (fp8_kernels.cu), behind fp8::quantize / dequantize (src/fp8/tensor.cpp)
// through fp8_cuda.h. The codes are the CPU's bit for bit (kernels/cpu/fp8/fp8_cast.h): the
// encoder is the same integer-only RNE rounding from float32, saturating, NaN -> 0x7F. Plain
// declarations: included by the .cu and by fp8_cuda.cpp.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

// What one cast reduces over its input, on the device; zero it before the launch.
struct Fp8CastCounters {
  unsigned int amax_bits;  // float bits of max |x| (NaN ignored, inf kept): non-negative floats
                           // order as their bit patterns, so atomicMax on the bits is a max
  unsigned int unused;
  unsigned long long saturated;  // |f32(x * scale)| above the format's largest value
  unsigned long long flushed;    // x nonzero (not NaN) whose code is +-0
};

// dst[i] = satfinite_rne(f32(src[i] * scale)) in E4M3 (e5m2 false) or E5M2 over a contiguous
// (rows, cols) matrix (any shape, flattened: rows * cols elements); src f32, f16 or bf16. With
// dst_t, also its transpose (cols, rows), from the same read of src. Adds to *counters. False
// (nothing launched) for another src type.
bool launch_fp8_scaled_cast(const void* src, Scalar src_type, uint8_t* dst, uint8_t* dst_t,
                            int64_t rows, int64_t cols, float scale, bool e5m2,
                            Fp8CastCounters* counters);

// dst[i] = value(src[i]) * scale_inv, rounded once to dst_type (f32, f16 or bf16).
bool launch_fp8_dequantize(const uint8_t* src, bool e5m2, void* dst, Scalar dst_type, int64_t n,
                           float scale_inv);

// dst (cols, rows) = src (rows, cols)^T, one byte per element, both contiguous.
void launch_transpose_bytes(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);

}  // namespace mantissa::cuda::detail
