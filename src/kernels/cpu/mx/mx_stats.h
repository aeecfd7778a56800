#pragma once
// What an MX or NVFP4 cast (mx_cast.h) did to a tensor, for the FP8 statistics (docs/fp8.md
// "Watching the scales"): one pass over the source beside its codes and scales.
#include <cstdint>

#include "kernels/cpu/mx/mx_scalar.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/dtype.h"

namespace mantissa::kernels::mx {

struct MxCastStats {
  float amax = 0.0f;      // max |x|, NaN passed over
  int64_t saturated = 0;  // elements with |x| times their block's multiplier above the element max
  int64_t flushed = 0;    // nonzero, non-NaN elements whose code is ±0
  double peak = 0.0;      // the largest block amax * multiplier / element max (above 1: saturated)
  float scale = 1.0f;     // the multiplier of the first block holding amax (x * scale is cast)
};

// src: rows x cols float32 or bfloat16, quantized by mx_quantize into codes and scales with
// `element` and `rounding`.
MxCastStats mx_cast_stats(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                          Element element, E8m0Rounding rounding, const uint8_t* codes,
                          const uint8_t* scales);

// The same for nvfp4_quantize's codes and E4M3 scales under `tensor_scale`: each element's
// multiplier is (1 / tensor_scale) / value(its block scale), as the cast applied it (a 16x16
// tile's scale stands in each of its rows); the element max is 6; scale is 1 / tensor_scale.
// Rows go over threads when the tensor is long.
MxCastStats nvfp4_cast_stats(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                             float tensor_scale, const uint8_t* codes, const uint8_t* scales);

}  // namespace mantissa::kernels::mx
