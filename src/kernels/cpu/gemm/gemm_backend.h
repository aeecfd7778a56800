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

// Under auto, products whose M, N and K all reach this run natively.
inline constexpr int64_t kNativeMinSide = 1024;

// Whether an f32 or bf16 product of this shape runs natively under the current backend.
bool use_native_gemm(DType dtype, int64_t batch, int64_t M, int64_t N, int64_t K);

}  // namespace mantissa::kernels
