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

// Primitive cache: bounded LRU, shared by all threads.
inline constexpr size_t kOnednnMatmulCacheCapacity = 256;
size_t onednn_matmul_cache_size();
void onednn_matmul_clear_cache();

}  // namespace mantissa::kernels
