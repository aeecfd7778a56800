#pragma once
// The product of two block-format operands (MXFP8, MXFP4, NVFP4; mx_cast.h has their layout).
// Each element times its block scale is exact in float32 (an E8M0 scale is a power of two; an
// E2M1 value times an E4M3 scale has at most 6 significant bits), so the kernel decodes those
// products into float panels one K-slice at a time and accumulates in fp32; the per-tensor
// scales (NVFP4's; 1 for MX) multiply the accumulator once at the end.
#include <cstdint>

#include "kernels/cpu/mx/mx_scalar.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::mx {

// One operand seen as the matrix V (R rows, the product's K columns). The stored matrix X is
// rows x cols in the mx_cast.h layout (codes row-major; scales one per 1x`block` of a row, or
// with `blocks` kAlongColumns one per 32x1 block of a column, mx_quantize_columns's). V = X
// where `transposed` is false (blocks along K: 1x`block` ones). V = X^T is offered for blocks
// along X's columns (MX), and for NVFP4 with 16x16 tiles (a tile's scale is in each of its rows,
// so a column's element finds it as well); its panels are decoded from X's rows as they lie.
struct MxOperandView {
  const uint8_t* codes;
  const uint8_t* scales;
  Element element;
  bool nvfp4;  // scales are E4M3 (NVFP4), else E8M0 (MX)
  int64_t rows;
  int64_t cols;
  bool transposed;
  MxBlocks blocks = MxBlocks::kAlongRows;
};

// out[m, n] (M x N float32, contiguous) =
//   f32(f32(sum over k of va(m, k) * vb(n, k)) * alpha) + bias[n]
// where v(i, k) = value(code) * value(block scale), exact in fp32, and the sum is one fp32 fma
// per k in k order from 0 (so every SIMD level gives the same bits). A is V = op(A) (R = M), B
// is V = op(B)^T (R = N). alpha: the product of the two per-tensor scales; bias may be null.
// Codes are decoded while each K-slice is packed; no operand is dequantized whole.
void mx_gemm(const MxOperandView& a, const MxOperandView& b, int64_t M, int64_t N, int64_t K,
             float alpha, const float* bias, float* out, SimdLevel level = simd_level());
// The same rounded to bfloat16 (M x N, contiguous) as Tensor::to rounds the float32 result:
// each task's sums are held in a float32 buffer of the task's size and rounded as the task
// ends, while they are in cache, so no M x N float32 result is made.
void mx_gemm(const MxOperandView& a, const MxOperandView& b, int64_t M, int64_t N, int64_t K,
             float alpha, const float* bias, uint16_t* out, SimdLevel level = simd_level());

}  // namespace mantissa::kernels::mx
