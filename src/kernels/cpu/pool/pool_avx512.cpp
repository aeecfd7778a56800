// AVX-512 level of the 2x2 pools (pool_kernels.h): 16 outputs per step, the two input rows
// loaded as 32 values each and split into even and odd columns by one permute. Compiled for the
// baseline target with per-function target attributes; chosen only when cpu_features() says so.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593): spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>

#include "core/bf16_rne_avx512.h"
#include "kernels/cpu/pool/pool_kernels.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace mantissa::kernels::cpu {
namespace {

MANTISSA_AVX512 inline __mmask32 mask32(int64_t n) {
  return n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1u);
}

// The first n (<= 32) values at p as fp32: lanes 0-15 in lo, 16-31 in hi (zeros past n).
MANTISSA_AVX512 inline void load32(const float* p, int64_t n, __m512& lo, __m512& hi) {
  const __mmask32 m = mask32(n);
  lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), p);
  hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), p + 16);
}
MANTISSA_AVX512 inline __m512 widen16(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}
MANTISSA_AVX512 inline void load32(const uint16_t* p, int64_t n, __m512& lo, __m512& hi) {
  const __m512i v = _mm512_maskz_loadu_epi16(mask32(n), p);
  lo = widen16(_mm512_castsi512_si256(v));
  hi = widen16(_mm512_extracti64x4_epi64(v, 1));
}
MANTISSA_AVX512 inline __m512 load16(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
MANTISSA_AVX512 inline __m512 load16(const uint16_t* p, __mmask16 m) {
  return widen16(_mm256_maskz_loadu_epi16(m, p));
}

// float -> bf16 bits with RNE, NaN made quiet (sign and top payload kept): BFloat16(float).
MANTISSA_AVX512 inline __m256i narrow16(__m512 v) {
  return _mm512_cvtepi32_epi16(bf16_rne(_mm512_castps_si512(v)));
}
MANTISSA_AVX512 inline void store16(float* p, __mmask16 m, __m512 v) {
  _mm512_mask_storeu_ps(p, m, v);
}
MANTISSA_AVX512 inline void store16(uint16_t* p, __mmask16 m, __m512 v) {
  _mm256_mask_storeu_epi16(p, m, narrow16(v));
}
MANTISSA_AVX512 inline void store32(float* p, int64_t n, __m512 lo, __m512 hi) {
  const __mmask32 m = mask32(n);
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>(m), lo);
  _mm512_mask_storeu_ps(p + 16, static_cast<__mmask16>(m >> 16), hi);
}
MANTISSA_AVX512 inline void store32(uint16_t* p, int64_t n, __m512 lo, __m512 hi) {
  const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(narrow16(lo)), narrow16(hi), 1);
  _mm512_mask_storeu_epi16(p, mask32(n), v);
}

// Replaces best by v where v > best, or v is NaN and best is not (the scalar rule).
MANTISSA_AVX512 inline __mmask16 wins(__m512 v, __m512 best) {
  return _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
         _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_ORD_Q), v, v, _CMP_UNORD_Q);
}

// The four taps of up to 16 adjacent 2x2 windows starting at output column ox, from input
// rows r0 (top) and r1 (bottom): top-left, top-right, bottom-left, bottom-right, the general
// path's tap order. (Four variables rather than an array, which GCC keeps on the stack.)
template <typename T>
MANTISSA_AVX512 inline void window_taps(const T* r0, const T* r1, int64_t ox, int64_t n, __m512& t0,
                                        __m512& t1, __m512& t2, __m512& t3) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __m512 lo, hi;
  load32(r0 + 2 * ox, 2 * n, lo, hi);
  t0 = _mm512_permutex2var_ps(lo, even, hi);
  t1 = _mm512_permutex2var_ps(lo, odd, hi);
  load32(r1 + 2 * ox, 2 * n, lo, hi);
  t2 = _mm512_permutex2var_ps(lo, even, hi);
  t3 = _mm512_permutex2var_ps(lo, odd, hi);
}

// The inverse of window_taps for gradients: writes t0, t1 interleaved to the 2n values of row
// r0 and t2, t3 to those of row r1, starting at input column 2 * ox.
template <typename T>
MANTISSA_AVX512 inline void store_window_taps(T* r0, T* r1, int64_t ox, int64_t n, __m512 t0,
                                              __m512 t1, __m512 t2, __m512 t3) {
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx = _mm512_add_epi32(lo_idx, _mm512_set1_epi32(8));
  store32(r0 + 2 * ox, 2 * n, _mm512_permutex2var_ps(t0, lo_idx, t1),
          _mm512_permutex2var_ps(t0, hi_idx, t1));
  store32(r1 + 2 * ox, 2 * n, _mm512_permutex2var_ps(t2, lo_idx, t3),
          _mm512_permutex2var_ps(t2, hi_idx, t3));
}

