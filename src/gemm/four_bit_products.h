#pragma once
// The CPU engines of products with a 4-bit weight W (out_features, in_features): the forward
// x @ W^T (+ bias) and the input gradient g @ W (four_bit_products.cpp). None holds W
// dequantized in full (docs/quantization.md, "Where the weight is decoded"):
//   - fused: the native AVX2 GEMM decodes W's blocks inside its packing;
//   - AMX: mantissa's AMX kernels decode W a few rows per thread straight into tiles;
//   - chunked: W is decoded at most four_bit_chunk_bytes() at a time, into oneDNN's tiled
//     layout (`tiled`, where the CPU has native bf16) or a plain tensor, and each chunk's
//     product is written into its columns of the result.
// src/gemm/dispatch.cpp chooses which runs. x and g are contiguous 2-D in the compute dtype.
#include "kernels/cpu/quant/four_bit_amx.h"
#include "mantissa/core/format_id.h"
#include "mantissa/gemm/gemm.h"

namespace mantissa::gemm::detail {

struct FourBitWeight {
  FormatId format;    // kNf4 or kFp4
  Shape shape;        // (out_features, in_features)
  int64_t blocksize;  // elements per absmax
  Tensor packed;      // uint8, two codes per byte
  Tensor absmax;      // float32 per block
};

// The kernels' view of W (pointers into its tensors, which must stay alive).
kernels::quant::FourBitMatrix four_bit_matrix(const FourBitWeight& w);

// x @ W^T (transpose_w) or x @ W, in x's dtype.
Tensor four_bit_fused(const Tensor& x, const FourBitWeight& w, bool transpose_w,
                      const Tensor& bias);
// bf16 x (at most kernels::quant::kFourBitAmxMaxRows rows) @ W^T (+ bias), and g @ W.
Tensor four_bit_amx_forward(const Tensor& x, const FourBitWeight& w, const Tensor& bias);
Tensor four_bit_amx_input_grad(const Tensor& g, const FourBitWeight& w);
// The chunked forward and input gradient; f32: how a float32 chunk's product runs.
Tensor four_bit_chunked_forward(const Tensor& x, const FourBitWeight& w, const Tensor& bias,
                                bool tiled, Float32Products f32);
Tensor four_bit_chunked_input_grad(const Tensor& g, const FourBitWeight& w, bool tiled,
                                   Float32Products f32);

// GPU activations: W decoded in full on the GPU, then one cuBLAS product (w.transposed: the
// forward x @ W^T).
Tensor four_bit_on_gpu(const Tensor& x, const Operand& w, const Tensor& bias, Float32Products f32);

}  // namespace mantissa::gemm::detail
