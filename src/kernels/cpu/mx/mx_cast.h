#pragma once
// Cast kernels of the block formats (docs/mx_formats.md): MXFP8 (E4M3/E5M2 elements) and MXFP4
// (E2M1) in 1x32 blocks with E8M0 scales, NVFP4 (E2M1) in 1x16 blocks with E4M3 scales under
// an fp32 per-tensor scale, or with 16x16 tiles sharing a scale. A matrix is `rows` x `cols`
// row-major (a vector is one row); a row's last block may be short (cols not a multiple of
// the block), and is quantized as if padded with zeros. Layout:
//   codes   rows x code_bytes(element, cols) bytes: one FP8 code per byte, or two E2M1 codes per
//           byte with the even column in the low nibble (a row of odd length ends in a byte
//           whose high nibble is 0);
//   scales  rows x ceil(cols / block) bytes: E8M0 (MX) or E4M3 (NVFP4; a 16x16 tile's scale is
//           written in each of its 16 rows, so the layout is NVFP4's 1x16 one).
// Every SIMD level gives the scalar reference's bits (tests/formats); long inputs are split over
// threads at block boundaries, which changes nothing.
#include <cstdint>

#include "kernels/cpu/mx/mx_scalar.h"
#include "kernels/cpu/mx/mx_stats.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::mx {

// Source: float32 or bfloat16. Runs on `level`, clamped to what the CPU has. With `stats`, the
// cast's statistics (mx_stats.h) go there, each segment counted as soon as it is encoded.
void mx_quantize(const void* src, DType src_dtype, int64_t rows, int64_t cols, Element element,
                 E8m0Rounding rounding, uint8_t* codes, uint8_t* scales,
                 SimdLevel level = simd_level(), MxCastStats* stats = nullptr);
// The blocks along src's columns (formats::BlockAxis::kAlongColumns, TransformerEngine's MXFP8
// column-wise data: transformer_engine/pytorch/tensor/mxfp8_tensor.py keeps columnwise_data in the
// tensor's own shape with columnwise_scale_inv of shape [rows / 32, cols]): codes in src's layout
// (rows x code_bytes(element, cols)), one scale per 32 x 1 block of a column, scales[rows / 32
// rounded up][cols]; a column's short last block (rows not a multiple of 32) as if padded with
// zeros. Every code and scale is that of mx_quantize of src^T at the transposed place, and the
// statistics are mx_quantize's of src^T (its blocks counted column by column). src is read as it
// lies, a band of 32 rows at a time: each column's amax a maximum down the band, no transpose.
void mx_quantize_columns(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                         Element element, E8m0Rounding rounding, uint8_t* codes, uint8_t* scales,
                         SimdLevel level = simd_level(), MxCastStats* stats = nullptr);
// out[i] = value(code) * 2^(scale - 127) in float32 (NaN where the scale is 0xFF).
void mx_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                   Element element, float* out, SimdLevel level = simd_level());

// How NVFP4 rounds its elements.
enum class Fp4Rounding : uint8_t {
  kNearest,     // round to nearest, ties to even
  kStochastic,  // unbiased stochastic rounding from Philox4x32-10 (kernels/cpu/mx/philox.h)
};

struct Nvfp4Encoding {
  float tensor_scale = 1.0f;  // the fp32 per-tensor scale (nvfp4_tensor_scale)
  bool tiles_16x16 = false;   // one scale per 16x16 tile (weights) instead of per 1x16 block
  Fp4Rounding rounding = Fp4Rounding::kNearest;
  uint64_t seed = 0;    // the stochastic rounding's stream: element (r, c) draws
  uint64_t offset = 0;  // philox.h's sr_byte(seed, offset, r, c)
  // With tiles_16x16: the tiles' amax from nvfp4_tile_amax, or null (the cast takes them).
  const float* tile_amax = nullptr;
  // Whether tile_amax is this source's own (nvfp4_tile_amax of the same src, rows and cols): the
  // statistics then take each block's amax record from its tile's (the largest of the tile's
  // blocks, all of which the cast counts) instead of taking the block's own. A cast without
  // tile_amax takes its own tiles' amax and counts them so.
  bool tile_amax_exact = false;
  // Without tiles_16x16: each 1x16 block's own amax from nvfp4_block_amax of the same src, rows
  // and cols, or null (the cast takes them). Given, the cast reads the source once, for its codes.
  const float* block_amax = nullptr;
};

