#pragma once
// Internal: SIMD kernels behind the bulk conversions of mantissa/core/convert.h, and the hook
// tests use to run each path on purpose. Every kernel handles any n (tails included) and is
// bit-identical to the scalar conversions in half.h, bfloat16.h and float8.h.
#include <cstdint>
#include <optional>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/float8.h"

// They live in core, not under kernels/cpu, because Tensor::to (core) needs them and core is
// the bottom layer (docs/design.md).
namespace mantissa::convert_detail {

// Level the bulk conversions use now: simd_level(), unless a test forced a lower one. AVX2
// uses F16C for fp16; AVX-512 uses integer RNE for bf16; AVX-512 BF16 adds VCVTNEPS2BF16 for
// float→bf16.
SimdLevel active_convert_level();
// Test hook: use `level` (nullopt: back to the best available). Returns false, changing
// nothing, when the CPU lacks it. Not thread-safe against concurrent conversions.
bool force_convert_level(std::optional<SimdLevel> level);

// The kernel the bulk conversions of mantissa/core/convert.h use at the active level, for
// callers that convert many short rows (the fused attention's 32-value head rows): there the
// bulk call's argument checks and parallel split cost about twice the conversion itself.
// Single-threaded; the caller checks its pointers.
using ToHalfWidth = void (*)(const float*, uint16_t*, int64_t);
using FromHalfWidth = void (*)(const uint16_t*, float*, int64_t);
ToHalfWidth f32_to_bf16_kernel();
FromHalfWidth bf16_to_f32_kernel();
ToHalfWidth f32_to_f16_kernel();
FromHalfWidth f16_to_f32_kernel();

// AVX2 kernels (f16 ones also need F16C).
void f32_to_bf16_avx2(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n);
// The same four with non-temporal stores (the same bits): for outputs too large to stay in the
// last-level cache, where plain stores first read every destination line (read for ownership)
// and evict the source. convert.h's bulk conversions take them from
// streaming_convert_min_bytes() of output on.
void f32_to_bf16_avx2_stream(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_avx2_stream(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16_avx2_stream(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_avx2_stream(const uint16_t* src, float* dst, int64_t n);
// The streaming kernel of the active level, or nullptr where there is none (only AVX2 has them).
ToHalfWidth f32_to_bf16_streaming_kernel();
FromHalfWidth bf16_to_f32_streaming_kernel();
ToHalfWidth f32_to_f16_streaming_kernel();
FromHalfWidth f16_to_f32_streaming_kernel();
// Outputs from this many bytes on are written by the streaming kernels: 32 MiB, a Zen 3 CCX's
// whole L3 (a fixed size: in a VM sysconf and CPUID report the host's, 256 MiB on that Zen 3,
// which no single tensor's output should need to reach).
int64_t streaming_convert_min_bytes();
void f32_to_fp8_e4m3_avx2(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);
void f32_to_fp8_e5m2_avx2(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);
// Their streaming forms (non-temporal 32-byte stores), for conversions whose source and output
// together (5 bytes an element) pass streaming_convert_min_bytes(): the output is a fifth of the
// traffic, so the source evicts it from the cache anyway.
void f32_to_fp8_e4m3_avx2_stream(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);
void f32_to_fp8_e5m2_avx2_stream(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);

// AVX-512 F+BW+VL kernels.
void f32_to_bf16_avx512(const float* src, uint16_t* dst, int64_t n);
void bf16_to_f32_avx512(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16_avx512(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_avx512(const uint16_t* src, float* dst, int64_t n);
void f32_to_fp8_e4m3_avx512(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);
void f32_to_fp8_e5m2_avx512(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode);
// AVX-512 BF16 (VCVTNEPS2BF16, with denormal lanes fixed up).
void f32_to_bf16_avx512bf16(const float* src, uint16_t* dst, int64_t n);

}  // namespace mantissa::convert_detail
