#pragma once
// Bulk dtype conversion between contiguous buffers. Uses the fastest SIMD path the CPU has
// (chosen at run time, see cpu_features.h); every path is bit-identical to the scalar types
// in half.h, bfloat16.h and float8.h.
#include <cstdint>

#include "mantissa/core/dtype.h"
#include "mantissa/core/float8.h"

namespace mantissa {

// Converts n elements from src (dtype `from`) to dst (dtype `to`). Any pair of the 11 dtypes
// is accepted; float→integer truncates toward zero like static_cast (NaN and out-of-range give
// INT_MIN for int32/int64 as x86 does, 8-bit targets keep the low byte of the int32 result),
// integer→integer wraps, float→bool is x != 0 (NaN is true). Narrowing to fp16/bf16/fp8 is one
// RNE rounding from the exact source value, also from float64 and int64. The same dtype is a
// byte copy. FP8 narrowing uses `fp8_mode` (saturating by default, as TransformerEngine).
// Throws mantissa::Error for n < 0 or a null buffer.
void convert_buffer(const void* src, DType from, void* dst, DType to, int64_t n,
                    Fp8Saturation fp8_mode = Fp8Saturation::kSatFinite);

// Specialised entry points the kernels and benchmarks call directly.
void convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n);
void convert_f32_to_f16(const float* src, uint16_t* dst, int64_t n);
void convert_f16_to_f32(const uint16_t* src, float* dst, int64_t n);
void convert_f32_to_fp8(const float* src, uint8_t* dst, int64_t n, DType fp8,
                        Fp8Saturation mode = Fp8Saturation::kSatFinite);
void convert_fp8_to_f32(const uint8_t* src, float* dst, int64_t n, DType fp8);

}  // namespace mantissa
