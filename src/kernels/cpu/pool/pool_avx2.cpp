// AVX2 level of the 2x2 max pools (pool_kernels.h) for f32, bf16 and f16 (F16C): 8 outputs per
// step, the two input rows loaded as 16 values each, split into even and odd columns by one
// shuffle and one permute, the winner chosen by compare-and-blend instead of the scalar loop's
// unpredictable branches. Short rows (the CNN's 14- and 7-wide outputs) run the same code on a
// zero-padded copy of the tail. The average pools stay scalar at this level (no reference model
// uses them). Compiled with per-function target attributes; chosen only when simd_level()
// reaches avx2 (which implies F16C).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/pool/pool_kernels.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace mantissa::kernels::cpu {
namespace {

// Element formats: the stored type and its widening/narrowing to fp32 lanes.
struct F32 {
  using T = float;
};
struct Bf16 {
  using T = uint16_t;
};
struct F16 {
  using T = uint16_t;
};

// Eight values from p as fp32 (only the first n <= 8 read; zeros past them).
MANTISSA_AVX2 inline __m256 load8(F32, const float* p, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  float buf[8] = {};
  std::memcpy(buf, p, sizeof(float) * std::max<int64_t>(n, 0));
  return _mm256_loadu_ps(buf);
}
MANTISSA_AVX2 inline __m128i load8_bits(const uint16_t* p, int64_t n) {
  if (n >= 8) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  uint16_t buf[8] = {};
  std::memcpy(buf, p, sizeof(uint16_t) * std::max<int64_t>(n, 0));
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
}
MANTISSA_AVX2 inline __m256 load8(Bf16, const uint16_t* p, int64_t n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load8_bits(p, n)), 16));
}
MANTISSA_AVX2 inline __m256 load8(F16, const uint16_t* p, int64_t n) {
  return _mm256_cvtph_ps(load8_bits(p, n));
}

// The first n <= 8 lanes of v stored at p in the format: exact for the values these kernels
// store (one of the inputs, or 0 + one gradient); NaN comes out quiet, as BFloat16(float) and
// Half(float) make it.
MANTISSA_AVX2 inline void store8(F32, float* p, int64_t n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  float buf[8];
  _mm256_storeu_ps(buf, v);
  std::memcpy(p, buf, sizeof(float) * std::max<int64_t>(n, 0));
}
MANTISSA_AVX2 inline void store8_bits(uint16_t* p, int64_t n, __m128i v) {
  if (n >= 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
    return;
  }
  uint16_t buf[8];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(buf), v);
  std::memcpy(p, buf, sizeof(uint16_t) * std::max<int64_t>(n, 0));
}
MANTISSA_AVX2 inline void store8(Bf16, uint16_t* p, int64_t n, __m256 v) {
  // Exact bf16 values: the top half of the bits; NaN gets its quiet bit.
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  __m256i bits = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
  bits = _mm256_or_si256(bits, _mm256_and_si256(nan, _mm256_set1_epi32(0x40)));
  const __m128i packed =
      _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
  store8_bits(p, n, packed);
}
MANTISSA_AVX2 inline void store8(F16, uint16_t* p, int64_t n, __m256 v) {
  store8_bits(p, n, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// The even and odd columns of 2n consecutive values at p (n <= 8 windows).
template <typename Fmt, typename T>
MANTISSA_AVX2 inline void split_pairs(Fmt fmt, const T* p, int64_t n, __m256& even, __m256& odd) {
  const __m256 lo = load8(fmt, p, 2 * n), hi = load8(fmt, p + 8, 2 * n - 8);
  // shuffle: [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6]; permute puts the 64-bit pairs in order.
  even = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))),
                            _MM_SHUFFLE(3, 1, 2, 0)));
  odd = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))),
                            _MM_SHUFFLE(3, 1, 2, 0)));
}

// The inverse: 2n values at p, alternating even[i], odd[i].
template <typename Fmt, typename T>
MANTISSA_AVX2 inline void store_pairs(Fmt fmt, T* p, int64_t n, __m256 even, __m256 odd) {
  const __m256 a = _mm256_unpacklo_ps(even, odd);  // pairs 0, 1 | 4, 5
  const __m256 b = _mm256_unpackhi_ps(even, odd);  // pairs 2, 3 | 6, 7
  store8(fmt, p, 2 * n, _mm256_permute2f128_ps(a, b, 0x20));
  store8(fmt, p + 8, 2 * n - 8, _mm256_permute2f128_ps(a, b, 0x31));
}

// Lanes where v replaces best: v > best, or v is NaN and best is not (the scalar rule).
MANTISSA_AVX2 inline __m256 wins(__m256 v, __m256 best) {
  const __m256 nan_over_number =
      _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(best, best, _CMP_ORD_Q));
  return _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), nan_over_number);
}

