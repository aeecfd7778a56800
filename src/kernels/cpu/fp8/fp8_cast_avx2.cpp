// AVX2 (+FMA, F16C) FP8 cast and dequantisation, 8 lanes at a time (the cast 32 elements per
// iteration, stored as one vector of codes); tails use the scalar path.
// The codes are fp8_codes_avx2.h's, whose bits the tests check against the scalar path on every
// code boundary.
#include <immintrin.h>

#include <algorithm>

#include "core/convert_avx2_lanes.h"
#include "kernels/cpu/common/aligned_vector.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/float8.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace mantissa::kernels::fp8::detail {
namespace {

// Eight elements of a float32, float16 or bfloat16 buffer, widened to float32.
template <DType::Id kSrc>
MANTISSA_AVX2 inline __m256 load8(const void* src, int64_t i) {
  if constexpr (kSrc == DType::Id::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(src) + i);
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(src) + i));
    if constexpr (kSrc == DType::Id::f16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// The codes of elements i..i+7, with their amax and counts folded into the accumulators.
template <int kMant, int kBias, int kMaxCode, DType::Id kSrc>
MANTISSA_AVX2 inline __m256i cast8(const void* src, int64_t i, __m256 scale, __m256 max_value,
                                   __m256& amax, LaneCounts& counts) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 x = load8<kSrc>(src, i);
  // max_ps returns its second operand when the first is NaN: NaN inputs never win.
  amax = _mm256_max_ps(_mm256_and_ps(x, abs_mask), amax);
  return counted_codes<kMant, kBias, kMaxCode>(x, _mm256_mul_ps(x, scale), max_value, counts);
}

// scales: null (every element times `scale`) or element i times scales[i].
template <int kMant, int kBias, int kMaxCode, DType::Id kSrc>
MANTISSA_AVX2 CastStats cast_loop(const void* src, uint8_t* dst, int64_t n, float scale,
                                  const float* scales, float max_value) {
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256 vmax = _mm256_set1_ps(max_value);
  __m256 amax = _mm256_setzero_ps();
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  auto scale_at = [&](int64_t i)
                      MANTISSA_AVX2 { return scales ? _mm256_loadu_ps(scales + i) : vscale; };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = cast8<kMant, kBias, kMaxCode, kSrc>(src, i, scale_at(i), vmax, amax, counts);
    const __m256i b =
        cast8<kMant, kBias, kMaxCode, kSrc>(src, i + 8, scale_at(i + 8), vmax, amax, counts);
    const __m256i c =
        cast8<kMant, kBias, kMaxCode, kSrc>(src, i + 16, scale_at(i + 16), vmax, amax, counts);
    const __m256i d =
        cast8<kMant, kBias, kMaxCode, kSrc>(src, i + 24, scale_at(i + 24), vmax, amax, counts);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), pack32_bytes(a, b, c, d));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i codes =
        cast8<kMant, kBias, kMaxCode, kSrc>(src, i, scale_at(i), vmax, amax, counts);
    const __m128i p16 =
        _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + i), _mm_packus_epi16(p16, p16));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, amax);
  return finish_simd_cast(lanes, 8, lane_sum(counts.saturated), lane_sum(counts.flushed), src,
                          DType(kSrc), dst, i, n, scale, kMant == 3 ? kFloat8_e4m3fn : kFloat8_e5m2,
                          scales);
}

// cast_loop for the source dtype named at run time.
template <int kMant, int kBias, int kMaxCode>
MANTISSA_AVX2 CastStats cast_any(const void* src, DType src_dtype, uint8_t* dst, int64_t n,
                                 float scale, const float* scales, float max_value) {
  if (src_dtype == kFloat32)
    return cast_loop<kMant, kBias, kMaxCode, DType::Id::f32>(src, dst, n, scale, scales, max_value);
  if (src_dtype == kFloat16)
    return cast_loop<kMant, kBias, kMaxCode, DType::Id::f16>(src, dst, n, scale, scales, max_value);
  return cast_loop<kMant, kBias, kMaxCode, DType::Id::bf16>(src, dst, n, scale, scales, max_value);
}

}  // namespace

