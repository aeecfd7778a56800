#pragma once
// The 16-point random Hadamard transform (RHT) of TransformerEngine's NVFP4BlockScaling
// (docs/fp8.md "NVFP4"): every 16 consecutive elements b of a row become
//   b @ (S H) / 4,   i.e. y_j = 1/4 * sum_i s_i * b_i * H[i][j],
// where H is the 16 x 16 Sylvester Hadamard matrix (H[i][j] = (-1)^popcount(i & j), symmetric)
// and S = diag(s) the fixed sign vector TransformerEngine calls get_wgrad_sign_vector (its
// NVFP4 reference quantizer, transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py,
// builds diag(s) @ H and multiplies each 16-element row block on the right, scaled by 1/4).
// (S H) / 4 is orthogonal, so applying it to both operands of a product along K leaves the
// product unchanged up to rounding.
//
// The transform is a fast Walsh-Hadamard transform: four butterfly stages of adds, then the exact
// power-of-2 scaling by 1/4. rht_blocks runs one loop (the butterflies across 16 columns at a
// time) compiled for the baseline, AVX2 and AVX-512; rht_transpose runs it for the baseline and
// at tiles cut by src's edges, and otherwise the same operations in AVX2 registers (at the
// AVX-512 level too). Its products are by +-1 and 1/4 only, so every level gives the same bits
// (tests/kernels/test_hadamard.cpp).
#include <array>
#include <cstdint>

#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::mx {

inline constexpr int64_t kRhtSize = 16;
// TransformerEngine's sign vector s (entry i multiplies element i of each block).
inline constexpr std::array<float, kRhtSize> kRhtSigns = {1,  1,  1,  -1, 1,  -1, -1, -1,
                                                          -1, -1, -1, 1,  -1, 1,  -1, -1};

// Rows of a transposed operand once padded to whole transform blocks: rows rounded up to 16.
constexpr int64_t rht_padded(int64_t rows) { return (rows + kRhtSize - 1) / kRhtSize * kRhtSize; }

// In place over n float32 values (n a multiple of 16): each 16-element block is transformed.
// Both run on `level`, clamped to what the CPU has.
void rht_blocks(float* x, int64_t n, SimdLevel level = simd_level());

// The RHT of src's transpose, in one pass: src is rows x cols row-major (float32 or bfloat16);
// out is cols x rht_padded(rows) float32, row c holding column c of src, zero-padded to whole
// blocks, then transformed block by block (the padding takes part in the transform, so a
// product of two operands padded alike is unchanged). Long inputs go over threads by column
// strips, which changes nothing. With `amax`, the largest |value| of out goes there (a quiet NaN
// where out holds a NaN), taken from the registers as they are stored.
void rht_transpose(const void* src, DType src_dtype, int64_t rows, int64_t cols, float* out,
                   SimdLevel level = simd_level(), float* amax = nullptr);

// NVFP4's cast of rht_transpose's output without writing it: rht_transpose_amax is its amax
// (for the tensor scale), and rht_transpose_nvfp4 is nvfp4_quantize of it (cols x
// rht_padded(rows), 1x16 blocks; the same codes and scales), each transforming the source again.
// With AVX2 the cast encodes each block from the registers that transform it, 8 blocks (8
// columns of src) side by side; blocks cut by src's edges go through a buffer that stays in
// cache and are cast as rows.
float rht_transpose_amax(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                         SimdLevel level = simd_level());
void rht_transpose_nvfp4(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                         const Nvfp4Encoding& encoding, uint8_t* codes, uint8_t* scales,
                         SimdLevel level = simd_level());

}  // namespace mantissa::kernels::mx