// max |x| / (448 * 6) over n elements (NaN if any is NaN; 1 if all are zero).
float nvfp4_tensor_scale(const void* src, DType src_dtype, int64_t n,
                         SimdLevel level = simd_level());
// The same from the tensor's max |x| taken elsewhere (NaN where the tensor holds a NaN).
float nvfp4_tensor_scale_of(float amax);
// The amax of each 16x16 tile of a rows x cols source (NaN where the tile holds a NaN), into
// tile_amax[ceil(rows / 16)][ceil(cols / 16)] (kernels/cpu/mx/nvfp4_tiles.cpp); returns the
// tensor's (the largest, NaN where any is), so that one read gives the per-tensor scale too.
float nvfp4_tile_amax(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                      float* tile_amax, SimdLevel level = simd_level());
// The amax of each 1x16 block of a rows x cols float32 source (NaN where the block holds a NaN),
// into block_amax[rows][ceil(cols / 16)] (kernels/cpu/mx/nvfp4_block_amax.cpp); returns the
// tensor's (the largest, NaN where any is): one read gives the per-tensor scale and
// Nvfp4Encoding's block_amax.
float nvfp4_block_amax(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                       float* block_amax, SimdLevel level = simd_level());
void nvfp4_quantize(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                    const Nvfp4Encoding& encoding, uint8_t* codes, uint8_t* scales,
                    SimdLevel level = simd_level(), MxCastStats* stats = nullptr);
// out[i] = value(code) * f32(tensor_scale * value(block scale)).
void nvfp4_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols,
                      float tensor_scale, float* out, SimdLevel level = simd_level());