MANTISSA_AVX2 CastStats scaled_cast_avx2(const void* src, DType src_dtype, uint8_t* dst, int64_t n,
                                         float scale, DType fp8) {
  if (fp8 == kFloat8_e4m3fn) {
    return cast_any<3, 7, 0x7e>(src, src_dtype, dst, n, scale, nullptr, Float8E4M3::kMax);
  }
  return cast_any<2, 15, 0x7b>(src, src_dtype, dst, n, scale, nullptr, Float8E5M2::kMax);
}

MANTISSA_AVX2 CastStats scaled_cast_each_avx2(const void* src, DType src_dtype, uint8_t* dst,
                                              int64_t n, const float* scales, DType fp8) {
  if (fp8 == kFloat8_e4m3fn) {
    return cast_any<3, 7, 0x7e>(src, src_dtype, dst, n, 0.0f, scales, Float8E4M3::kMax);
  }
  return cast_any<2, 15, 0x7b>(src, src_dtype, dst, n, 0.0f, scales, Float8E5M2::kMax);
}

namespace {
// Bf16TableCast's codes of 32 bfloat16 values in element order; `low` takes the minimum of
// 2|h| - 1 (0 wraps to 0xFFFF) for any_below.
template <int kMant>
MANTISSA_AVX2 inline __m256i table_codes32(const uint16_t* p, __m256i base, __m256i step_after,
                                           __m256i zero_below, __m256i* low) {
  constexpr int kShift = 7 - kMant;  // e's lowest bit lands on bit kMant of the byte
  constexpr int kLowBits = (1 << (kMant + 1)) - 1;
  const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
  const __m256i one = _mm256_set1_epi16(1);
  *low = _mm256_min_epu16(*low, _mm256_sub_epi16(_mm256_add_epi16(h0, h0), one));
  *low = _mm256_min_epu16(*low, _mm256_sub_epi16(_mm256_add_epi16(h1, h1), one));
  // Low bytes (1 bit of e, m) and high bytes (sign, 7 bits of e) apart: each 128-bit lane of
  // s0/s1 is [8 low | 8 high] of 8 values, so l and h hold values 0-7 16-23 | 8-15 24-31.
  const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2,
                                         4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m256i s0 = _mm256_shuffle_epi8(h0, split), s1 = _mm256_shuffle_epi8(h1, split);
  const __m256i l = _mm256_unpacklo_epi64(s0, s1), h = _mm256_unpackhi_epi64(s0, s1);
  // (16-bit shifts move bits between the two bytes of a word; the masks drop them.)
  const __m256i group = _mm256_and_si256(_mm256_srli_epi16(l, 3), _mm256_set1_epi8(0x0F));
  const __m256i step = _mm256_cmpgt_epi8(_mm256_and_si256(l, _mm256_set1_epi8(7)),
                                         _mm256_shuffle_epi8(step_after, group));
  // (e << kMant) mod 256, plus m's top bits, which the table's base takes off.
  const __m256i e_bits = _mm256_or_si256(
      _mm256_andnot_si256(_mm256_set1_epi8(kLowBits), _mm256_slli_epi16(h, kMant + 1)),
      _mm256_and_si256(_mm256_srli_epi16(l, kShift), _mm256_set1_epi8(kLowBits)));
  const __m256i code =
      _mm256_sub_epi8(_mm256_add_epi8(e_bits, _mm256_shuffle_epi8(base, group)), step);
  const __m256i zero = _mm256_cmpgt_epi8(zero_below, _mm256_and_si256(h, _mm256_set1_epi8(0x7F)));
  const __m256i signed_code =
      _mm256_or_si256(_mm256_andnot_si256(zero, code),
                      _mm256_and_si256(h, _mm256_set1_epi8(static_cast<char>(0x80))));
  return _mm256_permute4x64_epi64(signed_code, 0xD8);
}

template <int kMant>
MANTISSA_AVX2 CastStats table_cast(const uint16_t* src, uint8_t* dst, int64_t n, float scale,
                                   DType fp8, const Bf16TableCast& t, bool stream) {
  const __m256i base =
      _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(t.base)));
  const __m256i step_after =
      _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(t.step_after)));
  const __m256i zero_below = _mm256_set1_epi8(static_cast<char>(t.zero_below));
  // any_below's bound for 2|h| - 1 (codes16_pow2_in_range's `low` holds |h| - 1).
  const __m256i normal_from2 = _mm256_set1_epi16(static_cast<int16_t>(2 * t.normal_from));
  CastStats st;
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256i low = _mm256_set1_epi16(-1);
    const __m256i c0 = table_codes32<kMant>(src + i, base, step_after, zero_below, &low);
    const __m256i c1 = table_codes32<kMant>(src + i + 32, base, step_after, zero_below, &low);
    const __m256i c2 = table_codes32<kMant>(src + i + 64, base, step_after, zero_below, &low);
    const __m256i c3 = table_codes32<kMant>(src + i + 96, base, step_after, zero_below, &low);
    if (any_below(low, normal_from2)) [[unlikely]] {  // a subnormal or flushed code among them
      const CastStats s = scaled_cast_avx2(src + i, kBFloat16, dst + i, 128, scale, fp8);
      st.saturated += s.saturated;
      st.flushed += s.flushed;
      continue;
    }
    auto* out = reinterpret_cast<__m256i*>(dst + i);
    if (stream) {
      _mm256_stream_si256(out, c0);
      _mm256_stream_si256(out + 1, c1);
      _mm256_stream_si256(out + 2, c2);
      _mm256_stream_si256(out + 3, c3);
    } else {
      _mm256_storeu_si256(out, c0);
      _mm256_storeu_si256(out + 1, c1);
      _mm256_storeu_si256(out + 2, c2);
      _mm256_storeu_si256(out + 3, c3);
    }
  }
  if (stream) _mm_sfence();
  if (i < n) {
    const CastStats s = scaled_cast_avx2(src + i, kBFloat16, dst + i, n - i, scale, fp8);
    st.saturated += s.saturated;
    st.flushed += s.flushed;
  }
  return st;
}
}  // namespace