// Zeroes the gradient of the input no 2x2 window covers: the last column of an odd width and
// the last row of an odd height.
template <typename T>
MANTISSA_AVX512 inline void zero_uncovered(T* gx, int64_t h, int64_t w) {
  if (w % 2 != 0)
    for (int64_t y = 0; y < h / 2 * 2; ++y) gx[y * w + w - 1] = T{0};
  if (h % 2 != 0)
    for (int64_t i = 0; i < w; ++i) gx[(h - 1) * w + i] = T{0};
}

template <typename T>
MANTISSA_AVX512 void max_forward(const T* x, T* y, uint8_t* tap, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const T* r0 = x + 2 * oy * w;
    const T* r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ox += 16) {
      const int64_t n = std::min<int64_t>(16, ow - ox);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
      __m512 v0, v1, v2, v3;
      window_taps(r0, r1, ox, n, v0, v1, v2, v3);
      __m512 best = v0;
      __m128i t = _mm_setzero_si128();
      __mmask16 k = wins(v1, best);
      best = _mm512_mask_mov_ps(best, k, v1);
      t = _mm_mask_mov_epi8(t, k, _mm_set1_epi8(1));
      k = wins(v2, best);
      best = _mm512_mask_mov_ps(best, k, v2);
      t = _mm_mask_mov_epi8(t, k, _mm_set1_epi8(2));
      k = wins(v3, best);
      best = _mm512_mask_mov_ps(best, k, v3);
      t = _mm_mask_mov_epi8(t, k, _mm_set1_epi8(3));
      store16(y + oy * ow + ox, m, best);
      _mm_mask_storeu_epi8(tap + oy * ow + ox, m, t);
    }
  }
}

template <typename T>
MANTISSA_AVX512 void max_backward(const T* gy, const uint8_t* tap, T* gx, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oy = 0; oy < oh; ++oy) {
    T* r0 = gx + 2 * oy * w;
    T* r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ox += 16) {
      const int64_t n = std::min<int64_t>(16, ow - ox);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
      // 0 + g, as the general path's scatter into zeros (turns -0 into +0).
      const __m512 g = _mm512_add_ps(zero, load16(gy + oy * ow + ox, m));
      const __m128i t = _mm_maskz_loadu_epi8(m, tap + oy * ow + ox);
      const __m512 e0 = _mm512_maskz_mov_ps(_mm_cmpeq_epi8_mask(t, _mm_set1_epi8(0)), g);
      const __m512 e1 = _mm512_maskz_mov_ps(_mm_cmpeq_epi8_mask(t, _mm_set1_epi8(1)), g);
      const __m512 e2 = _mm512_maskz_mov_ps(_mm_cmpeq_epi8_mask(t, _mm_set1_epi8(2)), g);
      const __m512 e3 = _mm512_maskz_mov_ps(_mm_cmpeq_epi8_mask(t, _mm_set1_epi8(3)), g);
      store_window_taps(r0, r1, ox, n, e0, e1, e2, e3);
    }
  }
  zero_uncovered(gx, h, w);
}

template <typename T>
MANTISSA_AVX512 void avg_forward(const T* x, T* y, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const T* r0 = x + 2 * oy * w;
    const T* r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ox += 16) {
      const int64_t n = std::min<int64_t>(16, ow - ox);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
      __m512 v0, v1, v2, v3;
      window_taps(r0, r1, ox, n, v0, v1, v2, v3);
      // The general path's order: ((0 + a) + b) + c) + d.
      const __m512 sum = _mm512_add_ps(
          _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_setzero_ps(), v0), v1), v2), v3);
      store16(y + oy * ow + ox, m, _mm512_div_ps(sum, _mm512_set1_ps(4.0f)));
    }
  }
}

template <typename T>
MANTISSA_AVX512 void avg_backward(const T* gy, T* gx, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oy = 0; oy < oh; ++oy) {
    T* r0 = gx + 2 * oy * w;
    T* r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ox += 16) {
      const int64_t n = std::min<int64_t>(16, ow - ox);
      const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
      // 0 + g / 4, as the general path's scatter into zeros; each tap gets the same share.
      const __m512 e =
          _mm512_add_ps(zero, _mm512_div_ps(load16(gy + oy * ow + ox, m), _mm512_set1_ps(4.0f)));
      store_window_taps(r0, r1, ox, n, e, e, e, e);
    }
  }
  zero_uncovered(gx, h, w);
}

}  // namespace

const Pool2x2Kernels kPool2x2Avx512{
    max_forward<float>, max_forward<uint16_t>, max_backward<float>, max_backward<uint16_t>,
    avg_forward<float>, avg_forward<uint16_t>, avg_backward<float>, avg_backward<uint16_t>,
    // f16: the AVX2+F16C pair (every AVX-512 CPU has both).
    pool2x2_max_forward_f16_avx2, pool2x2_max_backward_f16_avx2};

}  // namespace mantissa::kernels::cpu
