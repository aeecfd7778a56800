#pragma once
// Internal: SIMD kernels behind the bulk conversions of mantissa/core/convert.h, and the hook
// tests use to run each path on purpose. Every kernel handles any n (tails included) and is
// bit-identical to the scalar conversions in half.h, bfloat16.h and float8.h.
#include <cstdint>
#include <optional>

#include "mantissa/core/float8.h"

namespace mantissa::kernels::cpu {

// Ordered: a level implies the ones below it.
enum class ConvertLevel : uint8_t {
  kScalar,
  kAvx2,        // AVX2 (+F16C for fp16; without F16C fp16 stays scalar)
  kAvx512,      // AVX-512 F+BW+VL, integer RNE for bf16
  kAvx512Bf16,  // as kAvx512, plus VCVTNEPS2BF16 for float→bf16
};

const char* convert_level_name(ConvertLevel level);
// Highest level this CPU (after MANTISSA_DISABLE_SIMD) supports.
ConvertLevel max_convert_level();
// Level the bulk conversions use now.
ConvertLevel active_convert_level();
// Test hook: use `level` (nullopt: back to the best available). Returns false, changing
// nothing, when the CPU lacks it. Not thread-safe against concurrent conversions.
bool force_convert_level(std::optional<ConvertLevel> level);

// AVX2 kernels (f16 ones also need F16C).
void f32_to_bf16_avx2(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n);
void f32_to_fp8_e4m3_avx2(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);
void f32_to_fp8_e5m2_avx2(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);

// AVX-512 F+BW+VL kernels.
void f32_to_bf16_avx512(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_avx512(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16_avx512(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_avx512(const uint16_t* src, float* dst, int64_t n);
void f32_to_fp8_e4m3_avx512(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);
void f32_to_fp8_e5m2_avx512(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);
// AVX-512 BF16 (VCVTNEPS2BF16, with denormal lanes fixed up).
void f32_to_bf16_avx512bf16(const float* src, uint16_t* dst, int64_t n);

}  // namespace mantissa::kernels::cpu