MANTISSA_AVX2 CastStats bf16_table_cast_avx2(const uint16_t* src, uint8_t* dst, int64_t n,
                                             float scale, DType fp8, const Bf16TableCast& table,
                                             bool stream) {
  if (fp8 == kFloat8_e4m3fn) return table_cast<3>(src, dst, n, scale, fp8, table, stream);
  return table_cast<2>(src, dst, n, scale, fp8, table, stream);
}

namespace {
// The bits of elements i..i+7 in 32-bit lanes (16-bit sources zero-extended) with the sign
// cleared.
MANTISSA_AVX2 inline __m256i magnitude_bits8(const void* src, DType src_dtype, int64_t i) {
  if (src_dtype == kFloat32)
    return _mm256_and_si256(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint32_t*>(src) + i)),
        _mm256_set1_epi32(0x7fffffff));
  const __m128i h =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(src) + i));
  return _mm256_and_si256(_mm256_cvtepu16_epi32(h), _mm256_set1_epi32(0x7fff));
}

MANTISSA_AVX2 inline uint32_t lane_max(__m256i v) {
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  uint32_t m = 0;
  for (uint32_t l : lanes) m = l > m ? l : m;
  return m;
}

// The largest of sixteen 16-bit lanes.
MANTISSA_AVX2 inline uint32_t lane_max16(__m256i v) {
  alignas(32) int16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  int m = 0;
  for (int16_t l : lanes) m = l > m ? l : m;
  return static_cast<uint32_t>(m);
}

