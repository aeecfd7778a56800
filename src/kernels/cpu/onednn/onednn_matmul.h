#pragma once
// oneDNN matmul for f32 and bf16 with fp32 accumulation. Primitives are cached by
// (dims, strides, dtypes, bias) so a training loop creates each shape's primitive once.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "mantissa/core/dtype.h"
#include "mantissa/core/shape.h"

namespace mantissa::kernels {

// One operand as oneDNN sees it: dims and element strides of equal rank. Strides may describe
// a transposed layout (oneDNN reads it directly); broadcast batch dims have size 1.
struct MatmulOperand {
  const void* data = nullptr;
  Shape dims;
  Shape strides;
};

// dst[batch..., M, N] = a[batch..., M, K] @ b[batch..., K, N] (+ bias broadcast over rows).
// a and b have equal rank (2..12) and dtype `dtype` (f32 or bf16); a batch dim of size 1
// broadcasts. dst is contiguous with dims dst_dims, dtype `dtype`. bias (optional) has dims
// (1, ..., 1, N) and dtype bias_dtype (f32, or `dtype`). bf16 results are rounded once from
// the fp32 accumulator (bias included). M, N and K must be positive. dst_dtype, when given,
// overrides dst's dtype: float32 with bf16 operands keeps the fp32 accumulator unrounded.
// output_scale, when given, multiplies the fp32 accumulator before the bias is added:
// dst = round(output_scale * (a @ b) + bias), one rounding (the FP8 GEMM's epilogue).
void onednn_matmul(DType dtype, const MatmulOperand& a, const MatmulOperand& b,
                   const MatmulOperand* bias, DType bias_dtype, void* dst, const Shape& dst_dims,
                   std::optional<DType> dst_dtype = std::nullopt,
                   std::optional<float> output_scale = std::nullopt);

// oneDNN's own layout for the second operand of an [M, K] x [K, N] bf16 product, when it is the
// AMX / AVX-512 BF16 one of 32 x 64 tiles: tile (kt, nt) starts at element
// kt * k_tile_stride + nt * n_tile_stride and holds (k, n) at ((k % 32) / 2) * 128 +
// (n % 64) * 2 + k % 2, pairs of consecutive k side by side; K and N are padded to whole tiles,
// and the padding must hold zeros. Given B in that layout (written there directly, e.g. by a
// dequantization), the product skips the repacking of B that oneDNN does on every call for a
// plain B (for a 784 x 1024 weight at M = 64 on an AMX Xeon: 39 instead of 77 us).
struct Bf16TiledB {
  static constexpr int64_t kTileK = 32, kTileN = 64, kTileElements = kTileK * kTileN;
  int64_t k_tiles = 0, n_tiles = 0;
  int64_t k_tile_stride = 0, n_tile_stride = 0;  // in elements
  int64_t elements = 0;                          // of the whole buffer, padding included
};
// The layout for this product, or nullopt where oneDNN chooses another one for it, or leaves
// gaps between the tiles (then onednn_matmul with a plain B is the way).
std::optional<Bf16TiledB> onednn_bf16_tiled_b_layout(int64_t m, int64_t k, int64_t n);
// dst[M, N] = a[M, K] @ B (+ bias), with a bf16 and contiguous, B in the layout above (from
// onednn_bf16_tiled_b_layout for the same m, k, n), bias (optional) N bf16 values added to the
// fp32 accumulator, and dst contiguous in dst_dtype (bf16: rounded once; f32: the accumulator).
void onednn_matmul_bf16_tiled_b(const void* a, const void* b, int64_t m, int64_t k, int64_t n,
                                void* dst, DType dst_dtype, const void* bias = nullptr);

// Primitive cache: bounded LRU, shared by all threads.
inline constexpr size_t kOnednnMatmulCacheCapacity = 256;
size_t onednn_matmul_cache_size();
void onednn_matmul_clear_cache();

}  // namespace mantissa::kernels
