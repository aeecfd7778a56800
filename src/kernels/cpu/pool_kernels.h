#pragma once
// Internal: the 2x2, stride-2, unpadded max pool (every CNN's downsampling step) on one
// [H, W] plane of f32 or bf16, read and written in its own dtype with the compare in fp32.
// Instead of an input index per output it keeps the tap (0..3, row-major in the window) that
// won: a byte, not eight. Semantics are those of the general max pool in ops/pool.cpp: the
// first maximum wins, NaN wins and stays; the backward writes every input (zeros included),
// as 0 + g like the general scatter into zeros, so the two paths agree bit for bit.
#include <cstdint>
#include <optional>

namespace mantissa::kernels::cpu {

enum class PoolLevel : uint8_t { kScalar, kAvx512 };

struct MaxPool2x2Kernels {
  // x: [h, w]; y, tap: [h / 2, w / 2].
  void (*forward_f32)(const float* x, float* y, uint8_t* tap, int64_t h, int64_t w);
  void (*forward_bf16)(const uint16_t* x, uint16_t* y, uint8_t* tap, int64_t h, int64_t w);
  // gy, tap: [h / 2, w / 2]; gx: [h, w], fully written.
  void (*backward_f32)(const float* gy, const uint8_t* tap, float* gx, int64_t h, int64_t w);
  void (*backward_bf16)(const uint16_t* gy, const uint8_t* tap, uint16_t* gx, int64_t h, int64_t w);
};

extern const MaxPool2x2Kernels kMaxPool2x2Scalar;
extern const MaxPool2x2Kernels kMaxPool2x2Avx512;  // AVX-512 F+BW+VL

// The best level this CPU (after MANTISSA_DISABLE_SIMD) runs, and its kernels.
PoolLevel max_pool_level();
const MaxPool2x2Kernels& max_pool_2x2_kernels();
// Test hook: run `level` (nullopt: back to the best). False, changing nothing, when the CPU
// lacks it. Not thread-safe against concurrent pooling.
bool force_pool_level(std::optional<PoolLevel> level);

}  // namespace mantissa::kernels::cpu
