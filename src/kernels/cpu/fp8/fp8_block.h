#pragma once
// FP8 block scaling (TransformerEngine's Float8BlockScaling, the DeepSeek-V3 recipe; docs/fp8.md
// "Block scaling"): FP8 codes with one fp32 scale per 1x128 tile of a row (activations,
// gradients) or per 128x128 block (weights), and the product of two such operands with the
// partial sums promoted to fp32 every 128 elements of K. Tiles and blocks cut by a tensor's edge
// hold the elements that remain.
//
// A tile's scale is TransformerEngine's compute_scale_from_amax (transformer_engine/common/
// recipe/recipe_common.cuh) with value_for_inf the source dtype's largest finite value
// (compute_scale_from_types):
//   amax  = max |x| over the tile, NaN passed over (fmaxf from 0), inf kept
//   amax  = max(amax, epsilon)
//   scale = 1 where amax is 0, inf or NaN; else f32(fp8_max / amax), the source dtype's largest
//           finite value where that overflows, with the mantissa bits cleared when power_2
//   codes = satfinite_rne(f32(x * scale)) (the delayed-scaling cast, fp8_cast.h)
//   scale_inv = f32(1.0 / f64(scale)) (the value a code is multiplied by)
#include <bit>
#include <cmath>
#include <cstdint>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::fp8 {

inline constexpr int64_t kBlockLen = 128;  // the tile length and the block side

// Tiles or blocks of `len` along a dimension of n elements (the last one may be short).
inline int64_t block_count(int64_t n) { return (n + kBlockLen - 1) / kBlockLen; }

// TransformerEngine's compute_scale_from_amax (see the file comment). Inline: the casts call it
// once per 128 elements.
inline float block_scale(float amax, float fp8_max, float value_for_inf, bool power_2,
                         float epsilon) {
  // A NaN amax fails the comparison and is caught below, as in TransformerEngine.
  if (amax < epsilon) amax = epsilon;
  if (std::isinf(amax) || amax == 0.0f || std::isnan(amax)) return 1.0f;
  float scale = fp8_max / amax;
  if (std::isinf(scale)) scale = value_for_inf;
  if (power_2) scale = std::bit_cast<float>(std::bit_cast<uint32_t>(scale) & 0xFF800000u);
  return scale;
}
// The largest finite value of a float32, bfloat16 or float16 source: block_scale's value_for_inf.
float largest_finite(DType src_dtype);

