#pragma once
// QuantizedTensor: a tensor stored in a packed sub-byte or block-scaled layout (bitsandbytes'
// NF4/FP4 with per-block absmax, optionally double-quantized; LLM.int8's int8 rows with one
// scale per row). It is a plain aggregate of ordinary Tensors, so every byte comes from the
// counting allocator (memory_allocated() sees it) and the pieces save to safetensors as they
// are. Quantizing and dequantizing live one layer up, in mantissa/quant/quantize.h; the
// layouts and their cost per element are in docs/quantization.md.
#include <cstdint>

#include "mantissa/core/format_id.h"
#include "mantissa/core/tensor.h"

namespace mantissa {

// The second level of double quantization: the per-block absmax minus its mean (`offset`),
// quantized with bitsandbytes' signed 8-bit dynamic map in blocks of `blocksize` (256).
struct NestedAbsmax {
  Tensor absmax;     // fp32 [ceil(nblocks / blocksize)], the scale of each group of codes
  Tensor code;       // fp32 [256], the dynamic map (stored with the tensor, as bitsandbytes does)
  float offset = 0;  // the mean that was subtracted
  int64_t blocksize = 256;
};

struct QuantizedTensor {
  FormatId format = FormatId::kNf4;  // kNf4, kFp4 or kInt8Rowwise
  Shape shape;                       // the logical shape, e.g. [out_features, in_features]
  DType dtype = kFloat32;            // the dtype the values had before quantization
  int64_t blocksize = 64;            // elements per absmax (4-bit); kInt8Rowwise: the row length
  Tensor data;              // 4-bit: uint8 [(numel + 1) / 2, 1]; kInt8Rowwise: int8 = shape
  Tensor absmax;            // fp32 [nblocks] (kInt8Rowwise: [rows]); uint8 [nblocks] when nested
  Tensor code;              // 4-bit: fp32 [16], the value of each code (quant_map)
  bool has_nested = false;  // double quantization: absmax holds uint8 codes, see nested
  NestedAbsmax nested;

  bool defined() const { return data.defined(); }
  int64_t numel() const { return numel_of(shape); }
  int64_t num_blocks() const { return absmax.defined() ? absmax.numel() : 0; }
  // Bytes of the per-element payload: packed data, absmax and the nested absmax plus its
  // offset. The code tables (64 or 1024 bytes per tensor, fixed) are left out so that
  // stored_bits_per_element() is the figure bitsandbytes and the QLoRA paper quote.
  int64_t stored_bytes() const;
  // Everything held, code tables included.
  int64_t total_bytes() const;
  double stored_bits_per_element() const {
    return numel() ? 8.0 * static_cast<double>(stored_bytes()) / static_cast<double>(numel()) : 0;
  }
};

}  // namespace mantissa