// amax_avx2 of a bfloat16 or float16 buffer in 16-bit lanes, 32 values a step.
MANTISSA_AVX2 Amax amax16_avx2(const uint16_t* p, DType src_dtype, int64_t n) {
  const __m256i abs = _mm256_set1_epi16(0x7fff);
  const __m256i inf = _mm256_set1_epi16(static_cast<int16_t>(inf_bits_of(src_dtype)));
  __m256i best0 = _mm256_setzero_si256(), best1 = best0, raw0 = best0, raw1 = best0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a0 =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), abs);
    const __m256i a1 =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 16)), abs);
    raw0 = _mm256_max_epi16(raw0, a0);
    raw1 = _mm256_max_epi16(raw1, a1);
    best0 = _mm256_max_epi16(best0, _mm256_andnot_si256(_mm256_cmpgt_epi16(a0, inf), a0));
    best1 = _mm256_max_epi16(best1, _mm256_andnot_si256(_mm256_cmpgt_epi16(a1, inf), a1));
  }
  const Amax lanes = amax_of_bits(lane_max16(_mm256_max_epi16(best0, best1)),
                                  lane_max16(_mm256_max_epi16(raw0, raw1)), src_dtype);
  if (i == n) return lanes;
  const Amax tail = amax_scalar(p + i, src_dtype, n - i);
  return {tail.amax > lanes.amax ? tail.amax : lanes.amax, tail.nan || lanes.nan};
}
}  // namespace

// (Magnitude bits fit 31 bits, or 15 for 16-bit sources, so the signed compares and maxima
// order them.)
MANTISSA_AVX2 Amax amax_avx2(const void* src, DType src_dtype, int64_t n) {
  if (src_dtype != kFloat32) return amax16_avx2(static_cast<const uint16_t*>(src), src_dtype, n);
  const __m256i inf = _mm256_set1_epi32(static_cast<int>(inf_bits_of(src_dtype)));
  __m256i best = _mm256_setzero_si256(), raw = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i a = magnitude_bits8(src, src_dtype, i);
    raw = _mm256_max_epi32(raw, a);
    best = _mm256_max_epi32(best, _mm256_andnot_si256(_mm256_cmpgt_epi32(a, inf), a));
  }
  const Amax lanes = amax_of_bits(lane_max(best), lane_max(raw), src_dtype);
  if (i == n) return lanes;
  const auto* rest = static_cast<const char*>(src) + i * static_cast<int64_t>(src_dtype.itemsize());
  const Amax tail = amax_scalar(rest, src_dtype, n - i);
  return {tail.amax > lanes.amax ? tail.amax : lanes.amax, tail.nan || lanes.nan};
}

