#pragma once
// bitsandbytes' 4-bit weights decoded on a GPU (four_bit_cuda.cpp), for quant/quantize.cpp's
// block_absmax and dequantize when the quantized tensor's codes are on a GPU. The code tables
// stay in host memory and travel with each launch. Only code under `#if MANTISSA_HAS_CUDA` calls
// these.
#include "kernels/cpu/quant/four_bit_tables.h"
#include "mantissa/core/quantized_tensor.h"

namespace mantissa::kernels::gpu {

// The fp32 absmax of each block from the double-quantized codes (q.absmax uint8 and
// q.nested.absmax on the GPU; q.nested.code on either side), the CPU's values bit for bit.
Tensor nested_absmax(const QuantizedTensor& q);

// q's values (codes on the GPU) in `dtype` (float32, bfloat16 or float16), shape q.shape, from
// the fp32 block absmax `absmax` (on the same GPU), the CPU's values bit for bit.
Tensor dequantize_4bit(const QuantizedTensor& q, FormatId format, const Tensor& absmax,
                       DType dtype);

}  // namespace mantissa::kernels::gpu
