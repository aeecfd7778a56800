// The vector decoders and the panel transpose of code_panels.h (AVX2 with F16C; the callers
// keep their table loops below that level).
#include "kernels/cpu/gemm/code_panels.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/cpu/common/e2m1_eight_avx2.h"
#include "kernels/cpu/gemm/transpose8_avx2.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::code_panels {
namespace {

// The halves whose values are 2^-8 times those of 16 E4M3 codes (in 16-bit lanes): the code's
// magnitude bits shifted under the half's (exponent bias 15 against E4M3's 7, hence the factor
// 2^8 the callers multiply by), its sign kept; `(c << 8) >> 1` (arithmetic) puts the sign in
// bits 15 and 14 and the magnitude in bits 13..7, and the mask clears bit 14.
inline __m256i e4m3_halves(__m256i code16) {
  return _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(code16, 8), 1),
                          _mm256_set1_epi16(static_cast<int16_t>(0xBFFF)));
}

// Whether any of 16 codes is an E4M3 NaN (magnitude 0x7F): then the callers replace them.
inline bool any_e4m3_nan(__m128i codes) {
  const __m128i all = _mm_or_si128(codes, _mm_set1_epi8(static_cast<char>(0x80)));
  return _mm_movemask_epi8(_mm_cmpeq_epi8(all, _mm_set1_epi8(-1))) != 0;
}

// The values of 8 E4M3 codes given as 16-bit lanes, NaN codes replaced by the caller's NaNs.
inline __m256 e4m3_eight(__m128i code16, __m256 nan_pos, __m256 nan_neg) {
  const __m128i mag = _mm_and_si128(code16, _mm_set1_epi16(0x7F));
  const __m128i sign = _mm_and_si128(code16, _mm_set1_epi16(0x80));
  const __m128i half = _mm_or_si128(_mm_slli_epi16(mag, 7), _mm_slli_epi16(sign, 8));
  const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(half), _mm256_set1_ps(256.0f));
  const __m256 is_nan =
      _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7F))));
  const __m256 neg =
      _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(sign, _mm_set1_epi16(0x80))));
  const __m256 nan = _mm256_blendv_ps(nan_pos, nan_neg, neg);
  return _mm256_blendv_ps(v, nan, is_nan);
}

// The values of 16 codes into v0 (the first 8) and v1. Blocks without a NaN code (nearly all)
// take the shifts alone.
inline void e4m3_values16(const uint8_t* codes, __m256 nan_pos, __m256 nan_neg, __m256& v0,
                          __m256& v1) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  const __m256i c = _mm256_cvtepu8_epi16(raw);
  if (!any_e4m3_nan(raw)) {
    const __m256i h = e4m3_halves(c);
    v0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), _mm256_set1_ps(256.0f));
    v1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), _mm256_set1_ps(256.0f));
  } else {
    v0 = e4m3_eight(_mm256_castsi256_si128(c), nan_pos, nan_neg);
    v1 = e4m3_eight(_mm256_extracti128_si256(c, 1), nan_pos, nan_neg);
  }
}

// 16 codes' values times scale (a scale of 1 is not multiplied: that changes no value here).
void e4m3_sixteen(const uint8_t* codes, __m256 nan_pos, __m256 nan_neg, __m256 scale, bool unit,
                  float* out) {
  __m256 v0, v1;
  e4m3_values16(codes, nan_pos, nan_neg, v0, v1);
  if (!unit) {
    v0 = _mm256_mul_ps(v0, scale);
    v1 = _mm256_mul_ps(v1, scale);
  }
  _mm256_storeu_ps(out, v0);
  _mm256_storeu_ps(out + 8, v1);
}

void e5m2_sixteen(const uint8_t* codes, __m256 scale, float* out) {
  const __m256i half = _mm256_slli_epi16(
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes))), 8);
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(half)), scale));
  _mm256_storeu_ps(out + 8,
                   _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(half, 1)), scale));
}

