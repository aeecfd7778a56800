// The vector decoders and the panel transpose of code_panels.h (AVX2 with F16C; the callers
// keep their table loops below that level).
#include "kernels/cpu/gemm/code_panels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::code_panels {
namespace {

constexpr float kE2m1Magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// The values of 8 E4M3 codes given as 16-bit lanes: the half with the magnitude bits shifted
// in (exponent bias 15 against E4M3's 7, hence the exact factor 2^8), NaN codes replaced.
inline __m256 e4m3_eight(__m128i code16, __m256 nan_pos, __m256 nan_neg, __m256 scale) {
  const __m128i mag = _mm_and_si128(code16, _mm_set1_epi16(0x7F));
  const __m128i sign = _mm_and_si128(code16, _mm_set1_epi16(0x80));
  const __m128i half = _mm_or_si128(_mm_slli_epi16(mag, 7), _mm_slli_epi16(sign, 8));
  const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(half), _mm256_set1_ps(256.0f));
  const __m256 is_nan =
      _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7F))));
  const __m256 neg =
      _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(sign, _mm_set1_epi16(0x80))));
  const __m256 nan = _mm256_blendv_ps(nan_pos, nan_neg, neg);
  return _mm256_mul_ps(_mm256_blendv_ps(v, nan, is_nan), scale);
}

void e4m3_sixteen(const uint8_t* codes, __m256 nan_pos, __m256 nan_neg, __m256 scale, float* out) {
  const __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  _mm256_storeu_ps(out, e4m3_eight(_mm256_castsi256_si128(c), nan_pos, nan_neg, scale));
  _mm256_storeu_ps(out + 8, e4m3_eight(_mm256_extracti128_si256(c, 1), nan_pos, nan_neg, scale));
}

void e5m2_sixteen(const uint8_t* codes, __m256 scale, float* out) {
  const __m256i half = _mm256_slli_epi16(
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes))), 8);
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(half)), scale));
  _mm256_storeu_ps(out + 8,
                   _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(half, 1)), scale));
}

// 16 E2M1 codes from 8 bytes: magnitudes by a lane permutation, the sign ORed in (code 8 is -0).
void e2m1_sixteen(const uint8_t* packed, __m256 scale, float* out) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed));
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0F));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
  const __m128i codes = _mm_unpacklo_epi8(lo, hi);  // element order
  const __m256 table = _mm256_loadu_ps(kE2m1Magnitudes);
  for (int h = 0; h < 2; ++h) {
    const __m256i c = _mm256_cvtepu8_epi32(h == 0 ? codes : _mm_srli_si128(codes, 8));
    const __m256 mag = _mm256_permutevar8x32_ps(table, _mm256_and_si256(c, _mm256_set1_epi32(7)));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
    const __m256 v = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(mag), sign));
    _mm256_storeu_ps(out + 8 * h, _mm256_mul_ps(v, scale));
  }
}

void transpose8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

enum class Kind { kE4m3, kE5m2, kE2m1 };

// Decodes n codes of `kind` times scale, 16 at a time; the tail goes through a zero-padded copy.
template <Kind K>
void decode(const uint8_t* codes, int64_t n, float scale, E4m3Nans nans, float* out) {
  const __m256 np = _mm256_set1_ps(nans.positive), nn = _mm256_set1_ps(nans.negative);
  const __m256 s = _mm256_set1_ps(scale);
  constexpr int64_t kBytes = K == Kind::kE2m1 ? 8 : 16;  // code bytes per 16 elements
  const auto sixteen = [&](const uint8_t* c, float* o) {
    if constexpr (K == Kind::kE4m3) e4m3_sixteen(c, np, nn, s, o);
    if constexpr (K == Kind::kE5m2) e5m2_sixteen(c, s, o);
    if constexpr (K == Kind::kE2m1) e2m1_sixteen(c, s, o);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) sixteen(codes + i / 16 * kBytes, out + i);
  if (i == n) return;
  uint8_t pad[16] = {};
  const int64_t rest = n - i;
  std::memcpy(pad, codes + i / 16 * kBytes, static_cast<size_t>((rest * kBytes + 15) / 16));
  float tail[16];
  sixteen(pad, tail);
  std::copy(tail, tail + rest, out + i);
}

}  // namespace

void decode_e4m3(const uint8_t* codes, int64_t n, float scale, E4m3Nans nans, float* out) {
  decode<Kind::kE4m3>(codes, n, scale, nans, out);
}

void decode_e5m2(const uint8_t* codes, int64_t n, float scale, float* out) {
  decode<Kind::kE5m2>(codes, n, scale, {}, out);
}

void decode_e2m1(const uint8_t* packed, int64_t n, float scale, float* out) {
  decode<Kind::kE2m1>(packed, n, scale, {}, out);
}

void transpose_into(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                    int64_t ldd) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8)
    for (int64_t c = 0; c < c8; c += 8) transpose8(src + r * lds + c, lds, dst + c * ldd + r, ldd);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r < r8 ? c8 : 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

}  // namespace mantissa::kernels::code_panels

#pragma GCC pop_options

namespace mantissa::kernels::code_panels {

bool available(SimdLevel level) { return std::min(level, simd_level()) >= SimdLevel::kAvx2; }

}  // namespace mantissa::kernels::code_panels
