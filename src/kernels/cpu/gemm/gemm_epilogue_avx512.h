#pragma once
// The part of the native GEMM micro-kernels around the k loop: loading the accumulators
// (bias or earlier K blocks' partial sums) and storing them (fp32, or rounded once to bf16),
// with column masks for the right edge and a row count for the bottom edge. Always inlined,
// so the 28 accumulators stay in registers.
#include <immintrin.h>

#include "core/bf16_rne_avx512.h"
#include "kernels/cpu/gemm/gemm_native_impl.h"

#define MANTISSA_GEMM_EPILOGUE __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline))

namespace mantissa::kernels::gemm {

using Acc = __m512[kMR][2];

// Lane masks of the two zmm halves of an n-column row (0 < n <= 32).
MANTISSA_GEMM_EPILOGUE inline void column_masks(int n, __mmask16& lo, __mmask16& hi) {
  const uint32_t all = n >= 32 ? 0xffffffffu : (1u << n) - 1u;
  lo = static_cast<__mmask16>(all);
  hi = static_cast<__mmask16>(all >> 16);
}

MANTISSA_GEMM_EPILOGUE inline void load_acc(Acc& acc, const Tile& t) {
  __mmask16 lo, hi;
  column_masks(t.n, lo, hi);
  if (t.first) {
    const __m512 b0 = t.bias ? _mm512_maskz_loadu_ps(lo, t.bias) : _mm512_setzero_ps();
    const __m512 b1 = t.bias ? _mm512_maskz_loadu_ps(hi, t.bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 14
    for (int i = 0; i < kMR; ++i) {
      acc[i][0] = b0;
      acc[i][1] = b1;
    }
    return;
  }
#pragma GCC unroll 14
  for (int i = 0; i < kMR; ++i) {
    // Rows past m are padding: their sums are computed and dropped, never loaded.
    const bool row = i < t.m;
    acc[i][0] = _mm512_maskz_loadu_ps(row ? lo : 0, t.c + i * t.ldc);
    acc[i][1] = _mm512_maskz_loadu_ps(row ? hi : 0, t.c + i * t.ldc + 16);
  }
}

MANTISSA_GEMM_EPILOGUE inline void store_acc(const Acc& acc, const Tile& t) {
  __mmask16 lo, hi;
  column_masks(t.n, lo, hi);
  if (t.last && t.c_bf16 != nullptr) {
#pragma GCC unroll 14
    for (int i = 0; i < kMR; ++i) {
      if (i >= t.m) break;
      uint16_t* row = t.c_bf16 + i * t.ldc_bf16;
      _mm512_mask_cvtepi32_storeu_epi16(row, lo,
                                        mantissa::bf16_rne(_mm512_castps_si512(acc[i][0])));
      _mm512_mask_cvtepi32_storeu_epi16(row + 16, hi,
                                        mantissa::bf16_rne(_mm512_castps_si512(acc[i][1])));
    }
    return;
  }
#pragma GCC unroll 14
  for (int i = 0; i < kMR; ++i) {
    if (i >= t.m) break;
    _mm512_mask_storeu_ps(t.c + i * t.ldc, lo, acc[i][0]);
    _mm512_mask_storeu_ps(t.c + i * t.ldc + 16, hi, acc[i][1]);
  }
}

}  // namespace mantissa::kernels::gemm
