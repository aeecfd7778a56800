#pragma once
// The nearest entry of a sorted 256-entry code map (bitsandbytes' dynamic maps), for the CPU's
// blockwise quantizer (kernels/cpu/quant/blockwise_dynamic.cpp) and the GPU's 8-bit optimizer
// (kernels/cuda/optim/adam8bit_kernels.cu) alike: one definition, so both pick the same code for
// every value. A plain header: nvcc compiles it as a device function too. The midpoint test is
// one sum and one product; no multiply-add can be formed, so both compilers round alike.
#include <cstdint>

#if defined(__CUDACC__)
#define MANTISSA_HOST_DEVICE __host__ __device__
#else
#define MANTISSA_HOST_DEVICE
#endif

namespace mantissa::kernels {

// Index of the entry nearest to v (the upper one when v is above their midpoint); 0 for NaN and
// anything at or below code[0], 255 at or above code[255].
MANTISSA_HOST_DEVICE inline uint8_t nearest_code_in_map(const float* code, float v) {
  constexpr int kSize = 256;
  if (!(v > code[0])) return 0;  // also NaN
  if (v >= code[kSize - 1]) return kSize - 1;
  // Invariant code[lo] < v <= code[hi]; then the answer is lo or hi, split at their midpoint.
  int lo = 0, hi = kSize - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (code[mid] < v)
      lo = mid;
    else
      hi = mid;
  }
  return static_cast<uint8_t>(v > 0.5f * (code[lo] + code[hi]) ? hi : lo);
}

}  // namespace mantissa::kernels
