// AVX2 (+F16C) conversion kernels: the path for CPUs without AVX-512. Tails shorter than one
// vector use the scalar conversions, which these kernels match bit for bit.
#include <immintrin.h>

#include "core/convert_avx2_lanes.h"
#include "core/convert_simd.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/half.h"

#define MANTISSA_AVX2 __attribute__((target("avx2")))
#define MANTISSA_AVX2_F16C __attribute__((target("avx2,f16c")))

namespace mantissa::convert_detail {
namespace {

// How far ahead of its loads (in floats: 2 KB) a conversion whose lane arithmetic is long asks
// for its source. Such a loop fills the out-of-order window with arithmetic, so the core has
// fewer loads in flight than memory needs to stream (measured on a Golden Cove core at the AVX2
// level: f32 -> bf16 over 16M elements 25-34 GB/s against F16C's 47).
constexpr int64_t kPrefetchFloats = 512;

// See fp8_codes in convert_avx512.cpp. AVX2 has no embedded rounding, so the subnormal step
// relies on MXCSR being round-to-nearest (the default, which nothing in mantissa changes).
template <int kMant, int kBias>
MANTISSA_AVX2 inline __m256i fp8_codes(__m256i x, __m256i overflow_code) {
  constexpr int kDrop = 23 - kMant;
  constexpr int kMinNormalBits = (128 - kBias) << 23;
  constexpr int kMagicBits = (127 + 24 - kBias - kMant) << 23;
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), _mm256_set1_epi32(0x80));
  const __m256i a = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));

  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, kDrop), _mm256_set1_epi32(1));
  const __m256i r =
      _mm256_add_epi32(a, _mm256_add_epi32(lsb, _mm256_set1_epi32((1 << (kDrop - 1)) - 1)));
  const __m256i normal =
      _mm256_sub_epi32(_mm256_srli_epi32(r, kDrop), _mm256_set1_epi32((127 - kBias) << kMant));
  const __m256 magic = _mm256_castsi256_ps(_mm256_set1_epi32(kMagicBits));
  const __m256 sum = _mm256_add_ps(_mm256_castsi256_ps(a), magic);
  const __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(sum), _mm256_set1_epi32(kMagicBits));

  const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(kMinNormalBits), a);
  // overflow_code is kMaxCode (saturating) or kMaxCode + 1 (inf or NaN), so the codes above
  // kMaxCode (overflows, inf, and NaN whose rounding add wrapped: still positive after the
  // logical shift) become it with one min.
  const __m256i code = _mm256_or_si256(
      _mm256_min_epi32(_mm256_blendv_epi8(normal, sub, is_sub), overflow_code), sign);
  const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7f), nan);
}

template <int kMant, int kBias, uint32_t kMaxCode, uint32_t kNoSatCode>
requires(kNoSatCode == kMaxCode + 1) MANTISSA_AVX2
    void f32_to_fp8(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode,
                    uint8_t (*scalar)(float, Fp8Saturation)) {
  const __m256i overflow_code =
      _mm256_set1_epi32(mode == Fp8Saturation::kSatFinite ? kMaxCode : kNoSatCode);
  int64_t i = 0;
  // 32 values per step: four vectors of codes packed into one 32-byte store (the packs of one
  // vector at a time cost as much as its codes: 1.3 cycles per value on Zen 3, in L3).
  for (; i + 32 <= n; i += 32) {
    _mm_prefetch(reinterpret_cast<const char*>(src + i + kPrefetchFloats), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(src + i + kPrefetchFloats + 16), _MM_HINT_T0);
    __m256i c[4];
    for (int u = 0; u < 4; ++u)
      c[u] = fp8_codes<kMant, kBias>(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8 * u)), overflow_code);
    // packus works within 128-bit lanes: bytes come out as c0[0..3] c1[0..3] c2[0..3] c3[0..3]
    // c0[4..7] ...; the dword permute puts them back in order.
    const __m256i bytes =
        _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(dst + i),
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i c = fp8_codes<kMant, kBias>(x, overflow_code);
    // Codes fit in a byte, so the saturating packs are exact; then join the two 128-bit lanes.
    const __m256i w = _mm256_packus_epi32(c, c);
    const __m256i b = _mm256_packus_epi16(w, w);
    const __m128i joined =
        _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + i), joined);
  }
  for (; i < n; ++i) dst[i] = scalar(src[i], mode);
}

}  // namespace

MANTISSA_AVX2 void f32_to_bf16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch(reinterpret_cast<const char*>(src + i + kPrefetchFloats), _MM_HINT_T0);
    store_bf16x16(dst + i, _mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8));
  }
  for (; i < n; ++i) dst[i] = float_to_bf16_bits(src[i]);
}

MANTISSA_AVX2 void bf16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m256i f = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), f);
  }
  for (; i < n; ++i) dst[i] = bf16_bits_to_float(src[i]);
}

MANTISSA_AVX2_F16C void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = float_to_half_bits(src[i]);
}

MANTISSA_AVX2_F16C void f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = half_bits_to_float(src[i]);
}

void f32_to_fp8_e4m3_avx2(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  f32_to_fp8<3, 7, 0x7eu, 0x7fu>(src, dst, n, mode, float_to_fp8_e4m3_bits);
}

void f32_to_fp8_e5m2_avx2(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  f32_to_fp8<2, 15, 0x7bu, 0x7cu>(src, dst, n, mode, float_to_fp8_e5m2_bits);
}

}  // namespace mantissa::convert_detail
