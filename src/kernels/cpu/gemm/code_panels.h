#pragma once
// Decoding of FP8 and E2M1 codes into the fp32 panels of the products that run the fp32
// register tile (kernels/cpu/gemm/fp32_register_tile.h): the FP8 block-scaled product
// (kernels/cpu/fp8/fp8_block_gemm.cpp) and the block-format product (kernels/cpu/mx/mx_gemm.cpp).
// Each value is the one a 256-entry table gives (every code's value is exact in fp32, and so is
// its product by a power-of-two or E4M3 block scale), so the vector paths below give the table's
// bits; they replace a gather or a table read per element with a few shifts, a half-precision
// conversion (F16C) and a lane permutation. The panel transpose moves B's stored rows (blocks
// along K) into the tile's k-major panel 8 x 8 floats at a time in registers.
#include <cstdint>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::code_panels {

// The values of an FP8 format's two NaN codes (0x7F, 0xFF for E4M3) as the caller's table holds
// them, so the vector decode writes the same NaN bits.
struct E4m3Nans {
  float positive, negative;
};

// Whether this CPU runs the vector paths (AVX2 with F16C); below that the callers keep their
// table loops.
bool available(SimdLevel level);

// out[i] = value(codes[i]) * scale for E4M3 codes (NaN codes: the given NaN values times scale),
// n elements. scale must not be NaN (the caller decodes such a block with its table).
void decode_e4m3(const uint8_t* codes, int64_t n, float scale, E4m3Nans nans, float* out);
// A row of blocks of `block` codes each (the last may be short), block q times scales[q]:
// out[i] = value(codes[i]) * scales[i / block] for i < n, with the bits of decode_e4m3 (or
// decode_e5m2) of each block with its scale, without a call per block. No scale may be NaN.
void decode_e4m3_blocks(const uint8_t* codes, int64_t n, int64_t block, const float* scales,
                        E4m3Nans nans, float* out);
void decode_e5m2_blocks(const uint8_t* codes, int64_t n, int64_t block, const float* scales,
                        float* out);
// decode_e4m3 unscaled, element j stored at out[(j / width) * strip + j % width]: a row of codes
// into the panel strips of a register tile of `width` columns (a multiple of 16).
void decode_e4m3_strips(const uint8_t* codes, int64_t n, E4m3Nans nans, float* out, int64_t width,
                        int64_t strip);
// The same for E5M2 codes, whose value is the half-precision number with the code as its high
// byte (NaN codes keep their payload, as F16C converts them).
void decode_e5m2(const uint8_t* codes, int64_t n, float scale, float* out);
// The same for n (even) E2M1 codes packed two a byte, the even element in the low nibble.
void decode_e2m1(const uint8_t* packed, int64_t n, float scale, float* out);
// E2M1 blocks of 16 (n even, the last block may be short), block q times scales[q] (none NaN),
// element j stored at out[(j / width) * strip + j % width] (width a multiple of 16): a row of
// blocks into a panel row (width >= n) or into the strips of a register tile of `width`
// columns, without a call per block, with the bits of decode_e2m1 of each block with its scale.
void decode_e2m1_blocks(const uint8_t* packed, int64_t n, const float* scales, float* out,
                        int64_t width, int64_t strip);

// A stored row of codes whose blocks lie along the columns (each element its own scale, its
// column's): element j's value times scales[j] stored at out[(j / width) * strip + j % width]
// (width a multiple of 16), the strips of a register tile, with the bits of decode_e4m3 (or
// decode_e5m2, decode_e2m1) unscaled times the scale, value first. A NaN scale is multiplied too.
void decode_e4m3_scaled_strips(const uint8_t* codes, int64_t n, const float* scales, E4m3Nans nans,
                               float* out, int64_t width, int64_t strip);
void decode_e5m2_scaled_strips(const uint8_t* codes, int64_t n, const float* scales, float* out,
                               int64_t width, int64_t strip);
// n even.
void decode_e2m1_scaled_strips(const uint8_t* packed, int64_t n, const float* scales, float* out,
                               int64_t width, int64_t strip);

// dst[c * ldd + r] = value(codes[r * ld + c]) for r < rows, c < cols (E4M3, NaN codes the given
// NaNs), times row_scales[r] where given (else unscaled): stored rows decoded straight into a
// k-major panel, 8 x 8 codes at a time transposed in registers, with the bits of decode_e4m3
// (with the row's scale). A scale must not be NaN (as for decode_e4m3).
void decode_e4m3_transposed(const uint8_t* codes, int64_t ld, int64_t rows, int64_t cols,
                            E4m3Nans nans, float* dst, int64_t ldd,
                            const float* row_scales = nullptr);
// The same for E2M1 codes packed two a byte (row r's bytes at packed + r * ld, cols even), with
// the bits of decode_e2m1.
void decode_e2m1_transposed(const uint8_t* packed, int64_t ld, int64_t rows, int64_t cols,
                            float* dst, int64_t ldd, const float* row_scales = nullptr);

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols.
void transpose_into(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                    int64_t ldd);

}  // namespace mantissa::kernels::code_panels
