#pragma once
// NF4 / FP4 block quantization, byte-compatible with bitsandbytes' CPU quantize_4bit and
// dequantize_4bit (docs/quantization.md). Elements are taken in flat row-major order in blocks
// of `blocksize`; two codes per byte, the even element in the high nibble.
//
// Quantize, per block: absmax = max |x| (NaN if any element is NaN); a full block is scaled by
// the float32 reciprocal 1 / max(absmax, 1e-38f), the last partial block is divided by
// am = max(absmax, 1e-38f) and stores am as its absmax (bitsandbytes' two code paths); the
// scaled value goes to the code of four_bit_code(). `format` is kNf4 or kFp4, whose code book
// (four_bit_tables.h) the kernels read. An odd count pads the last low nibble with
// the code of 0.0. Dequantize: value = table[code] * absmax[block] in float32.
//
// Every SIMD level gives the same bytes and the same float bits as the scalar level.
#include <cstdint>

#include "kernels/cpu/quant/four_bit_tables.h"
#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels::quant {

// Quantizes elements [first, first + count) of a tensor with `total` elements. `first` must be
// a multiple of blocksize and count a multiple of blocksize unless the range ends at `total`,
// so callers can quantize a large tensor piece by piece. Writes bytes packed[first/2 ...] and
// absmax[first/blocksize ...].
void quantize_4bit(const float* x, int64_t first, int64_t count, int64_t total, int64_t blocksize,
                   FormatId format, uint8_t* packed, float* absmax, SimdLevel level = simd_level());

// Dequantizes elements [first, first + count) to float32 (`out` receives count values).
void dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t first, int64_t count,
                     int64_t blocksize, FormatId format, float* out,
                     SimdLevel level = simd_level());

// Dequantizes elements [first, first + count) to bf16 (`bf16`) or fp16 bits: the float32 value
// above rounded to nearest even, the same bits as dequantize_4bit followed by a conversion.
void dequantize_4bit_16(const uint8_t* packed, const float* absmax, int64_t first, int64_t count,
                        int64_t blocksize, FormatId format, bool bf16, uint16_t* out,
                        SimdLevel level = simd_level());

// The AVX2 level, defined in four_bit_avx2.cpp (same contracts).
void quantize_4bit_avx2(const float* x, int64_t first, int64_t count, int64_t total,
                        int64_t blocksize, FormatId format, uint8_t* packed, float* absmax);
void dequantize_4bit_avx2(const uint8_t* packed, const float* absmax, int64_t first, int64_t count,
                          int64_t blocksize, FormatId format, float* out);

// The AVX-512 level of dequantize_4bit_16, defined in four_bit_avx512.cpp; native_bf16 (only
// where the CPU has AVX-512 BF16) rounds the bf16 tables with VCVTNEPS2BF16, to the same bits.
void dequantize_4bit_16_avx512(const uint8_t* packed, const float* absmax, int64_t first,
                               int64_t count, int64_t blocksize, FormatId format, bool bf16,
                               bool native_bf16, uint16_t* out);

// Scalar pieces shared with the SIMD levels (heads, tails, partial blocks).
float block_absmax_scalar(const float* x, int64_t n);
void quantize_block_scalar(const float* x, int64_t n, bool divide, float scale, FormatId format,
                           uint8_t* codes);
void dequantize_4bit_scalar(const uint8_t* packed, const float* absmax, int64_t first,
                            int64_t count, int64_t blocksize, FormatId format, float* out);

}  // namespace mantissa::kernels::quant
