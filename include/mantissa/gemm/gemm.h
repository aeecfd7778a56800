#pragma once
// The one matrix-product entry point. Every product mantissa computes -- matmul and linear
// (ops), the 4-bit and int8 layers (quant), the FP8 layers (fp8) -- describes its two operands
// and its epilogue here and calls gemm(). One dispatcher (src/gemm/dispatch.cpp) chooses the
// engine: cuBLAS/cuBLASLt for GPU tensors; on the CPU the native AVX2/AVX-512 GEMM, oneDNN
// (AMX or AVX-512 BF16 where the CPU has them), mantissa's AMX 4-bit kernels, or the float64
// kernel. The engines' code lives in src/gemm/*_products.cpp and src/kernels/cpu/gemm|onednn.
//
// An operand is dense (values in its dtype) or in a storage format of the format table
// (mantissa/formats/format_table.h): FP8 codes with a per-tensor scale, FP8 codes with fp32
// scales per 1x128 tile or 128x128 block (FP8 block scaling), block-format codes (MXFP8, MXFP4,
// NVFP4) with their E8M0/E4M3 block scales, 4-bit codes with fp32 block absmax, int8 codes with
// fp32 row absmax. Formats decode inside the engines' packing
// where the engine can; no engine makes a dequantized copy of a whole quantized operand.
#include <cstdint>
#include <optional>
#include <string>

#include "mantissa/core/format_id.h"
#include "mantissa/core/tensor.h"
#include "mantissa/formats/block_formats.h"

namespace mantissa::gemm {

// How float32 operands are multiplied (torch.set_float32_matmul_precision's three settings,
// mantissa/ops/matmul_precision.h): fp32 products ("highest"), three bf16 products per
// fp32 product ("high") or one ("medium"). On a GPU both bf16 settings mean TF32.
enum class Float32Products : uint8_t { kExact, kBf16x3, kBf16 };

// One operand of a product. The matrix the product reads is op(X) = X, or X^T where
// `transposed` is set.
struct Operand {
  // Dense: the values, at least 2-D (batch dims broadcast), read in place when contiguous or a
  // transposed view. FP8: the 2-D codes. 4-bit: the packed codes (two per byte). int8: the
  // 2-D codes.
  Tensor data;
  std::optional<FormatId> format;  // unset: dense values in data's dtype
  Shape shape;                     // the matrix X (rows, cols); packed formats need it
  float scale_inv = 1.0f;          // FP8: value = code * scale_inv; block formats: tensor scale
  // 4-bit: fp32 absmax per block; int8: fp32 absmax per row; block-scaled FP8: the fp32
  // scale_inv grid (fp8_blocks); block formats: the scale bytes (block_scaled).
  Tensor scales;
  int64_t block = 0;  // 4-bit: elements per absmax; block formats: 32 or 16
  bool transposed = false;
  bool tiles_16x16 = false;  // NVFP4: one scale per 16x16 tile (block_scaled)
  // Block formats: along the rows (block_scaled) or the columns (block_scaled_columns).
  formats::BlockAxis blocks = formats::BlockAxis::kAlongRows;
  Tensor widened;           // FP8 (optional): the codes already widened to bfloat16
  Tensor transposed_codes;  // FP8 on a GPU (optional): the codes already transposed

