#pragma once
// Decoding bitsandbytes' 4-bit weights on a GPU (four_bit_kernels.cu), with the CPU's arithmetic
// (kernels/cpu/quant/four_bit.h, blockwise_dynamic.h) so the values are bit for bit the CPU's:
// table[code] * absmax in fp32, one round-to-nearest-even into the output type; double-quantized
// absmax as code2[q] * absmax2[block] and then + offset, two separate fp32 roundings (no fused
// multiply-add). Plain declarations, for four_bit_cuda.cpp.
#include <cstdint>

#include "core/cuda/copy_kernels.h"

namespace mantissa::cuda::detail {

struct FourBitTable {  // the value of each 4-bit code (NF4 or FP4)
  float v[16];
};
struct DynamicMap {  // bitsandbytes' signed 8-bit dynamic map, for the nested absmax
  float v[256];
};

// out[k] = table[code k] * absmax[k / blocksize] for k < n, where code k is the high nibble of
// packed[k / 2] for even k and the low one for odd k. out_type: f32, bf16 or f16.
void launch_dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t n,
                            int64_t blocksize, const FourBitTable& table, void* out,
                            Scalar out_type);

// out[i] = map[codes[i]] * absmax2[i / blocksize2], then + offset, for i < n.
void launch_nested_absmax(const uint8_t* codes, int64_t n, int64_t blocksize2,
                          const DynamicMap& map, const float* absmax2, float offset, float* out);

}  // namespace mantissa::cuda::detail
