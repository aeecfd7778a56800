// The statistics of an MX or NVFP4 cast (mx_stats.h), block by block in the scalar arithmetic
// of mx_scalar.h: each block's multiplier is the one the cast applied.
#include "kernels/cpu/mx/mx_stats.h"

#include <algorithm>
#include <cmath>

namespace mantissa::kernels::mx {

MxCastStats mx_cast_stats(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                          Element element, E8m0Rounding rounding, const uint8_t* codes,
                          const uint8_t* scales) {
  MxCastStats st;
  const ElementLimits lim = element_limits(element);
  const int64_t nb = (cols + kMxBlock - 1) / kMxBlock;
  const int64_t code_row = code_bytes(element, cols);
  const bool fp4 = element == Element::kE2m1;
  float best = -1.0f;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * kMxBlock, len = std::min(kMxBlock, cols - c0);
      const uint8_t s = scales[r * nb + b];
      float amax = 0.0f;
      for (int64_t c = c0; c < c0 + len; ++c) {
        const float a = std::fabs(scalar::load(src, src_dtype, r * cols + c));
        amax = a > amax ? a : amax;  // NaN passed over
      }
      if (s == kE8m0Nan) continue;
      const float mult = rounding == E8m0Rounding::kFloor
                             ? 1.0f / scalar::floor_divisor(s)
                             : scalar::rceil_multiplier(s, amax, lim.max);
      if (amax > best) {
        best = amax;
        st.scale = mult;
      }
      st.peak = std::max(st.peak, static_cast<double>(amax) * mult / lim.max);
      for (int64_t c = c0; c < c0 + len; ++c) {
        const float x = scalar::load(src, src_dtype, r * cols + c);
        if (x != x || x == 0.0f) continue;
        if (std::fabs(x) * mult > lim.max) ++st.saturated;
        const uint8_t code =
            fp4 ? static_cast<uint8_t>((codes[r * code_row + (c >> 1)] >> ((c & 1) * 4)) & 7u)
                : static_cast<uint8_t>(codes[r * code_row + c] & 0x7Fu);
        if (code == 0) ++st.flushed;
      }
    }
  }
  st.amax = std::max(best, 0.0f);
  return st;
}

MxCastStats nvfp4_cast_stats(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                             float tensor_scale, const uint8_t* codes, const uint8_t* scales) {
  const int64_t nb = (cols + kNvfp4Block - 1) / kNvfp4Block, code_row = (cols + 1) / 2;
  float amax = 0.0f;
  double peak = 0.0;
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(max : amax, peak) \
    reduction(+ : saturated, flushed) if (rows * cols >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const float mult = (1.0f / tensor_scale) / scalar::e4m3_value(scales[r * nb + b]);
      const int64_t end = std::min(cols, (b + 1) * kNvfp4Block);
      for (int64_t c = b * kNvfp4Block; c < end; ++c) {
        const float x = scalar::load(src, src_dtype, r * cols + c);
        const float a = std::fabs(x);
        if (a != a || x == 0.0f) continue;  // NaN: no count, no amax
        amax = std::max(amax, a);
        const float y = a * mult;
        if (y == y) peak = std::max(peak, static_cast<double>(y) / kE2m1Max);
        if (y > kE2m1Max) ++saturated;
        if (((codes[r * code_row + (c >> 1)] >> ((c & 1) * 4)) & 7u) == 0) ++flushed;
      }
    }
  }
  MxCastStats st;
  st.amax = amax;
  st.peak = peak;
  st.saturated = saturated;
  st.flushed = flushed;
  st.scale = 1.0f / tensor_scale;
  return st;
}

}  // namespace mantissa::kernels::mx