MANTISSA_AVX2 void column_amax_bits_avx2(const void* src, DType src_dtype, int64_t rows,
                                         int64_t cols, uint32_t* best, uint32_t* raw) {
  const __m256i inf = _mm256_set1_epi32(static_cast<int>(inf_bits_of(src_dtype)));
  const int64_t vec_cols = cols / 8 * 8;
  {
    // First the largest bits alone (one maximum a value): where no column's is a NaN's, they are
    // the amax too. Else the pass below takes both maxima.
    AlignedVector<uint32_t> top(static_cast<size_t>(vec_cols), 0u);
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      for (int64_t c = 0; c < vec_cols; c += 8) {
        const __m256i a01 = _mm256_max_epi32(magnitude_bits8(src, src_dtype, r * cols + c),
                                             magnitude_bits8(src, src_dtype, (r + 1) * cols + c));
        const __m256i a23 = _mm256_max_epi32(magnitude_bits8(src, src_dtype, (r + 2) * cols + c),
                                             magnitude_bits8(src, src_dtype, (r + 3) * cols + c));
        auto* t = reinterpret_cast<__m256i*>(top.data() + c);
        _mm256_storeu_si256(t, _mm256_max_epi32(_mm256_loadu_si256(t), _mm256_max_epi32(a01, a23)));
      }
    }
    for (; r < rows; ++r) {
      for (int64_t c = 0; c < vec_cols; c += 8) {
        auto* t = reinterpret_cast<__m256i*>(top.data() + c);
        _mm256_storeu_si256(t, _mm256_max_epi32(_mm256_loadu_si256(t),
                                                magnitude_bits8(src, src_dtype, r * cols + c)));
      }
    }
    const uint32_t inf_bits = inf_bits_of(src_dtype);
    if (std::all_of(top.begin(), top.end(), [inf_bits](uint32_t t) { return t <= inf_bits; })) {
      for (int64_t c = 0; c < vec_cols; ++c) {
        const uint32_t t = top[static_cast<size_t>(c)];
        best[c] = t > best[c] ? t : best[c];
        raw[c] = t > raw[c] ? t : raw[c];
      }
      if (vec_cols == cols) return;
      const auto* first = static_cast<const char*>(src) + vec_cols * src_dtype.itemsize();
      for (int64_t k = 0; k < rows; ++k)
        column_amax_bits_scalar(first + k * cols * static_cast<int64_t>(src_dtype.itemsize()),
                                src_dtype, 1, cols - vec_cols, best + vec_cols, raw + vec_cols);
      return;
    }
  }
  // Four rows a step: their maxima first, then one update of each column's running maxima (a
  // load and a store for four rows, not for each).
  const auto clear_nan = [inf](__m256i a) MANTISSA_AVX2 {
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(a, inf), a);
  };
  int64_t r0 = 0;
  for (; r0 + 4 <= rows; r0 += 4) {
    for (int64_t c = 0; c < vec_cols; c += 8) {
      const __m256i a0 = magnitude_bits8(src, src_dtype, r0 * cols + c);
      const __m256i a1 = magnitude_bits8(src, src_dtype, (r0 + 1) * cols + c);
      const __m256i a2 = magnitude_bits8(src, src_dtype, (r0 + 2) * cols + c);
      const __m256i a3 = magnitude_bits8(src, src_dtype, (r0 + 3) * cols + c);
      const __m256i top = _mm256_max_epi32(_mm256_max_epi32(a0, a1), _mm256_max_epi32(a2, a3));
      const __m256i clean = _mm256_max_epi32(_mm256_max_epi32(clear_nan(a0), clear_nan(a1)),
                                             _mm256_max_epi32(clear_nan(a2), clear_nan(a3)));
      auto* b = reinterpret_cast<__m256i*>(best + c);
      auto* w = reinterpret_cast<__m256i*>(raw + c);
      _mm256_storeu_si256(w, _mm256_max_epi32(_mm256_loadu_si256(w), top));
      _mm256_storeu_si256(b, _mm256_max_epi32(_mm256_loadu_si256(b), clean));
    }
  }
  for (int64_t r = r0; r < rows; ++r) {
    for (int64_t c = 0; c < vec_cols; c += 8) {
      const __m256i a = magnitude_bits8(src, src_dtype, r * cols + c);
      auto* b = reinterpret_cast<__m256i*>(best + c);
      auto* w = reinterpret_cast<__m256i*>(raw + c);
      _mm256_storeu_si256(w, _mm256_max_epi32(_mm256_loadu_si256(w), a));
      _mm256_storeu_si256(b, _mm256_max_epi32(_mm256_loadu_si256(b),
                                              _mm256_andnot_si256(_mm256_cmpgt_epi32(a, inf), a)));
    }
  }
  if (vec_cols == cols) return;
  // The last cols % 8 columns: the scalar body over a view that starts at column vec_cols.
  const auto* first = static_cast<const char*>(src) + vec_cols * src_dtype.itemsize();
  for (int64_t r = 0; r < rows; ++r)
    column_amax_bits_scalar(first + r * cols * static_cast<int64_t>(src_dtype.itemsize()),
                            src_dtype, 1, cols - vec_cols, best + vec_cols, raw + vec_cols);
}

MANTISSA_AVX2 void dequantize_avx2(const uint8_t* src, DType fp8, void* dst, DType dst_dtype,
                                   int64_t n, float scale_inv) {
  const float* table = decode_table(fp8);
  const __m256 vs = _mm256_set1_ps(scale_inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i idx =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i)));
    const __m256 v = _mm256_mul_ps(_mm256_i32gather_ps(table, idx, 4), vs);
    if (dst_dtype == kFloat32) {
      _mm256_storeu_ps(static_cast<float*>(dst) + i, v);
    } else {
      const __m256i b = convert_detail::bf16_rne(_mm256_castps_si256(v));
      const __m128i packed =
          _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(dst) + i), packed);
    }
  }
  if (i < n) {
    void* rest = static_cast<char*>(dst) + i * static_cast<int64_t>(dst_dtype.itemsize());
    dequantize_scalar(src + i, fp8, rest, dst_dtype, n - i, scale_inv);
  }
}

}  // namespace mantissa::kernels::fp8::detail
