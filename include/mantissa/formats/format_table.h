#pragma once
// The format table: one row per storage format (docs/design.md, "Format table"). A row says
// what the format is (its name, the bits of one element's code, the elements per scale and
// what the scale is) and which code encodes and decodes it: the scalar reference, whose bits
// every other path gives, and the kernel of each SIMD level that has its own. The bulk paths
// (core's conversions, quant's quantizers, fp8's casts) choose their level at run time from
// the CPU's features; the rows point at those same functions, so the table can run every level
// of every format against its reference (tests/formats) and a new format is one more row.
//
// The row is found by the FormatId a QuantizedTensor, a kernel or a precision's registry line
// carries (mantissa/core/format_id.h); names are for messages and files.
#include <cstdint>
#include <span>
#include <string_view>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/format_id.h"

namespace mantissa::formats {

enum class ScaleFormat : uint8_t {
  kNone,           // values stored as they are (bf16, f16)
  kFp32PerTensor,  // one fp32 scale for the tensor, chosen by the caller (FP8 delayed scaling)
  kFp32PerBlock,   // one fp32 absmax per block of consecutive elements
  kFp32PerRow,     // one fp32 absmax per row of a matrix
  kE8m0PerBlock,   // one E8M0 byte (2^(e - 127), 0xFF NaN) per block (OCP MX)
  // One E4M3 byte per block under one fp32 scale for the tensor (NVFP4).
  kE4m3PerBlockFp32PerTensor,
  // One fp32 per 1x128 tile of a row / per 128x128 block of a matrix (FP8 block scaling); the
  // value a code is multiplied by.
  kFp32Per1x128Tile,
  kFp32Per128x128Block,
};
// "none", "fp32 per tensor", "fp32 per block", "fp32 per row", "e8m0 per block",
// "e4m3 per block, fp32 per tensor", "fp32 per 1x128 tile", "fp32 per 128x128 block".
std::string_view scale_format_name(ScaleFormat scale);

// Encodes x[0, n) into `codes` (code_buffer_bytes). `block`: elements per scale for the
// per-block formats (the block formats take only their own: 32 for MX, 16 for NVFP4; a short
// last block is quantized as if padded with zeros), the row length for kFp32PerRow (n a
// multiple of it), ignored otherwise. `scales` (scale_buffer_bytes), by the row's scale
// format: fp32 values, one per block or row, written by the per-block and per-row formats and
// read by the per-tensor ones (scales[0] multiplies every value before rounding); one E8M0
// byte per block, written; for kE4m3PerBlockFp32PerTensor the fp32 per-tensor scale (computed
// from the values' amax) then one E4M3 byte per block, all written; unused (may be null) by
// kNone; for the FP8 block-scaled rows one fp32 scale_inv per tile of `block` (128; the n values
// are one row, so a 128x128 block of it is its 1x128 tile), written with TransformerEngine's
// defaults (power-of-2 scales, epsilon 0).
using EncodeFn = void (*)(const float* x, int64_t n, int64_t block, void* codes, void* scales);
// Decodes n values to float32 with the encoder's scales (per tensor: scales[0] is the inverse
// scale the codes are multiplied by).
using DecodeFn = void (*)(const void* codes, int64_t n, int64_t block, const void* scales,
                          float* out);

// The kernels of one SIMD level; null where the level has no kernel of its own for that
// direction (the next lower level's runs there).
struct FormatKernel {
  SimdLevel level;
  EncodeFn encode;
  DecodeFn decode;
};

struct FormatRow {
  FormatId id;
  std::string_view name;  // "bf16", "e4m3", "nf4", "int8-rowwise", "mxfp8-e4m3", ...
  int element_bits;       // bits of one element's code
  // Elements per scale: the default block of kFp32PerBlock formats (a tensor may choose
  // another: 4-bit takes 32 to 4096), the fixed block of the block formats (MX 32, NVFP4 16);
  // 0 where the scale is per tensor, per row or absent.
  int64_t block_size;
  ScaleFormat scale;
  EncodeFn encode_reference;  // the scalar reference every kernel matches bit for bit
  DecodeFn decode_reference;
  std::span<const FormatKernel> kernels;  // the SIMD levels with kernels, lowest first
};

// The bytes of the codes and of the scales of n values of `row` in blocks (or rows) of
// `block` (as EncodeFn takes it).
int64_t code_buffer_bytes(const FormatRow& row, int64_t n);
int64_t scale_buffer_bytes(const FormatRow& row, int64_t n, int64_t block);

// Every row, in FormatId order.
std::span<const FormatRow> format_table();
const FormatRow& format_row(FormatId id);
// Whether the row of `id` has `bits`-bit elements under scales of kind `scale`: the layout a
// layer or a GEMM engine takes, so a new row of a known layout needs no case of its own there.
bool has_layout(FormatId id, int bits, ScaleFormat scale);
// The row whose name is `name`; throws listing the names.
const FormatRow& format_row(std::string_view name);
std::string_view format_name(FormatId id);

// What a bulk path runs on a CPU at `level`: the kernel of the highest level not above it that
// has one for that direction, else the scalar reference.
EncodeFn encoder(const FormatRow& row, SimdLevel level = simd_level());
DecodeFn decoder(const FormatRow& row, SimdLevel level = simd_level());

}  // namespace mantissa::formats