// The values of 8 E2M1 codes (4 bytes, the even element in the low nibble) from `table`, the 8
// magnitudes times a block scale: lane j shifts nibble j to the bottom, whose low 3 bits pick the
// magnitude (vpermps reads no more), and its bit 3 to bit 31, the sign flipped into the product.
// A negated element's product is the negated product, exactly, for every scale but NaN, so these
// are the bits of the element's value times the scale.
inline __m256 e2m1_eight_scaled(const uint8_t* packed, __m256 table) {
  float word;
  std::memcpy(&word, packed, 4);
  const __m256i x = _mm256_castps_si256(_mm256_set1_ps(word));
  const __m256i index = _mm256_srlv_epi32(x, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
  const __m256i sign =
      _mm256_and_si256(_mm256_sllv_epi32(x, _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0)),
                       _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm256_xor_ps(_mm256_permutevar8x32_ps(table, index), _mm256_castsi256_ps(sign));
}

inline __m256 e2m1_table(float scale) {
  return _mm256_mul_ps(_mm256_loadu_ps(kE2m1Magnitudes), _mm256_set1_ps(scale));
}

// 16 E2M1 codes from 8 bytes times scale.
void e2m1_sixteen(const uint8_t* packed, __m256 scale, float* out) {
  const __m256 table = _mm256_mul_ps(_mm256_loadu_ps(kE2m1Magnitudes), scale);
  _mm256_storeu_ps(out, e2m1_eight_scaled(packed, table));
  _mm256_storeu_ps(out + 8, e2m1_eight_scaled(packed + 4, table));
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
  const bool unit = scale == 1.0f;
  constexpr int64_t kBytes = K == Kind::kE2m1 ? 8 : 16;  // code bytes per 16 elements
  const auto sixteen = [&](const uint8_t* c, float* o) {
    if constexpr (K == Kind::kE4m3) e4m3_sixteen(c, np, nn, s, unit, o);
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

// One E4M3 code's value as the vector paths give it (F16C's scalar conversion).
float e4m3_one(uint8_t code, E4m3Nans nans) {
  if ((code & 0x7F) == 0x7F) return (code & 0x80) ? nans.negative : nans.positive;
  const auto half = static_cast<unsigned short>(((code & 0x7F) << 7) | ((code & 0x80) << 8));
  return _cvtsh_ss(half) * 256.0f;
}

}  // namespace

void decode_e4m3(const uint8_t* codes, int64_t n, float scale, E4m3Nans nans, float* out) {
  decode<Kind::kE4m3>(codes, n, scale, nans, out);
}

void decode_e4m3_blocks(const uint8_t* codes, int64_t n, int64_t block, const float* scales,
                        E4m3Nans nans, float* out) {
  const __m256 np = _mm256_set1_ps(nans.positive), nn = _mm256_set1_ps(nans.negative);
  for (int64_t b0 = 0, q = 0; b0 < n; b0 += block, ++q) {
    const int64_t len = std::min(block, n - b0);
    if (len % 16 != 0) {
      decode_e4m3(codes + b0, len, scales[q], nans, out + b0);
      continue;
    }
    const __m256 s = _mm256_set1_ps(scales[q]);
    const bool unit = scales[q] == 1.0f;
    for (int64_t j = b0; j < b0 + len; j += 16) e4m3_sixteen(codes + j, np, nn, s, unit, out + j);
  }
}

void decode_e5m2_blocks(const uint8_t* codes, int64_t n, int64_t block, const float* scales,
                        float* out) {
  for (int64_t b0 = 0, q = 0; b0 < n; b0 += block, ++q) {
    const int64_t len = std::min(block, n - b0);
    if (len % 16 != 0) {
      decode_e5m2(codes + b0, len, scales[q], out + b0);
      continue;
    }
    const __m256 s = _mm256_set1_ps(scales[q]);
    for (int64_t j = b0; j < b0 + len; j += 16) e5m2_sixteen(codes + j, s, out + j);
  }
}

void decode_e4m3_strips(const uint8_t* codes, int64_t n, E4m3Nans nans, float* out, int64_t width,
                        int64_t strip) {
  const __m256 np = _mm256_set1_ps(nans.positive), nn = _mm256_set1_ps(nans.negative);
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    e4m3_sixteen(codes + j, np, nn, one, true, out + j / width * strip + j % width);
  if (j < n) decode_e4m3(codes + j, n - j, 1.0f, nans, out + j / width * strip + j % width);
}

void decode_e5m2(const uint8_t* codes, int64_t n, float scale, float* out) {
  decode<Kind::kE5m2>(codes, n, scale, {}, out);
}

void decode_e2m1(const uint8_t* packed, int64_t n, float scale, float* out) {
  decode<Kind::kE2m1>(packed, n, scale, {}, out);
}

void decode_e2m1_blocks(const uint8_t* packed, int64_t n, const float* scales, float* out,
                        int64_t width, int64_t strip) {
  int64_t j = 0, in_strip = 0;  // in_strip: j % width
  float* o = out;               // out + (j / width) * strip + j % width
  for (; j + 16 <= n; j += 16) {
    const __m256 table = e2m1_table(scales[j / 16]);
    _mm256_storeu_ps(o, e2m1_eight_scaled(packed + j / 2, table));
    _mm256_storeu_ps(o + 8, e2m1_eight_scaled(packed + j / 2 + 4, table));
    o += 16;
    in_strip += 16;
    if (in_strip == width) {
      o += strip - width;
      in_strip = 0;
    }
  }
  if (j < n) decode_e2m1(packed + j / 2, n - j, scales[j / 16], o);
}

namespace {

// Element j of a row (n of them, 16 at a time, the tail through zero-padded copies) times
// scales[j] into the strips: values(c, v0, v1) gives the unscaled values of the 16 elements whose
// codes start at c.
template <int64_t kBytes, class Values>
[[gnu::always_inline]] inline void scaled_strips(const uint8_t* codes, int64_t n,
                                                 const float* scales, float* out, int64_t width,
                                                 int64_t strip, const Values& values) {
  int64_t j = 0, in_strip = 0;  // in_strip: j % width
  float* o = out;               // out + (j / width) * strip + j % width
  for (; j + 16 <= n; j += 16) {
    __m256 v0, v1;
    values(codes + j / 16 * kBytes, v0, v1);
    _mm256_storeu_ps(o, _mm256_mul_ps(v0, _mm256_loadu_ps(scales + j)));
    _mm256_storeu_ps(o + 8, _mm256_mul_ps(v1, _mm256_loadu_ps(scales + j + 8)));
    o += 16;
    in_strip += 16;
    if (in_strip == width) {
      o += strip - width;
      in_strip = 0;
    }
  }
  if (j == n) return;
  const int64_t rest = n - j;
  uint8_t pad[16] = {};
  std::memcpy(pad, codes + j / 16 * kBytes, static_cast<size_t>((rest * kBytes + 15) / 16));
  float s[16] = {};
  std::copy(scales + j, scales + n, s);
  __m256 v0, v1;
  values(pad, v0, v1);
  float tail[16];
  _mm256_storeu_ps(tail, _mm256_mul_ps(v0, _mm256_loadu_ps(s)));
  _mm256_storeu_ps(tail + 8, _mm256_mul_ps(v1, _mm256_loadu_ps(s + 8)));
  std::copy(tail, tail + rest, o);  // a strip holds whole 16s: the tail stays in o's strip
}

}  // namespace

void decode_e4m3_scaled_strips(const uint8_t* codes, int64_t n, const float* scales, E4m3Nans nans,
                               float* out, int64_t width, int64_t strip) {
  const __m256 np = _mm256_set1_ps(nans.positive), nn = _mm256_set1_ps(nans.negative);
  scaled_strips<16>(
      codes, n, scales, out, width, strip,
      [&](const uint8_t* c, __m256& v0, __m256& v1) { e4m3_values16(c, np, nn, v0, v1); });
}

void decode_e5m2_scaled_strips(const uint8_t* codes, int64_t n, const float* scales, float* out,
                               int64_t width, int64_t strip) {
  scaled_strips<16>(
      codes, n, scales, out, width, strip, [](const uint8_t* c, __m256& v0, __m256& v1) {
        const __m256i half = _mm256_slli_epi16(
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))), 8);
        v0 = _mm256_cvtph_ps(_mm256_castsi256_si128(half));
        v1 = _mm256_cvtph_ps(_mm256_extracti128_si256(half, 1));
      });
}

