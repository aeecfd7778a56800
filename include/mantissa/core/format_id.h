#pragma once
// FormatId: which storage format a tensor's codes are in, one value per row of the format
// table (mantissa/formats/format_table.h, which holds each format's name, bits, block size,
// scale format and kernels). The id is core, as DType is: a QuantizedTensor carries it and the
// kernels take it, so the one value a precision's registry line names reaches the kernel
// unchanged (docs/design.md, "Format table").
#include <cstdint>

namespace mantissa {

enum class FormatId : uint8_t {
  kBf16,               // bfloat16: 8-bit exponent, 7-bit mantissa, no scale
  kF16,                // IEEE half: 5-bit exponent, 10-bit mantissa, no scale
  kE4m3,               // FP8 E4M3 (finite, no inf), one fp32 scale per tensor
  kE5m2,               // FP8 E5M2, one fp32 scale per tensor
  kNf4,                // 4-bit NormalFloat codes, two per byte, fp32 absmax per block
  kFp4,                // bitsandbytes' 4-bit float codes, same layout as kNf4
  kInt8Rowwise,        // int8 [rows, cols], fp32 absmax per row (LLM.int8's CB/SCB)
  kBlockwiseDynamic8,  // 8-bit indices into a 256-entry dynamic map, fp32 absmax per block
  kMxfp8E4m3,          // OCP MXFP8: E4M3 codes, one E8M0 scale per 1x32 block
  kMxfp8E5m2,          // OCP MXFP8: E5M2 codes, one E8M0 scale per 1x32 block
  kMxfp4,              // OCP MXFP4: E2M1 codes two per byte, one E8M0 scale per 1x32 block
  kNvfp4,              // NVFP4: E2M1 codes two per byte, E4M3 scale per 1x16 block, fp32 per tensor
  kE4m3Block1x128,     // FP8 E4M3 [rows, cols], one fp32 scale per 1x128 tile of a row (TE block)
  kE4m3Block128x128,   // FP8 E4M3 [rows, cols], one fp32 scale per 128x128 block (TE block)
};

}  // namespace mantissa
