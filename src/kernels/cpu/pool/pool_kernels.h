#pragma once
// Internal: the 2x2, stride-2, unpadded pools (every CNN's downsampling step) on one [H, W]
// plane of f32 or bf16 (and f16 for max), read and written in its own dtype with the arithmetic
// in fp32.
// Semantics are those of the general pools in ops/pool.cpp, bit for bit:
// - max: instead of an input index per output it keeps the tap (0..3, row-major in the window)
//   that won: a byte, not eight. The first maximum wins, NaN wins and stays.
// - avg: ((0 + a) + b + c + d) / 4, rounded once (RNE) into the output dtype.
// The backwards write every input (zeros where no window reaches), each as 0 + its share of
// the gradient like the general scatter into zeros.
#include <cstdint>
#include <optional>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::cpu {

struct Pool2x2Kernels {
  // x: [h, w]; y, tap: [h / 2, w / 2].
  void (*max_forward_f32)(const float* x, float* y, uint8_t* tap, int64_t h, int64_t w);
  void (*max_forward_bf16)(const uint16_t* x, uint16_t* y, uint8_t* tap, int64_t h, int64_t w);
  // gy, tap: [h / 2, w / 2]; gx: [h, w], fully written.
  void (*max_backward_f32)(const float* gy, const uint8_t* tap, float* gx, int64_t h, int64_t w);
  void (*max_backward_bf16)(const uint16_t* gy, const uint8_t* tap, uint16_t* gx, int64_t h,
                            int64_t w);
  void (*avg_forward_f32)(const float* x, float* y, int64_t h, int64_t w);
  void (*avg_forward_bf16)(const uint16_t* x, uint16_t* y, int64_t h, int64_t w);
  void (*avg_backward_f32)(const float* gy, float* gx, int64_t h, int64_t w);
  void (*avg_backward_bf16)(const uint16_t* gy, uint16_t* gx, int64_t h, int64_t w);
  // f16 (IEEE half bits) max pool, as the bf16 pair.
  void (*max_forward_f16)(const uint16_t* x, uint16_t* y, uint8_t* tap, int64_t h, int64_t w);
  void (*max_backward_f16)(const uint16_t* gy, const uint8_t* tap, uint16_t* gx, int64_t h,
                           int64_t w);
};

// The AVX2 (+F16C) max pools (pool_avx2.cpp); the AVX-512 table reuses the f16 pair.
void pool2x2_max_forward_f32_avx2(const float* x, float* y, uint8_t* tap, int64_t h, int64_t w);
void pool2x2_max_forward_bf16_avx2(const uint16_t* x, uint16_t* y, uint8_t* tap, int64_t h,
                                   int64_t w);
void pool2x2_max_forward_f16_avx2(const uint16_t* x, uint16_t* y, uint8_t* tap, int64_t h,
                                  int64_t w);
void pool2x2_max_backward_f32_avx2(const float* gy, const uint8_t* tap, float* gx, int64_t h,
                                   int64_t w);
void pool2x2_max_backward_bf16_avx2(const uint16_t* gy, const uint8_t* tap, uint16_t* gx, int64_t h,
                                    int64_t w);
void pool2x2_max_backward_f16_avx2(const uint16_t* gy, const uint8_t* tap, uint16_t* gx, int64_t h,
                                   int64_t w);

extern const Pool2x2Kernels kPool2x2Scalar;
extern const Pool2x2Kernels kPool2x2Avx2;    // AVX2+F16C max pools, scalar average pools
extern const Pool2x2Kernels kPool2x2Avx512;  // AVX-512 F+BW+VL

// The kernels in use: AVX-512 from SimdLevel::kAvx512 up, AVX2 at kAvx2, else scalar.
const Pool2x2Kernels& pool_2x2_kernels();
// Test hook: run `level` (nullopt: back to the best). False, changing nothing, when the CPU
// lacks it. Not thread-safe against concurrent pooling.
bool force_pool_level(std::optional<SimdLevel> level);

}  // namespace mantissa::kernels::cpu
