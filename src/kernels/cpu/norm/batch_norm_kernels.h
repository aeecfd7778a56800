#pragma once
// Internal: batch norm's loops over one row, a contiguous run of one channel's values (an
// [N, C, S] input has N rows of S values per channel), for f32, bf16 (as uint16_t bits) and f16
// read and written in place of their dtype, computed in fp32 in 16 lanes. Row results are fp32; the
// op adds them up in double across rows, so the error of a statistic grows with S, not N * S.
// bf16 and f16 results are rounded to nearest even exactly as BFloat16(float) and Half(float):
// the same bits as widening, computing in f32 and rounding with Tensor::to.
#include <cstdint>

#include "mantissa/core/half.h"

namespace mantissa::kernels::cpu {

template <typename T>
struct BnRowKernels {
  float (*sum)(const T* x, int64_t n);                            // sum x
  float (*sq_dev)(const T* x, int64_t n, float mean);             // sum (x - mean)^2
  void (*affine)(const T* x, T* y, int64_t n, float a, float b);  // y = a x + b
  // sum g and sum g (x - mean).
  void (*grad_sums)(const T* g, const T* x, int64_t n, float mean, float* sum_g, float* sum_g_dev);
  // gx = a g + b (x - mean) + c.
  void (*grad_input)(const T* g, const T* x, T* gx, int64_t n, float a, float b, float c,
                     float mean);
};

struct BnKernels {
  BnRowKernels<float> f32;
  BnRowKernels<uint16_t> bf16;
  BnRowKernels<Half> f16;
};

extern const BnKernels kBnBaseline;  // the same lane code built for the baseline ISA
extern const BnKernels kBnAvx2;      // AVX2 (no FMA contraction: bit-identical to the baseline)
extern const BnKernels kBnAvx512;    // AVX-512 F+BW+VL

// AVX-512 when cpu_features() has it (after MANTISSA_DISABLE_SIMD), else AVX2, else the
// baseline.
const BnKernels& bn_kernels();

}  // namespace mantissa::kernels::cpu
