#pragma once
// LLM.int8() (bitsandbytes' int8_vectorwise_quant and int8_mixed_scaled_mm): row-wise absmax
// int8 quantization with outlier columns kept in floating point, and the mixed product.
// docs/quantization.md, "Int8".
#include <vector>

#include "mantissa/core/quantized_tensor.h"

namespace mantissa::quant {

struct Int8Rows {
  Tensor codes;                       // int8 [rows, cols]
  Tensor absmax;                      // fp32 [rows] (bitsandbytes' SCA / SCB)
  std::vector<int64_t> outlier_cols;  // ascending; empty when threshold is 0
};

// Quantizes a 2-D floating tensor row by row. threshold > 0 splits off outlier columns
// (|a| >= threshold anywhere in the column).
Int8Rows quantize_int8_rows(const Tensor& a, float threshold = 0.0f);

// A Linear weight [out, in] as kInt8Rowwise: data = CB (int8), absmax = SCB (fp32 [out]).
QuantizedTensor quantize_int8_weight(const Tensor& weight);

// codes * absmax[row] / 127 in fp32, then rounded once to `dtype`.
Tensor dequantize_int8_rows(const Tensor& codes, const Tensor& absmax, DType dtype = kFloat32);

// y = x W^T + b with W given as (CB, SCB): x [..., in] is quantized row-wise with `threshold`,
// the int8 product is accumulated in int32 and scaled by SCA[i] * SCB[j] / 127^2; outlier
// columns of x multiply the dequantized weight columns in fp32 and are added before the one
// rounding to x's dtype. Records no graph.
Tensor int8_linear_nograd(const Tensor& x, const Tensor& cb, const Tensor& scb, const Tensor& bias,
                          float threshold);

}  // namespace mantissa::quant
