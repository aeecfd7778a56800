#pragma once
// Internal: layer norm's float loops over one row (the normalised dimensions flattened into n
// values), at the baseline ISA and at AVX2 + FMA. The op (src/ops/layer_norm.cpp) widens
// narrow dtypes into float rows, calls these, and rounds the results once.
//
// Sums are taken in 16 interleaved partial sums combined in a fixed tree, the same order at
// every level and for every row, so a result does not depend on the thread count. Levels may
// differ in the last bits (AVX2 contracts a * b + c into one FMA).
#include <cstdint>

namespace mantissa::kernels::cpu {

struct LnRowKernels {
  // mean = sum x / n; d = x - mean; rstd = 1 / sqrt(sum d^2 / n + eps);
  // y = d * rstd * w + b. d is scratch of n floats (y may not alias x or d).
  void (*forward)(const float* x, const float* w, const float* b, float* y, float* d, int64_t n,
                  float eps, float* mean, float* rstd);
  // With gh = g * w and xhat = (x - mean) * rstd:
  // dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)). gh and xhat are scratch of n floats;
  // dx may alias x (x is read in full before dx is written).
  void (*backward)(const float* g, const float* x, const float* w, float mean, float rstd,
                   float* dx, float* gh, float* xhat, int64_t n);
  // sw += g * xhat and sb += g over one row (xhat as backward leaves it): the weight and bias
  // gradients summed in the same pass over the rows as dx, while the row is in L1.
  void (*accumulate_wb)(const float* g, const float* xhat, float* sw, float* sb, int64_t n);
};

extern const LnRowKernels kLnBaseline;  // the same loops built for the baseline ISA
extern const LnRowKernels kLnAvx2;      // AVX2 + FMA

// AVX2 when simd_level() allows it (after MANTISSA_DISABLE_SIMD), else the baseline.
const LnRowKernels& ln_row_kernels();

}  // namespace mantissa::kernels::cpu