// The bodies of one SIMD level: a segment of n elements of one row, starting at a block
// boundary (its last block may be short only at the row's end), with its codes and scales.
namespace detail {

struct MxKernels {
  void (*encode)(const void* src, DType src_dtype, int64_t n, Element element,
                 E8m0Rounding rounding, uint8_t* codes, uint8_t* scales);
  // encode with the segment's mx_run_stats counted as it encodes; null: encode, then
  // mx_run_stats.
  MxStatsRun (*encode_stats)(const void* src, DType src_dtype, int64_t n, Element element,
                             E8m0Rounding rounding, uint8_t* codes, uint8_t* scales);
  void (*decode)(const uint8_t* codes, const uint8_t* scales, int64_t n, Element element,
                 float* out);
  // encode (without `stats`; the run is then empty) or encode_stats of a segment of a cast whose
  // codes outgrow the caches: the same bytes, the codes stored past the caches where the level
  // finds that faster for the source dtype. Null: encode or encode_stats.
  MxStatsRun (*encode_streamed)(const void* src, DType src_dtype, int64_t n, Element element,
                                E8m0Rounding rounding, uint8_t* codes, uint8_t* scales,
                                bool stats) = nullptr;
  // block_amax: null (each block's own amax) or one amax per block (the 16x16 tiles').
  void (*nvfp4_encode)(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                       const float* block_amax, uint8_t* codes, uint8_t* scales);
  // The same with stochastic rounding: the segment is row `row` from column `first_col`, a
  // multiple of 16 (philox.h, sr_byte).
  void (*nvfp4_encode_sr)(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                          const float* block_amax, uint64_t seed, uint64_t offset, int64_t row,
                          int64_t first_col, uint8_t* codes, uint8_t* scales);
  void (*nvfp4_decode)(const uint8_t* codes, const uint8_t* scales, int64_t n, float tensor_scale,
                       float* out);
  // max |x| over n elements, NaN if any is NaN.
  float (*amax)(const void* src, DType src_dtype, int64_t n);
  // nvfp4_encode (or, `stochastic`, nvfp4_encode_sr) that also returns nvfp4_run_stats's
  // counts of the segment, taken as it encodes; null where a level encodes, then counts. With
  // `tile_records`, block_amax are the source's own 16x16 tiles' (Nvfp4Encoding::tile_amax_exact)
  // or 1x16 blocks' (Nvfp4Encoding::block_amax): a block whose tile amax is a number may count
  // that as its amax record (best, and peak = amax times the tile's factor), which gives the
  // cast's records though not each segment's.
  MxStatsRun (*nvfp4_encode_stats)(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                                   const float* block_amax, bool tile_records, bool stochastic,
                                   uint64_t seed, uint64_t offset, int64_t row, int64_t first_col,
                                   uint8_t* codes, uint8_t* scales) = nullptr;
  // MXFP4 with stochastic rounding after the 3/4 pre-scale (mxfp4_sr.h) of n elements of row
  // `row` from column `first_col`, both multiples of 32 and first_col of 64 too; null: the scalar
  // loop of mxfp4_sr.cpp.
  void (*mxfp4_encode_sr)(const void* src, DType src_dtype, int64_t n, uint64_t seed,
                          uint64_t offset, int64_t row, int64_t first_col, uint8_t* codes,
                          uint8_t* scales) = nullptr;
  // mx_quantize_columns's cast of one band of src (cols elements a row): `rows` rows (a
  // multiple of 32 but at the tensor's end), their codes (rows x code_bytes(element, cols)) and
  // their scale rows (ceil(rows / 32) x cols); with `runs`, column c's blocks' statistics
  // appended to runs[c] in order.
  void (*encode_column_band)(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                             Element element, E8m0Rounding rounding, uint8_t* codes,
                             uint8_t* scales, MxStatsRun* runs) = nullptr;
};

// The NVFP4 cast of rows c0..c0 + 7 of RHT(src^T) (hadamard.h, rht_transpose_nvfp4), from
// src's columns c0..c0 + 7 (all inside src), over the transform blocks that start at m_begin,
// m_begin + 16, .. below m_end (all 16 of their rows inside src): each block encoded straight
// from the registers that transform it (lane k: block k), into the rows of codes and scales
// (code_row and scale_row bytes apart). The same bytes as nvfp4_quantize of the transform's
// rows; an AVX2 body (nvfp4_rht_columns_avx2.cpp) that the AVX-512 level runs too.
void nvfp4_rht_columns_avx2(const void* src, DType dtype, int64_t cols, int64_t c0, int64_t m_begin,
                            int64_t m_end, const Nvfp4Encoding& encoding, uint8_t* codes,
                            int64_t code_row, uint8_t* scales, int64_t scale_row);

// One block of column c of a band (n <= 32 rows from src, ld elements apart) by the scalar
// body: its codes into the band's rows (code_row bytes apart; an E2M1 code into its nibble, the
// byte's other nibble kept), its scale to *scale, and with `run` its statistics appended. The
// reference, and the SIMD bodies' way for the blocks their vectors leave.
void encode_column_block_scalar(const void* src, DType src_dtype, int64_t ld, int64_t n, int64_t c,
                                Element element, E8m0Rounding rounding, uint8_t* codes,
                                int64_t code_row, uint8_t* scale, MxStatsRun* run);

extern const MxKernels kScalarKernels;
extern const MxKernels kAvx2Kernels;
extern const MxKernels kAvx512Kernels;  // AVX-512 F/BW/VL
// The kernels `level` runs (the highest level at or below it that this CPU has).
const MxKernels& kernels_for(SimdLevel level);

}  // namespace detail
}  // namespace mantissa::kernels::mx
