#pragma once
// 8-bit blockwise quantization with a 256-entry code book as bitsandbytes' CPU library does it
// (cquantize_blockwise_cpu_fp32), used here for the double quantization of 4-bit absmax so
// the bytes match files written by bitsandbytes on a CPU. It is not exact nearest rounding:
// [-1, 1] is cut into 65536 bins, each bin maps to the code whose midpoints enclose the bin's
// left edge, and a value goes to bin trunc(fma((v + 1) * 0.5, 65535, 0.5)) (the library is
// compiled with FMA contraction). docs/quantization.md, "Double quantization".
#include <array>
#include <cstdint>

namespace mantissa::kernels::quant {

// bitsandbytes' create_dynamic_map(signed=True) as torch computes it (float32 bits).
const std::array<float, 256>& signed_dynamic_map();

// The 65536-entry bin -> code table of a sorted 256-entry code book.
std::array<uint8_t, 65536> build_dynamic_lut(const float* code);

// Blocks of `blocksize` over n floats: absmax[b] = max |x|, out[i] = lut[bin(x * (1/absmax))];
// an all-zero block gives codes 0 and absmax 0.
void quantize_blockwise_lut(const std::array<uint8_t, 65536>& lut, const float* x, int64_t n,
                            int64_t blocksize, uint8_t* out, float* absmax);

// out[i] = code[q[i]] * absmax[i / blocksize] in float32.
void dequantize_blockwise(const float* code, const uint8_t* q, const float* absmax, int64_t n,
                          int64_t blocksize, float* out);

}  // namespace mantissa::kernels::quant
