#pragma once
// The MX recipes (docs/fp8.md "MX recipes"): `mxfp8`, TransformerEngine's MXFP8BlockScaling
// (E4M3 codes, E5M2 for gradients under HYBRID, one E8M0 scale per 1x32 block rounded up as
// TransformerEngine and cuBLAS do), and `mxfp4`, torchao's MX recipe with E2M1 elements (E8M0
// scales floored as the OCP MX spec and torchao's to_mx do) in all three products. For x (rows
// M, features K), W (N, K) and dy (M, N), each operand quantized along its product's K from the
// high-precision tensor (row-wise and column-wise copies, never one from the other):
//   y  = Q(x) @ Q(W)^T + b        (bias added to the fp32 result)
//   dx = Q(dy) @ Q(W^T)^T
//   dW = Q(dy^T) @ Q(x^T)^T       (x^T's and W^T's codes are made in forward)
// through gemm::block_scaled, each product rounded once to its output dtype; db is the column
// sum of dy in fp32. The column-wise copies Q(W^T), Q(x^T) and Q(dy^T) are W, x and dy with
// 32x1 blocks down their columns, in their own layout (TransformerEngine's MXFP8 column-wise
// data), which the products read transposed. Under mxfp4 the recipe's enable_stochastic_rounding
// and enable_rht switch on Tseng et al.'s MXFP4 training for the two backward products: their
// four operands rounded stochastically after a 3/4 pre-scale (the products multiplied by 16/9),
// and transformed along their K by the 16-point random Hadamard transform
// (kernels/cpu/mx/hadamard.h), zero-padded to whole blocks; both run along x^T's rows, so these
// column-wise copies are x^T's rows, made from a transposed copy or transform. The layer's state
// records, per role, the tensor's amax, the multiplier of the block holding it, and the saturated
// and flushed counts.
#include <memory>

#include "mantissa/core/format_id.h"
#include "mantissa/core/tensor.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/fp8/meta.h"
#include "mantissa/fp8/recipe.h"

namespace mantissa::fp8 {

// A 2-D tensor in an MX format (mxfp8-e4m3, mxfp8-e5m2, mxfp4), the layout of
// mantissa/formats/block_formats.h, its blocks along the rows or (the column-wise copies of
// the backward products, as TransformerEngine's MXFP8 column-wise data) along the columns.
struct MxTensor {
  FormatId format = FormatId::kMxfp8E4m3;
  Shape shape;  // (rows, cols): the quantized tensor's, either way
  formats::BlockAxis blocks = formats::BlockAxis::kAlongRows;
  Tensor codes;   // uint8, BlockLayout::code_bytes(), row-major either way
  Tensor scales;  // uint8 E8M0, one per 1x32 block of a row, or per 32x1 block of a column
  // The per-tensor scale a product applies once: 1, or 4/3 for the stochastically rounded
  // mxfp4 operands (their 3/4 pre-scale undone; kernels/cpu/mx/mxfp4_sr.h).
  float tensor_scale = 1.0f;
  float amax = 0.0f;   // max |x|, NaN passed over
  float scale = 1.0f;  // the multiplier of the block holding amax
  CastCounts counts;
};

// x: 2-D float32, bfloat16 or float16 on the CPU (float16 is widened to float32 first, exactly).
// Without `stats` amax, scale and counts stay at their defaults (a copy no one records).
MxTensor quantize_mx(const Tensor& x, FormatId format, formats::E8m0Rounding rounding,
                     bool stats = true);

// x with 32x1 blocks down its columns (BlockAxis::kAlongColumns): x^T's row-wise codes and
// scales kept in x's layout, read from x as it lies; the recipes' column-wise copies.
MxTensor quantize_mx_columns(const Tensor& x, FormatId format, formats::E8m0Rounding rounding,
                             bool stats = true);

// A @ B^T (+ bias in fp32), rounded once to out_dtype, where A and B are the operands' matrices
// along K: a tensor with row blocks itself, one with column blocks its transpose (dW = dy^T @ x
// is mx_gemm of the column-blocked dy and x).
Tensor mx_gemm(const MxTensor& a, const MxTensor& b, const Tensor& bias = Tensor(),
               DType out_dtype = kFloat32);

// The linear function of the recipe (recipe.kind kMxfp8 or kMxfp4).
Tensor fp8_linear_mx(const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const std::shared_ptr<ScalingState>& state, const Recipe& recipe);

}  // namespace mantissa::fp8