  bool dense() const { return !format.has_value(); }
  // The same operand read transposed.
  Operand t() const {
    Operand o = *this;
    o.transposed = !o.transposed;
    return o;
  }
};

Operand dense(const Tensor& values);
Operand fp8(const Tensor& codes, float scale_inv, const Tensor& widened = Tensor(),
            const Tensor& transposed_codes = Tensor());
// FP8 codes (rows, cols) under block scaling (format kE4m3Block1x128: scale_inv [rows,
// ceil(cols / 128)], one per 1x128 tile of a row; kE4m3Block128x128: [ceil(rows / 128),
// ceil(cols / 128)], one per 128x128 block); value = code * the scale_inv of its tile. The
// product of two such operands promotes its partial sums to fp32 every 128 elements of K
// (docs/fp8.md "Block scaling"); a 1x128 operand must have its tiles along K (A read as stored,
// B read transposed), a 128x128 one may be read either way. codes and scale_inv are contiguous
// or transposed views of contiguous matrices (a cast in 128x1 tiles of its columns is the 1x128
// operand of its transpose).
Operand fp8_blocks(FormatId format, const Tensor& codes, const Tensor& scale_inv);
// A matrix X (shape: rows, cols) in a block format of mantissa/formats/block_formats.h:
// mxfp8-e4m3, mxfp8-e5m2, mxfp4 (E8M0 scale per 1x32 block of a row) or nvfp4 (E4M3 scale per
// 1x16 block of a row, with `tensor_scale` the fp32 per-tensor scale; 1 for MX). codes and
// scales: uint8 tensors of BlockLayout's code_bytes() and scale_bytes(), as quantize_into writes
// them. Blocks run along the stored rows and must lie along the product's K: A is read as
// stored, B transposed (x @ W^T with W stored [N, K]). An NVFP4 operand quantized with 16x16
// tiles (tiles_16x16: each tile's scale stands in all 16 of its rows, which is checked) may be
// read either way. Elements times block scales are summed in fp32; the two tensor scales
// multiply the sum once (docs/fp8.md "Block-format operands").
Operand block_scaled(FormatId format, const Tensor& codes, const Tensor& scales, const Shape& shape,
                     float tensor_scale = 1.0f, bool tiles_16x16 = false);
// The same for an MX matrix X whose blocks run down its columns (formats::BlockAxis::
// kAlongColumns: codes in X's layout, E8M0 scales [ceil(rows / 32)][cols], TransformerEngine's
// MXFP8 column-wise data): its blocks lie along K where A is read transposed or B as stored
// (dW = dy^T @ x from the column-wise copies of dy and x).
Operand block_scaled_columns(FormatId format, const Tensor& codes, const Tensor& scales,
                             const Shape& shape);
// W (rows, cols) in nf4 or fp4: packed codes, fp32 absmax per `block` elements.
Operand four_bit(FormatId format, const Tensor& packed, const Shape& shape, int64_t block,
                 const Tensor& absmax);
// int8 codes (rows, cols) with each row's fp32 absmax (value = code * absmax / 127).
Operand int8_rows(const Tensor& codes, const Tensor& row_absmax);

// What happens to the fp32 accumulator before its one rounding to the output.
struct Epilogue {
  Tensor bias;    // undefined, or 1-D (N): added in fp32
  Tensor addend;  // int8 only: undefined, or fp32 (M, N) added before the bias
  // The output dtype. Unset: a dense operand's dtype; float32 for FP8 and int8 operands.
  // Dense bfloat16 operands with float32 out: the fp32 accumulator itself.
  std::optional<DType> out_dtype;
  // Dense bfloat16/float16 2-D operands only: float32 output holding exactly the products
  // rounded to this dtype (a gradient whose next step widens it; docs/amp.md).
  std::optional<DType> round_to;
  // Unset: the process-wide setting (set_float32_matmul_precision).
  std::optional<Float32Products> float32;
  // Two FP8 operands on the CPU only: fp32 multipliers of each output row (M values) and each
  // output column (N values), undefined for none. Applied after the operands' scale_invs and
  // before the bias, each multiply rounded in fp32:
  //   out[m, n] = f32(f32(f32(acc * alpha) * row_scale[m]) * col_scale[n]) + bias[n],
  // then rounded once to out_dtype (torch._scaled_mm's rowwise scales: fp8/rowwise.h). A NaN
  // keeps its own bits through the two scales, whatever they are.
  Tensor row_scale;
  Tensor col_scale;
  // Two FP8 operands on the CPU: the bias added to the product already rounded to a bfloat16 or
  // float16 out_dtype, in fp32, and the sum rounded again (torch's `y.to(dtype) + bias` with a
  // bias in that dtype: torchao's rowwise Linear), instead of before the one rounding.
  bool bias_after_rounding = false;
};

// op(a) @ op(b) with the epilogue. Throws mantissa::Error naming the operands when their
// shapes, formats or devices do not fit together.
Tensor gemm(const Operand& a, const Operand& b, const Epilogue& epilogue = {});

// The process-wide float32 setting: what set_float32_matmul_precision (mantissa/ops/
// matmul_precision.h) sets, read by every product whose epilogue leaves `float32` unset.
Float32Products default_float32_products();
void set_default_float32_products(Float32Products products);

// Whether FP8 products widen their codes to bfloat16 before the GEMM (so a cast may hand them
// over widened: fp8::quantize(..., widen = true)).
bool fp8_products_widen_codes();

// Whether FP8 products give the same bits whichever layout their operands' codes have
// (row-major, or transposed and read with swapped strides): true on the AVX2 GEMM that decodes
// codes while packing, where the same values land in the same panels either way; elsewhere the
// accumulation order may follow the layout.
bool fp8_products_layout_free();

// The 4-bit products' decode budget: where W is decoded a chunk at a time (no fused or AMX
// kernel), no chunk holds more than this many bytes (default 1 MiB).
int64_t four_bit_chunk_bytes();
void set_four_bit_chunk_bytes(int64_t bytes);

// The one-time warning of a bf16 float32 setting on a CPU without native bf16 products (they
// run on the fp32 GEMM: the setting's numbers, but no speed-up); empty where there is none.
std::string float32_emulation_warning(Float32Products products);

}  // namespace mantissa::gemm
