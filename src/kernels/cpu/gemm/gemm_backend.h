#pragma once
// Which GEMM runs an f32 or bf16 product: the native AVX-512 kernel (gemm_native.h) or
// oneDNN. MANTISSA_GEMM=native|onednn|auto (default auto), read once, lets users and
// benchmarks compare the two; "native" still falls back to oneDNN on a CPU without the
// instructions.
#include <cstdint>
#include <string_view>

#include "mantissa/core/dtype.h"

namespace mantissa::kernels {

enum class GemmBackend { kAuto, kNative, kOnednn };

// "auto", "native" or "onednn" (case-insensitive; empty means auto); throws mantissa::Error
// listing the valid values otherwise.
GemmBackend parse_gemm_backend(std::string_view value);
const char* gemm_backend_name(GemmBackend backend);

// MANTISSA_GEMM on the first call, or what set_gemm_backend chose since.
GemmBackend gemm_backend();
// Overrides MANTISSA_GEMM for this process (tests, benchmarks). Not thread-safe against
// products running concurrently.
void set_gemm_backend(GemmBackend backend);

// Under auto with AVX-512, products whose M, N and K all reach this run natively.
inline constexpr int64_t kNativeMinSide = 1024;

// Whether a product of this shape runs natively under the current backend. a_transposed: A
// is read column-major (a transposed view, as in a Linear's weight gradient dY^T x);
// a_rows_apart: A's row stride when its rows are contiguous in k, else 0. Only the AVX2 choice
// looks at them.
bool use_native_gemm(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                     bool a_transposed = false, int64_t a_rows_apart = 0);

// Under auto on an AVX2 CPU (SIMD level avx2), f32 products whose every side reaches
// kAvx2NativeMinSideF32 run natively when A is transposed and either N reaches
// kAvx2NativeMinNF32 or M and K both reach kAvx2NativeMinMKF32 (a tall weight gradient such as
// the GPT's 1024 x 256 MLP weight over 2048 tokens); with A not transposed, when the kernel
// reads A in place (avx2_reads_a_in_place: the forward products and input gradients of Linear
// layers) or N and K both reach kAvx2NativeMinNKF32 (the MLP's 1024 -> 1024 input gradient,
// where oneDNN ran at half its speed). Where the L1 has fewer than 12 ways (Zen 2-4) an A read
// in place runs natively only from K = kAvx2InPlaceMinKSmallL1 on. docs/performance.md, "AVX2
// GEMM" and "A real Zen 3 again".
inline constexpr int64_t kAvx2NativeMinSideF32 = 64;
inline constexpr int64_t kAvx2NativeMinNF32 = 512;
inline constexpr int64_t kAvx2NativeMinMKF32 = 1024;
inline constexpr int64_t kAvx2NativeMinNKF32 = 1024;
inline constexpr int64_t kAvx2InPlaceMinKSmallL1 = 512;
// bf16/f16 products run natively unless M or N is below this (the 6x16 tile is mostly padding
// and packing dominates; widening and oneDNN's f32 kernel win there).
inline constexpr int64_t kAvx2NativeMinSideLow = 16;
// Narrow products (N <= kAvx2NarrowMaxN, gemm_native.h) with A not transposed run natively, on
// the dot-product kernel, once K reaches this.
inline constexpr int64_t kAvx2NarrowMinK = 32;
// The auto choice on an AVX2 CPU, whatever MANTISSA_GEMM says.
bool use_native_gemm_avx2(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K,
                          bool a_transposed, int64_t a_rows_apart = 0);

}  // namespace mantissa::kernels
