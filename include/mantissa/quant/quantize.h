#pragma once
// Quantize and dequantize block-quantized tensors (mantissa/core/quantized_tensor.h) in
// bitsandbytes' formats, byte for byte: NF4 and FP4 with an fp32 absmax per block of 64 and
// optional double quantization of the absmax (quantize_4bit / dequantize_4bit with
// compress_statistics). docs/quantization.md describes the layouts and the rounding rules.
#include <functional>

#include "mantissa/core/quantized_tensor.h"

namespace mantissa::quant {

struct FourBitOptions {
  FormatId format = FormatId::kNf4;  // kNf4 or kFp4
  int64_t blocksize = 64;            // 32, 64, ..., 4096 as bitsandbytes allows
  bool double_quant = false;         // compress_statistics: absmax to 8 bits per block
};

// Quantizes a floating tensor (fp32, bf16 or fp16; any shape, contiguous or not). The result
// remembers shape and dtype. Throws for other dtypes, formats or block sizes.
QuantizedTensor quantize_4bit(const Tensor& values, const FourBitOptions& options = {});

// Builds the same QuantizedTensor piece by piece, so a large weight never exists in full
// precision: `fill(chunk, first)` must write chunk.numel() fp32 values, the elements
// [first, first + chunk.numel()) of the flat tensor. Chunks are a whole number of blocks.
QuantizedTensor quantize_4bit_generated(
    const Shape& shape, DType dtype, const FourBitOptions& options,
    const std::function<void(float*, int64_t first, int64_t count)>& fill);

// The fp32 absmax per block: the stored one, or the double-quantized one decoded as
// bitsandbytes does (code2[q] * absmax2[b / 256], then + offset, each rounded to fp32).
Tensor block_absmax(const QuantizedTensor& q);

// Full tensor in `dtype` (fp32, bf16 or fp16): table[code] * absmax in fp32, then one RNE
// rounding. Shape = q.shape.
Tensor dequantize(const QuantizedTensor& q, DType dtype = kFloat32);
// The same with absmax = block_absmax(q) already at hand (a layer decodes it once per step).
Tensor dequantize(const QuantizedTensor& q, DType dtype, const Tensor& absmax);

// Elements [first, first + count) of the flat tensor into `out` (dtype `dtype`, count
// elements), using absmax from block_absmax(q). For tile-wise dequantization inside a GEMM.
void dequantize_range(const QuantizedTensor& q, const float* absmax, int64_t first, int64_t count,
                      DType dtype, void* out);

// Quantizes one fp32 array of per-block absmax values the way double quantization does
// (mean subtracted, signed dynamic map, blocks of 256). Exposed for tests.
NestedAbsmax double_quantize_absmax(const float* absmax, int64_t n, Tensor& codes_out);

}  // namespace mantissa::quant