void decode_e2m1_scaled_strips(const uint8_t* packed, int64_t n, const float* scales, float* out,
                               int64_t width, int64_t strip) {
  const __m256 table = _mm256_loadu_ps(kE2m1Magnitudes);
  scaled_strips<8>(packed, n, scales, out, width, strip,
                   [&](const uint8_t* c, __m256& v0, __m256& v1) {
                     v0 = e2m1_eight_scaled(c, table);
                     v1 = e2m1_eight_scaled(c + 4, table);
                   });
}

namespace {

float e2m1_one(uint8_t code) {
  const uint32_t bits =
      std::bit_cast<uint32_t>(kE2m1Magnitudes[code & 7]) | (static_cast<uint32_t>(code & 8) << 28);
  return std::bit_cast<float>(bits);
}

// The next 8 stored rows' codes are fetched while these are decoded (rows lie ld bytes apart,
// too far for the hardware's stream detection to run ahead).
inline void prefetch_rows(const uint8_t* codes, int64_t ld, int64_t r, int64_t rows,
                          int64_t bytes) {
  if (r + 16 > rows) return;
  for (int64_t i = 8; i < 16; ++i)
    for (int64_t c = 0; c < bytes; c += 64) _mm_prefetch(codes + (r + i) * ld + c, _MM_HINT_T0);
}

// Rows r..r+7 of v (8 values each) times their scales, transposed and stored at dst + r.
[[gnu::always_inline]] inline void scale_transpose_store(__m256 v[8], const float* row_scales,
                                                         int64_t r, float* dst, int64_t ldd) {
  if (row_scales)
    for (int i = 0; i < 8; ++i) v[i] = _mm256_mul_ps(v[i], _mm256_set1_ps(row_scales[r + i]));
  gemm_avx2::transpose8(v);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * ldd + r, v[i]);
}

}  // namespace

