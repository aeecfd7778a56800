// The two products of a 4-bit Linear (linear_4bit): the forward x @ W^T (+ bias) and the input
// gradient g @ W, each on the fastest path the CPU has. None of them holds W dequantized in
// full (docs/quantization.md, "Where the weight is decoded"):
//   - the AVX2 level decodes W's blocks inside the native GEMM's packing;
//   - bf16 with AMX, up to kFourBitAmxMaxRows input rows: mantissa's AMX kernels decode W a few
//     rows per thread at a time straight into tiles;
//   - otherwise W is decoded a chunk at a time, at most four_bit_chunk_bytes() of it, into
//     oneDNN's tiled layout where the CPU has native bf16 (no repacking by oneDNN), else into a
//     plain tensor, and each chunk's product is written into its columns of the result.
// On a GPU (x and W's codes there) W is decoded in full into x's dtype for one cuBLAS product:
// the decode costs a fraction of the product there, and the decoded copy is freed right after.
#pragma once

#include "mantissa/core/tensor.h"
#include "mantissa/quant/quantize.h"

namespace mantissa::quant::detail {

// x (rows, in_features) @ W^T (+ bias) in x's dtype (bf16, fp16 or fp32); absmax: W's block
// absmax resolved to float32 (block_absmax).
Tensor four_bit_forward(const Tensor& x, const QuantizedTensor& w, const Tensor& absmax,
                        const Tensor& bias);

// g (rows, out_features) @ W in g's dtype.
Tensor four_bit_input_grad(const Tensor& g, const QuantizedTensor& w, const Tensor& absmax);

}  // namespace mantissa::quant::detail
