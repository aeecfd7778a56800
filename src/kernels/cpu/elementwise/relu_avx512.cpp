// AVX-512 level of the relu kernels (relu_kernels.h): 16 floats or 32 bf16/f16 per step, tails
// masked. Compiled for the baseline target with per-function target attributes; chosen only
// when cpu_features() says so.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593): spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/elementwise/relu_kernels.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw")))

namespace mantissa::kernels::cpu {
namespace {

MANTISSA_AVX512 inline __mmask16 mask16(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}
MANTISSA_AVX512 inline __mmask32 mask32(int64_t n) {
  return n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1u);
}

// NaN lanes of bf16/f16 bits, and the bits with NaNs made quiet.
template <class B>
MANTISSA_AVX512 inline __mmask32 nan_lanes(__m512i b) {
  return _mm512_cmpgt_epu16_mask(_mm512_and_si512(b, _mm512_set1_epi16(0x7fff)),
                                 _mm512_set1_epi16(B::inf));
}
template <class B>
MANTISSA_AVX512 inline __m512i quiet(__m512i b) {
  return _mm512_or_si512(b, _mm512_set1_epi16(B::quiet));
}

MANTISSA_AVX512 void forward_f32(const float* x, float* y, int64_t n) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    // Not (x <= 0), unordered: keeps positives and NaN.
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_NLE_UQ), v));
  }
}

template <class B>
MANTISSA_AVX512 void forward_h16(const uint16_t* x, uint16_t* y, int64_t n) {
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 m = mask32(n - i);
    const __m512i b = _mm512_maskz_loadu_epi16(m, x + i);
    const __mmask32 nan = nan_lanes<B>(b);
    // As signed 16-bit integers, positive values (and positive NaNs) are > 0.
    __m512i out = _mm512_maskz_mov_epi16(_mm512_cmpgt_epi16_mask(b, zero), b);
    out = _mm512_mask_mov_epi16(out, nan, quiet<B>(b));
    _mm512_mask_storeu_epi16(y + i, m, out);
  }
}

MANTISSA_AVX512 void backward_f32(const float* g, const float* x, float* gx, int64_t n) {
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask16(n - i);
    const __mmask16 pos = _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, x + i), zero, _CMP_GT_OQ);
    _mm512_mask_storeu_ps(gx + i, m, _mm512_maskz_loadu_ps(pos & m, g + i));
  }
}

template <class B>
MANTISSA_AVX512 void backward_h16(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t n) {
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 m = mask32(n - i);
    const __m512i xb = _mm512_maskz_loadu_epi16(m, x + i);
    const __m512i gb = _mm512_maskz_loadu_epi16(m, g + i);
    const __mmask32 pos = _mm512_cmpgt_epi16_mask(xb, zero) & ~nan_lanes<B>(xb);
    const __m512i gq = _mm512_mask_mov_epi16(gb, nan_lanes<B>(gb), quiet<B>(gb));
    _mm512_mask_storeu_epi16(gx + i, m, _mm512_maskz_mov_epi16(pos, gq));
  }
}

}  // namespace

const ReluKernels kReluAvx512{forward_f32,  forward_h16<Bf16Bits>,  forward_h16<F16Bits>,
                              backward_f32, backward_h16<Bf16Bits>, backward_h16<F16Bits>};

}  // namespace mantissa::kernels::cpu