void decode_e4m3_transposed(const uint8_t* codes, int64_t ld, int64_t rows, int64_t cols,
                            E4m3Nans nans, float* dst, int64_t ldd, const float* row_scales) {
  const __m256 np = _mm256_set1_ps(nans.positive), nn = _mm256_set1_ps(nans.negative);
  const __m256 k256 = _mm256_set1_ps(256.0f);
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8) {
    prefetch_rows(codes, ld, r, rows, cols);
    for (int64_t c = 0; c < c8; c += 8) {
      // Stored rows r + 2i and r + 2i + 1, eight codes each, in one register.
      __m128i q[4];
      for (int i = 0; i < 4; ++i) {
        const uint8_t* p = codes + (r + 2 * i) * ld + c;
        q[i] = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                                  _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + ld)));
      }
      const bool nan =
          any_e4m3_nan(q[0]) || any_e4m3_nan(q[1]) || any_e4m3_nan(q[2]) || any_e4m3_nan(q[3]);
      __m256 v[8];
      for (int i = 0; i < 4; ++i) {
        const __m256i c16 = _mm256_cvtepu8_epi16(q[i]);
        if (!nan) {
          const __m256i h = e4m3_halves(c16);
          v[2 * i] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), k256);
          v[2 * i + 1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), k256);
        } else {
          v[2 * i] = e4m3_eight(_mm256_castsi256_si128(c16), np, nn);
          v[2 * i + 1] = e4m3_eight(_mm256_extracti128_si256(c16, 1), np, nn);
        }
      }
      scale_transpose_store(v, row_scales, r, dst + c * ldd, ldd);
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r < r8 ? c8 : 0; c < cols; ++c) {
      const float v = e4m3_one(codes[r * ld + c], nans);
      dst[c * ldd + r] = row_scales ? v * row_scales[r] : v;
    }
}

void decode_e2m1_transposed(const uint8_t* packed, int64_t ld, int64_t rows, int64_t cols,
                            float* dst, int64_t ldd, const float* row_scales) {
  const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t r = 0; r < r8; r += 8) {
    prefetch_rows(packed, ld, r, rows, (cols + 1) / 2);
    __m256 table[8];
    for (int i = 0; i < 8; ++i) table[i] = e2m1_table(row_scales ? row_scales[r + i] : 1.0f);
    for (int64_t c = 0; c < c8; c += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; ++i) v[i] = e2m1_eight_scaled(packed + (r + i) * ld + c / 2, table[i]);
      gemm_avx2::transpose8(v);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + (c + i) * ldd + r, v[i]);
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r < r8 ? c8 : 0; c < cols; ++c) {
      const float v = e2m1_one((packed[r * ld + c / 2] >> ((c & 1) * 4)) & 15);
      dst[c * ldd + r] = row_scales ? v * row_scales[r] : v;
    }
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
