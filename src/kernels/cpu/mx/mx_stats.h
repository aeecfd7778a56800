#pragma once
// What an MX or NVFP4 cast (mx_cast.h) did to a tensor, for the FP8 statistics (docs/fp8.md
// "Watching the scales"). The casts count each segment they encode right after encoding it,
// while its source and codes are still in cache, so the tensor is read from memory once.
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

// The statistics of consecutive blocks of one cast (a segment of a row, or segments appended
// in the cast's row-major block order). Appending runs in that order gives the statistics of
// one pass over all their blocks, whatever the runs' lengths, so threads may count segments.
struct MxStatsRun {
  float best = -1.0f;         // the largest block amax so far (-1: no block)
  float scaled_best = -1.0f;  // the amax of the last block that raised `best` and has a scale
  float scale = 1.0f;         // that block's multiplier
  int64_t saturated = 0;
  int64_t flushed = 0;
  double peak = 0.0;

  void append(const MxStatsRun& next);
  MxCastStats finish() const;
};

// src: n elements of one row from a block boundary (float32 or bfloat16), just encoded by
// mx_quantize with `element` and `rounding` into codes and scales (the segment's own).
// MxCastStats::scale is the multiplier of the first block holding amax (where that block's
// scale is NaN, that of the last block before it that raised the maximum).
MxStatsRun mx_run_stats(const void* src, DType src_dtype, int64_t n, Element element,
                        E8m0Rounding rounding, const uint8_t* codes, const uint8_t* scales);

// The same for nvfp4_quantize's codes and E4M3 scales under `tensor_scale`: each element's
// multiplier is (1 / tensor_scale) / value(its block scale), as the cast applied it (a 16x16
// tile's scale stands in each of its rows); the element max is 6. The cast sets the scale to
// 1 / tensor_scale.
MxStatsRun nvfp4_run_stats(const void* src, DType src_dtype, int64_t n, float tensor_scale,
                           const uint8_t* codes, const uint8_t* scales);

}  // namespace mantissa::kernels::mx
