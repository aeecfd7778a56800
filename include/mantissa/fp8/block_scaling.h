#pragma once
// FP8 block scaling, TransformerEngine 2.x's Float8BlockScaling (the DeepSeek-V3 recipe;
// docs/fp8.md "Block scaling"): E4M3 codes with one fp32 scale per 1x128 tile of a row
// (activations and gradients, tiles along the product's K) or per 128x128 block (weights, which
// then serve both orientations), scales rounded down to powers of 2 by default; products promote
// their partial sums to fp32 every 128 elements of K under the two block scales. The scale rule
// and the product are those of kernels/cpu/fp8/fp8_block.h.
#include "mantissa/core/format_id.h"
#include "mantissa/core/tensor.h"
#include "mantissa/fp8/meta.h"

namespace mantissa::fp8 {

// Where a BlockFp8's codes and scales lie.
enum class BlockFp8Layout {
  kRows,  // codes [rows, cols]; 1x128 tiles along the rows or 128x128 blocks (format)
  // codes [rows, cols] as the source lies, one scale per 128x1 tile of a column: the 1x128
  // tiles of the source's transpose (the weight gradient's operands, tiles along the tokens),
  // not transposed. TransformerEngine stores this copy transposed because Hopper's FP8 GEMMs
  // take only the TN layout; the CPU product reads it where it lies.
  kColumns,
};

// A 2-D tensor quantized under block scaling.
struct BlockFp8 {
  FormatId format = FormatId::kE4m3Block1x128;  // or kE4m3Block128x128 (layout kRows)
  BlockFp8Layout layout = BlockFp8Layout::kRows;
  Tensor codes;  // [rows, cols] float8_e4m3fn, contiguous
  // kRows: [rows, ceil(cols/128)] (1x128) or [ceil(rows/128), ceil(cols/128)] (128x128);
  // kColumns: [ceil(rows/128), cols].
  Tensor scale_inv;
  float amax = 0.0f;  // the largest tile amax (NaN passed over), for statistics
  CastCounts counts;
};

// x: 2-D float32, bfloat16 or float16 on the CPU. power_2: scales rounded down to powers of 2
// (TransformerEngine's default); epsilon: the floor of an amax (default 0).
BlockFp8 quantize_1x128(const Tensor& x, bool power_2 = true, float epsilon = 0.0f);
BlockFp8 quantize_128x128(const Tensor& x, bool power_2 = true, float epsilon = 0.0f);
// x in 128x1 tiles of its columns (layout kColumns, format kE4m3Block1x128): the codes, scales
// and statistics of quantize_1x128(x.t().contiguous()), transposed back.
BlockFp8 quantize_128x1(const Tensor& x, bool power_2 = true, float epsilon = 0.0f);
// The scale a tile of amax `amax` from a `src_dtype` tensor gets (E4M3).
float block_scale_of(float amax, DType src_dtype, bool power_2, float epsilon);

// code * scale_inv of its tile, float32 [rows, cols].
Tensor dequantize(const BlockFp8& q);

// op(A) @ op(B) (+ bias in fp32), rounded once to out_dtype, through gemm::gemm's block-scaled
// engine. A 1x128 operand must have its tiles along K: A not transposed, B transposed; a 128x1
// one (layout kColumns) the other way: A transposed, B not.
Tensor block_gemm(const BlockFp8& a, bool transpose_a, const BlockFp8& b, bool transpose_b,
                  const Tensor& bias = Tensor(), DType out_dtype = kFloat32);

}  // namespace mantissa::fp8
