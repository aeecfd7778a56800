#pragma once
// The fp32 register tiles of the products that decode their operands into float panels first
// (the FP8 block-scaled product, kernels/cpu/fp8/fp8_block_gemm.cpp, and the block-format
// product, kernels/cpu/mx/mx_gemm.cpp):
//   acc[r * ldc + c] = fma(a[r * lda + k], b[k * ldb + c], acc[r * ldc + c])
// for k < kl in k order, r < rows, c < cols, the accumulator held in registers; with `zero` it
// starts from 0 instead of acc's values (a new partial sum). AVX-512 (8 x 32),
// AVX2 (6 x 16) and the baseline (4 x 8, std::fma) do the same operations in the same order, so
// every level gives the same bits; only the tile's shape differs.
// The promoting form (the FP8 block product's) starts each slice's partial sums at 0 and, after
// the slice, promotes them into the accumulator in registers, as a store of the partial sums
// followed by
//   out[r * ldo + c] = fma(part[r][c], f32(sa[r] * sb[c]), out[r * ldo + c])
// would, for a whole tile; with `first` out is not read, and 0 stands for its values.
#include <cstdint>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels {

inline constexpr int kFp32TileMaxRows = 8;
inline constexpr int kFp32TileMaxCols = 32;

using Fp32TileFn = void (*)(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kl,
                            float* acc, int64_t ldc, bool zero);

using Fp32PromoteFn = void (*)(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kl,
                               const float* sa, const float* sb, float* out, int64_t ldo,
                               bool first);

struct Fp32RegisterTile {
  int rows, cols;
  Fp32TileFn fn;
  Fp32PromoteFn promote;
};

// The tile of `level`, clamped to what this CPU has.
Fp32RegisterTile fp32_register_tile(SimdLevel level);

}  // namespace mantissa::kernels
