// AVX-512 conversion kernels. Compiled for the baseline target; each function enables the
// instructions it needs, and convert.cpp calls them only when cpu_features() says so.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (their _mm512_undefined_*
// placeholders, GCC bug 105593); the warning is spurious, so it is off for this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include "core/bf16_rne_avx512.h"
#include "core/convert_simd.h"
#include "core/fp8_codes_avx512.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define MANTISSA_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace mantissa::convert_detail {
namespace {

MANTISSA_AVX512 inline __mmask16 tail_mask(int64_t rem) {
  return static_cast<__mmask16>((1u << rem) - 1u);
}

template <int kMant, int kBias, uint32_t kMaxCode, uint32_t kNoSatCode>
MANTISSA_AVX512 void f32_to_fp8(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  const uint32_t overflow_code = mode == Fp8Saturation::kSatFinite ? kMaxCode : kNoSatCode;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // As the AVX2 kernels (kPrefetchFloats in convert_avx2.cpp): the lane arithmetic is long
    // enough to keep too few loads in flight without it.
    _mm_prefetch(reinterpret_cast<const char*>(src + i + 512), _MM_HINT_T0);
    const __m512i x = _mm512_loadu_si512(src + i);
    const __m512i c = fp8_codes<kMant, kBias, kMaxCode>(x, overflow_code);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm512_cvtepi32_epi8(c));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i x = _mm512_maskz_loadu_epi32(m, src + i);
    const __m512i c = fp8_codes<kMant, kBias, kMaxCode>(x, overflow_code);
    _mm512_mask_cvtepi32_storeu_epi8(dst + i, m, c);
  }
}

}  // namespace

MANTISSA_AVX512 void f32_to_bf16_avx512(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i r = bf16_rne(_mm512_loadu_si512(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_cvtepi32_storeu_epi16(dst + i, m, bf16_rne(_mm512_maskz_loadu_epi32(m, src + i)));
  }
}

// VCVTNEPS2BF16 flushes float32 subnormal inputs to zero, where RNE may round them up to the
// smallest normal bf16, so vectors holding a subnormal take the integer path. NaN handling of
// the instruction (quiet bit set, sign and payload kept) already matches bfloat16.h.
MANTISSA_AVX512BF16 static inline __m256i bf16_native(__m512i x) {
  const __m256i y = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_castsi512_ps(x)));
  const __mmask16 no_exp = _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f800000));
  const __mmask16 subnormal = _mm512_mask_test_epi32_mask(no_exp, x, _mm512_set1_epi32(0x7fffff));
  if (__builtin_expect(subnormal != 0, 0)) {
    return _mm256_mask_mov_epi16(y, subnormal, _mm512_cvtepi32_epi16(bf16_rne(x)));
  }
  return y;
}

MANTISSA_AVX512BF16 void f32_to_bf16_avx512bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        bf16_native(_mm512_loadu_si512(src + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, bf16_native(_mm512_maskz_loadu_epi32(m, src + i)));
  }
}

MANTISSA_AVX512 void bf16_to_f32_avx512(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m256i b = _mm256_maskz_loadu_epi16(m, src + i);
    _mm512_mask_storeu_epi32(dst + i, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
}

MANTISSA_AVX512 void f32_to_f16_avx512(const float* src, uint16_t* dst, int64_t n) {
  constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), kRne);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), kRne));
  }
}

MANTISSA_AVX512 void f16_to_f32_avx512(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

void f32_to_fp8_e4m3_avx512(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  f32_to_fp8<3, 7, 0x7eu, 0x7fu>(src, dst, n, mode);
}

void f32_to_fp8_e5m2_avx512(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  f32_to_fp8<2, 15, 0x7bu, 0x7cu>(src, dst, n, mode);
}

}  // namespace mantissa::convert_detail