template <typename Fmt, typename T = typename Fmt::T>
MANTISSA_AVX2 void max_forward(const T* x, T* y, uint8_t* tap, int64_t h, int64_t w) {
  const Fmt fmt{};
  const int64_t oh = h / 2, ow = w / 2;
  // A chunk that ends past its row still reads and writes whole vectors while they stay inside
  // this plane: the extra inputs are the next rows' (read, never used), the extra outputs land
  // on the next output row's first windows, which are computed and stored after this one.
  // Partial vectors go through a stack buffer (a store-forwarding stall each), so on the CNN's
  // 28- and 14-wide maps this halves the work per chunk.
  const int64_t plane_in = h * w, plane_out = oh * ow;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const T* r0 = x + 2 * oy * w;
    const T* r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ox += 8) {
      const int64_t n = std::min<int64_t>(8, ow - ox);
      const int64_t in0 = 2 * oy * w + 2 * ox, out = oy * ow + ox;
      const int64_t n0 = in0 + 16 <= plane_in ? 8 : n, n1 = in0 + w + 16 <= plane_in ? 8 : n;
      const int64_t n_out = out + 8 <= plane_out ? 8 : n;
      __m256 t[4];
      split_pairs(fmt, r0 + 2 * ox, n0, t[0], t[1]);
      split_pairs(fmt, r1 + 2 * ox, n1, t[2], t[3]);
      __m256 best = t[0], which = _mm256_setzero_ps();
      for (int k = 1; k < 4; ++k) {
        const __m256 m = wins(t[k], best);
        best = _mm256_blendv_ps(best, t[k], m);
        which = _mm256_blendv_ps(which, _mm256_set1_ps(static_cast<float>(k)), m);
      }
      store8(fmt, y + out, n_out, best);
      const __m256i ti = _mm256_cvttps_epi32(which);
      const __m128i t16 =
          _mm_packus_epi32(_mm256_castsi256_si128(ti), _mm256_extracti128_si256(ti, 1));
      const __m128i t8 = _mm_packus_epi16(t16, t16);
      if (n_out == 8) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(tap + out), t8);
      } else {
        uint8_t bytes[16];
        _mm_storeu_si128(reinterpret_cast<__m128i*>(bytes), t8);
        std::memcpy(tap + out, bytes, static_cast<size_t>(n));
      }
    }
  }
}

// Zeros the inputs no window reaches: the last column when w is odd, the last row when h is.
template <typename T>
void zero_uncovered(T* gx, int64_t h, int64_t w) {
  if (w % 2 != 0)
    for (int64_t r = 0; r < h - h % 2; ++r) gx[r * w + w - 1] = T{};
  if (h % 2 != 0) std::fill(gx + (h - 1) * w, gx + h * w, T{});
}

template <typename Fmt, typename T = typename Fmt::T>
MANTISSA_AVX2 void max_backward(const T* gy, const uint8_t* tap, T* gx, int64_t h, int64_t w) {
  const Fmt fmt{};
  const int64_t oh = h / 2, ow = w / 2;
  for (int64_t oy = 0; oy < oh; ++oy) {
    T* r0 = gx + 2 * oy * w;
    T* r1 = r0 + w;
    for (int64_t ox = 0; ox < ow; ox += 8) {
      const int64_t n = std::min<int64_t>(8, ow - ox);
      // 0 + g, as the general path's scatter into zeros (-0 becomes +0).
      const __m256 g = _mm256_add_ps(_mm256_setzero_ps(), load8(fmt, gy + oy * ow + ox, n));
      uint8_t bytes[8] = {};
      std::memcpy(bytes, tap + oy * ow + ox, static_cast<size_t>(n));
      int64_t packed;
      std::memcpy(&packed, bytes, sizeof packed);
      const __m256i t = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(packed));
      __m256 v[4];
      for (int k = 0; k < 4; ++k) {
        const __m256i hit = _mm256_cmpeq_epi32(t, _mm256_set1_epi32(k));
        v[k] = _mm256_and_ps(_mm256_castsi256_ps(hit), g);
      }
      store_pairs(fmt, r0 + 2 * ox, n, v[0], v[1]);
      store_pairs(fmt, r1 + 2 * ox, n, v[2], v[3]);
    }
  }
  zero_uncovered(gx, h, w);
}

}  // namespace

void pool2x2_max_forward_f32_avx2(const float* x, float* y, uint8_t* tap, int64_t h, int64_t w) {
  max_forward<F32>(x, y, tap, h, w);
}
void pool2x2_max_forward_bf16_avx2(const uint16_t* x, uint16_t* y, uint8_t* tap, int64_t h,
                                   int64_t w) {
  max_forward<Bf16>(x, y, tap, h, w);
}
void pool2x2_max_forward_f16_avx2(const uint16_t* x, uint16_t* y, uint8_t* tap, int64_t h,
                                  int64_t w) {
  max_forward<F16>(x, y, tap, h, w);
}
void pool2x2_max_backward_f32_avx2(const float* gy, const uint8_t* tap, float* gx, int64_t h,
                                   int64_t w) {
  max_backward<F32>(gy, tap, gx, h, w);
}
void pool2x2_max_backward_bf16_avx2(const uint16_t* gy, const uint8_t* tap, uint16_t* gx, int64_t h,
                                    int64_t w) {
  max_backward<Bf16>(gy, tap, gx, h, w);
}
void pool2x2_max_backward_f16_avx2(const uint16_t* gy, const uint8_t* tap, uint16_t* gx, int64_t h,
                                   int64_t w) {
  max_backward<F16>(gy, tap, gx, h, w);
}

}  // namespace mantissa::kernels::cpu
