#pragma once
// 8-bit blockwise dynamic quantization, byte-compatible with bitsandbytes on CPU
// (docs/quantization.md, "8-bit dynamic maps"): the two 256-entry dynamic maps of
// bitsandbytes' create_dynamic_map, and quantize_blockwise / dequantize_blockwise over blocks of
// consecutive elements with one fp32 absmax per block.
//
// Users: the 8-bit optimizers (Adam8bit state), 4-bit double quantization (absmax of absmax).
#include <cstdint>

namespace mantissa::kernels::quant {

inline constexpr int kDynamicMapSize = 256;

// create_dynamic_map(signed=True): sorted, -0.99296875 at index 0, 0 at index 127, +1 at 255.
// Used for signed data: Adam's first moment, double-quantized absmax.
const float* dynamic_map_signed();
// create_dynamic_map(signed=False): sorted, 0 at index 0, +1 at 255. Adam's second moment.
const float* dynamic_map_unsigned();

// Quantizes x[0..n) in blocks of `blocksize` consecutive elements (the last block may be
// partial): absmax[b] = max |x| over block b (ceil(n / blocksize) entries), and out[i] = the
// index of the map entry nearest x[i] / absmax[b], chosen exactly as bitsandbytes' CPU kernel
// does, so the bytes equal bitsandbytes' quantize_blockwise on CPU:
//   - the scaled value x * (1 / absmax) is clamped to [-1, 1] and put into one of 65,536
//     equal bins, bin = (int)((v + 1) * 0.5 * 65535 + 0.5);
//   - each bin holds the map index nearest its left value -1 + 2 * bin / 65535 (ties, i.e. a
//     bin value exactly on the midpoint of two map entries, go to the lower index).
//   So the chosen entry can be up to one bin (2/65535 of absmax) worse than the exact nearest:
//   next to a midpoint, and near zero, where the map is denser than the bins (an exact 0 in
//   a block with non-zero absmax gets index 131 of the signed map, 2.1e-5 * absmax).
// A block whose absmax is 0 gets index 0 everywhere (it dequantizes to +-0). `code` must be 256
// sorted values in [-1, 1] (any map, not just the two above). NaN inputs are not supported.
void quantize_blockwise(const float* x, int64_t n, int64_t blocksize, const float* code,
                        uint8_t* out, float* absmax);

// out[i] = code[q[i]] * absmax[i / blocksize], in fp32 (bitsandbytes' dequantize_blockwise).
void dequantize_blockwise(const uint8_t* q, int64_t n, int64_t blocksize, const float* code,
                          const float* absmax, float* out);

// The index of the entry of the sorted 256-entry `code` nearest v, exactly (no bins); an exact
// tie between two neighbours goes to the lower index, as bitsandbytes' reference backend
// (bucketize on the midpoints) does. v outside the map's range gets the end index.
uint8_t nearest_code_index(const float* code, float v);

}  // namespace mantissa::kernels::quant