// scale_inv of a scale: f32(1.0 / f64(scale)).
inline float block_scale_inverse(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

// How much of the format's range a tile's largest value takes once scaled (an inf amax: none
// of the finite range is measured, 0).
inline double block_peak(float amax, float scale, float fp8_max) {
  const double p = static_cast<double>(amax) * scale / fp8_max;
  return std::isfinite(p) ? p : 0.0;
}

struct BlockCastStats {
  float amax = 0.0f;      // max |x| over the tensor, NaN passed over
  int64_t saturated = 0;  // elements with |f32(x * scale)| above fp8_max
  int64_t flushed = 0;    // nonzero, non-NaN elements whose code is ±0
  double peak = 0.0;      // the largest tile amax * scale / fp8_max (above 1: saturated)
};

// src: rows x cols of float32, bfloat16 or float16, row r at src + r * ld elements. codes: rows x
// cols, contiguous. fp8: float8_e4m3fn or float8_e5m2.
//   1x128 tiles: scale_inv is [rows, block_count(cols)] (tile t of row r at r * tiles + t).
BlockCastStats quantize_1x128(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                              int64_t ld, uint8_t* codes, float* scale_inv, DType fp8, bool power_2,
                              float epsilon, SimdLevel level = simd_level());
//   128x1 tiles (the 1x128 tiles of x^T, for the product that reads x transposed, kept in x's
//   layout): codes are rows x cols as x lies, scale_inv [block_count(rows), cols] (the tile of
//   rows 128 t.. of column c at t * cols + c). The codes, scales and statistics are those of
//   quantize_1x128 of x^T made contiguous, transposed back; x is read in memory order, each
//   column's amax taken as an elementwise maximum over the band's rows (bfloat16 and float32 to
//   E4M3: detail::column_tiles_*_e4m3_avx2, and column_tiles_bf16_e4m3_avx512).
BlockCastStats quantize_128x1(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                              int64_t ld, uint8_t* codes, float* scale_inv, DType fp8, bool power_2,
                              float epsilon, SimdLevel level = simd_level());
//   128x128 blocks: scale_inv is [block_count(rows), block_count(cols)].
BlockCastStats quantize_128x128(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                                int64_t ld, uint8_t* codes, float* scale_inv, DType fp8,
                                bool power_2, float epsilon, SimdLevel level = simd_level());

// The bytes of each row that quantize_128x128 reads for a group of blocks side by side, at most
// (the models' and most weights' whole rows): the amax pass reads a group's 128 rows (up to 2 MiB)
// as one run through memory where the rows are contiguous, and the cast reads them again from L2
// and L3. Narrower groups (2 KiB of each row, 256 KiB in L2) read 128 short runs far apart, which
// the hardware prefetchers follow badly: 0.5-0.6 of memcpy against 0.8-0.9.
inline constexpr int64_t kBlockGroupBytes = 16384;
// The bytes of each row that quantize_128x1 casts a band at a time, at most: a band's strip (128
// rows, 512 KiB) stays in L2 (1 MiB on Zen 4) from the amax pass to the codes pass, beside the
// next strip that the codes pass fetches into L2. Unlike the 128x128 cast, whose cast pass is
// lighter, the column cast's codes pass gains more from reading its rows from L2 than it loses
// on the 128 shorter runs: at 4096 x 4096 on one thread, 0.28 -> 0.21 ns a value for float32
// and 0.16 -> 0.13 for bfloat16 against 16 KiB (and on 4 KiB pages 0.33 -> 0.27, 0.19 -> 0.14);
// 2 KiB and 8 KiB were slower than 4 KiB.
inline constexpr int64_t kColumnGroupBytes = 4096;

namespace detail {
// count full 1x128 tiles of bfloat16 to E4M3 codes on AVX2 (quantize_1x128's tiles where the
// source is bfloat16 and the format E4M3): tile i's values at src + i * src_step, its codes at
// dst + i * dst_step, its scale_inv at scale_inv[i * inv_step]. Each tile's amax, scale and codes
// are quantize_1x128's; its statistics are folded into `st` (amax and peak as maxima, the counts
// added). for_inf: block_scale's value_for_inf for bfloat16.
void block_tiles_bf16_e4m3_avx2(const uint16_t* src, int64_t src_step, int64_t count, uint8_t* dst,
                                int64_t dst_step, float* scale_inv, int64_t inv_step, float for_inf,
                                bool power_2, float epsilon, BlockCastStats& st);
// A group of `count` (at most kBlockGroupBytes / (128 * the source's item size)) 128x128 blocks
// side by side, `rows` (at most 128) rows: row r's values at src + r * ld elements, its codes at
// dst + r * ldd, block j's values 128 * j elements further and its scale_inv at scale_inv[j].
struct BlockGroup {
  const void* src;
  uint8_t* dst;
  float* scale_inv;
  int64_t rows, count;
};
// n groups of bfloat16 cast to E4M3 on AVX2 one after the other (quantize_128x128's full blocks,
// their amax, scales, codes and statistics, folded into `st`): each group's blocks' maxima from
// one pass over its rows in memory order, run together with the casts of the group before it
// (fp8_block_groups.h). stream: the codes are written with streaming stores (every group's dst
// and ldd multiples of 32), for tensors whose codes the caches do not hold
// (common/stream_codes.h).
void block_groups_bf16_e4m3_avx2(const BlockGroup* groups, int64_t n, int64_t ld, int64_t ldd,
                                 float for_inf, bool power_2, float epsilon, bool stream,
                                 BlockCastStats& st);
// block_groups_bf16_e4m3_avx2 on AVX-512 with VBMI (fp8_block_groups_avx512.cpp), with the same
// arguments and results: the common rows' codes in 512-bit lanes, the rare ones and the blocks
// holding a NaN through the AVX2 body (the two below).
void block_groups_bf16_e4m3_avx512(const BlockGroup* groups, int64_t n, int64_t ld, int64_t ldd,
                                   float for_inf, bool power_2, float epsilon, bool stream,
                                   BlockCastStats& st);
// The AVX2 group walk's cast of 128 bfloat16 values at s into d under the scale of a block whose
// amax is `amax` (no NaN among them), and its walk of a block holding a NaN (its amax with each
// NaN passed over, its scale into scale_inv and the running maxima, its codes), the counts
// added to st.
void tile_bf16_e4m3_avx2(const uint16_t* s, uint8_t* d, float amax, float scale,
                         BlockCastStats& st);
void nan_block_bf16_e4m3_avx2(const uint16_t* src, int64_t ld, int64_t rows, uint8_t* dst,
                              int64_t ldd, float* scale_inv, float for_inf, bool power_2,
                              float epsilon, float& amax_max, double& top_max, BlockCastStats& st);
// The float32 counterparts of block_tiles_bf16_e4m3_avx2 and block_groups_bf16_e4m3_avx2
// (fp8_block_f32_avx2.cpp), with the same arguments.
void block_tiles_f32_e4m3_avx2(const float* src, int64_t src_step, int64_t count, uint8_t* dst,
                               int64_t dst_step, float* scale_inv, int64_t inv_step, float for_inf,
                               bool power_2, float epsilon, BlockCastStats& st);
void block_groups_f32_e4m3_avx2(const BlockGroup* groups, int64_t n, int64_t ld, int64_t ldd,
                                float for_inf, bool power_2, float epsilon, bool stream,
                                BlockCastStats& st);
// The first of the column bodies' per-column maxima within `buffer` (4 KiB more than they need,
// 64-byte aligned): 64-byte aligned and half a page from `src` in address bits 0-11. At a
// multiple of 4 KiB apart (as a stack and a heap layout may place them), every load of a source
// row waits on the store of the maxima before it (4 KiB aliasing).
template <typename T>
T* half_a_page_from(T* buffer, const void* src) {
  const auto gap = (reinterpret_cast<uintptr_t>(src) + 2048 - reinterpret_cast<uintptr_t>(buffer)) &
                   4095 & ~uintptr_t{63};
  return buffer + gap / sizeof(T);
}
// A band of `rows` (at most 128) rows of bfloat16 (row r at src + r * ld) cast to E4M3 as 128x1
// tiles of its `cols` columns (at most kColumnGroupBytes / 2 + 31): row r's codes at
// dst + r * ldd, column c's scale_inv at scale_inv[c]. Each column's largest magnitude bits from
// one pass over the rows in memory order (an elementwise maximum), the columns' scales 16 at a
// time, then the codes row by row while the rows are in cache, under per-column constants, 32
// columns a step (the last, short one through a buffer): fp8_block_columns.h's walk, over each
// level's lanes.
// Each tile's amax, scale and codes are quantize_128x1's; its statistics are folded into `st`.
// next: null, or the first value of the band cast next (its rows at next + r * ld for r <
// rows), whose first next_bytes of each row are fetched into L2 during the codes. stream: the
// codes of the full 32-column steps are written with streaming stores (dst and ldd multiples of
// 32), for tensors whose codes the caches do not hold (common/stream_codes.h).
void column_tiles_bf16_e4m3_avx2(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols,
                                 uint8_t* dst, int64_t ldd, float* scale_inv, float for_inf,
                                 bool power_2, float epsilon, const uint16_t* next,
                                 int64_t next_bytes, bool stream, BlockCastStats& st);
// The float32 counterpart (fp8_block_f32_avx2.cpp), at most kColumnGroupBytes / 4 + 31 columns.
void column_tiles_f32_e4m3_avx2(const float* src, int64_t ld, int64_t rows, int64_t cols,
                                uint8_t* dst, int64_t ldd, float* scale_inv, float for_inf,
                                bool power_2, float epsilon, const float* next, int64_t next_bytes,
                                bool stream, BlockCastStats& st);
// column_tiles_bf16_e4m3_avx2 on AVX-512 (fp8_block_avx512.cpp), with the same arguments and
// results: 32 columns a vector, their scales 16 at a time in float32 lanes, the codes in 16-bit
// lanes with unsigned compares for the subnormal test and a masked tail.
void column_tiles_bf16_e4m3_avx512(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols,
                                   uint8_t* dst, int64_t ldd, float* scale_inv, float for_inf,
                                   bool power_2, float epsilon, const uint16_t* next,
                                   int64_t next_bytes, bool stream, BlockCastStats& st);
// The codes of 32 bfloat16 values at p (32 readable) into d through float32 lanes under each
// one's scale (scale_of): satfinite_codes of f32(x * scale), the saturated and flushed elements
// added to st. The AVX-512 column body's rare path.
void column_codes32_bf16_f32_lanes(const uint16_t* p, const float* scale_of, uint8_t* d,
                                   BlockCastStats& st);
}  // namespace detail

// One operand of the block-scaled product, seen as the matrix V (rows R, the product's K
// columns): V[i, k] = value(codes[i * row_stride + k * col_stride]) *
// scale_inv[(i / tile_rows) * scale_row_stride + (k / 128) * scale_col_stride]. A is V = op(A)
// (R = M); B is V = op(B)^T (R = N). tile_rows is 1 for 1x128 tiles along K, 128 for 128x128
// blocks. A 128x1 cast of X (quantize_128x1) is the 1x128 tiles of X^T with row_stride 1: the
// product decodes it where it lies, transposing 8 x 8 codes in registers as it packs the slice.
struct BlockOperandView {
  const uint8_t* codes;
  int64_t row_stride;
  int64_t col_stride;
  const float* scale_inv;
  int64_t tile_rows;
  int64_t scale_row_stride;
  int64_t scale_col_stride;
  DType fp8;
};

// out[m, n] (M x N float32, contiguous) = the block-scaled product of a and b over K:
//   partial(kb) = sum over k of slice kb (128 elements, the last one short) of
//                 value(a code) * value(b code), in fp32 in k order (each product is exact)
//   acc = fma(partial(kb), f32(sa(m, kb) * sb(n, kb)), acc) in kb order, from 0
//   out = f32(acc + bias[n]) (bias may be null)
// Codes are decoded while each 128-K slice is packed; no operand is dequantized whole.
// Every SIMD level gives the same bits.
void block_scaled_gemm(const BlockOperandView& a, const BlockOperandView& b, int64_t M, int64_t N,
                       int64_t K, const float* bias, float* out, SimdLevel level = simd_level());
// The same product with out (M x N, contiguous) in out_dtype: float32, or bfloat16 or float16
// holding f32(acc + bias[n]) rounded as Tensor::to rounds float32 (no float32 copy of the output
// is made).
void block_scaled_gemm(const BlockOperandView& a, const BlockOperandView& b, int64_t M, int64_t N,
                       int64_t K, const float* bias, void* out, DType out_dtype,
                       SimdLevel level = simd_level());

}  // namespace mantissa::kernels::fp8
