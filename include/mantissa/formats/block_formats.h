#pragma once
// Quantizing to and from the block formats (docs/mx_formats.md): MXFP8 (E4M3 or E5M2 codes,
// one E8M0 scale per 1x32 block), MXFP4 (E2M1 codes, E8M0 per 1x32) and NVFP4 (E2M1 codes, one
// E4M3 scale per 1x16 block or 16x16 tile, an fp32 per-tensor scale). The bytes and scales
// equal torchao's CPU reference (to_mx, nvfp4_quantize) bit for bit; tests/formats holds them
// to its fixtures. A recipe calls one function per format on a float32 or bfloat16 matrix and
// `dequantize` for the way back; the `_into` forms write caller-owned buffers of the sizes
// BlockLayout gives.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "mantissa/core/bfloat16.h"
#include "mantissa/core/format_id.h"

namespace mantissa::formats {

// How an MX block's E8M0 scale follows from the block's amax.
enum class E8m0Rounding : uint8_t {
  kFloor,  // 2^(floor(log2 amax) - emax_elem): OCP MX v1.0 and torchao's to_mx default
  kRceil,  // 2^ceil(log2(amax / elem_max)): TransformerEngine and cuBLAS (nothing saturates)
};

struct MxOptions {
  E8m0Rounding rounding = E8m0Rounding::kFloor;
};

struct Nvfp4Options {
  // One scale per 16x16 tile (TransformerEngine's 2-D scaling for weights): the tile's scale
  // is stored in each of its 16 rows, so the layout and the decoding are the 1x16 ones.
  bool tiles_16x16 = false;
  // Stochastic rounding of the elements (gradients): unbiased, from Philox4x32-10 under `seed`;
  // element (r, c) draws from a counter made of (c, r, offset) (kernels/cpu/mx/philox.h), so
  // (seed, offset) repeats a quantization exactly and a recipe advances `offset` once per
  // tensor it rounds.
  bool stochastic = false;
  uint64_t seed = 0;
  uint64_t offset = 0;
  // The fp32 per-tensor scale; unset: max |x| / (448 * 6) (1 where every element is 0).
  std::optional<float> tensor_scale;
};

// Which way a matrix's blocks lie. Either way the codes keep the matrix's row-major layout.
enum class BlockAxis : uint8_t {
  kAlongRows,     // 1 x block runs of a row; scales [rows][ceil(cols / block)]
  kAlongColumns,  // block x 1 runs down a column; scales [ceil(rows / block)][cols]
};

// The sizes of one rows x cols matrix in a block format.
struct BlockLayout {
  FormatId format;
  int64_t rows = 0;
  int64_t cols = 0;
  BlockAxis blocks = BlockAxis::kAlongRows;
  int64_t block() const;           // 32 (MX) or 16 (NVFP4)
  int64_t row_code_bytes() const;  // cols (FP8) or ceil(cols / 2) (E2M1)
  int64_t row_scales() const;      // ceil(cols / block)
  int64_t code_bytes() const { return rows * row_code_bytes(); }
  int64_t scale_bytes() const {
    return blocks == BlockAxis::kAlongRows ? rows * row_scales()
                                           : (rows + block() - 1) / block() * cols;
  }
};

// A quantized matrix, row-major. codes: one FP8 code per byte, or two E2M1 codes per byte with
// the even column in the low nibble (an odd row ends in a byte whose high nibble is 0); scales:
// one byte per block of a row, E8M0 (MX) or E4M3 (NVFP4); a row's short last block is
// quantized as if padded with zeros.
struct BlockQuantized {
  BlockLayout layout;
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales;
  float tensor_scale = 1.0f;  // NVFP4's per-tensor scale (a value is code * scale * this); 1 for MX
};

// Whether `format` is one of the block formats above.
bool is_block_format(FormatId format);

// MXFP8: element kMxfp8E4m3 or kMxfp8E5m2. x holds rows * cols values.
BlockQuantized quantize_mxfp8(std::span<const float> x, int64_t rows, int64_t cols,
                              FormatId element = FormatId::kMxfp8E4m3, const MxOptions& = {});
BlockQuantized quantize_mxfp8(std::span<const BFloat16> x, int64_t rows, int64_t cols,
                              FormatId element = FormatId::kMxfp8E4m3, const MxOptions& = {});
BlockQuantized quantize_mxfp4(std::span<const float> x, int64_t rows, int64_t cols,
                              const MxOptions& = {});
BlockQuantized quantize_mxfp4(std::span<const BFloat16> x, int64_t rows, int64_t cols,
                              const MxOptions& = {});
BlockQuantized quantize_nvfp4(std::span<const float> x, int64_t rows, int64_t cols,
                              const Nvfp4Options& = {});
BlockQuantized quantize_nvfp4(std::span<const BFloat16> x, int64_t rows, int64_t cols,
                              const Nvfp4Options& = {});

// The same into caller-owned buffers (codes: layout.code_bytes(), scales: layout.scale_bytes()).
// Returns the per-tensor scale (NVFP4; 1 for MX).
float quantize_into(const BlockLayout& layout, std::span<const float> x, std::span<uint8_t> codes,
                    std::span<uint8_t> scales, const MxOptions& mx = {},
                    const Nvfp4Options& nvfp4 = {});
float quantize_into(const BlockLayout& layout, std::span<const BFloat16> x,
                    std::span<uint8_t> codes, std::span<uint8_t> scales, const MxOptions& mx = {},
                    const Nvfp4Options& nvfp4 = {});

// The float32 values the codes stand for: code * 2^(scale - 127) for MX (NaN where the scale
// is 0xFF), code * f32(tensor_scale * scale) for NVFP4.
std::vector<float> dequantize(const BlockQuantized& q);
void dequantize_into(const BlockLayout& layout, std::span<const uint8_t> codes,
                     std::span<const uint8_t> scales, float tensor_scale, std::span<float> out);

}  // namespace mantissa::formats
