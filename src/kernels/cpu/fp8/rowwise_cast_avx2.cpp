// The rowwise recipes' bfloat16 casts under power-of-2 scales (rowwise_cast.h), on AVX2.
//
// The codes come sixteen a vector from 16-bit lanes (fp8_codes_avx2.h, codes16_pow2: the
// exponent add and integer rounding that give scaled_cast's bits; a row's cast takes 64 values a
// step through codes16_pow2_in_range, its fewer operations, under scales up to 2^120). A vector
// holding a value whose code is subnormal or flushed is cast again in float32 lanes
// (satfinite_codes).
// amax * 2^e <= 448 keeps every code at most 0x7E, so nothing saturates.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/fp8/rowwise_cast.h"
#include "mantissa/core/float8.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace mantissa::kernels::fp8 {
namespace {

constexpr int64_t kChunk = 1 << 16;  // as fp8_cast.cpp: rows split over threads above this

// The lanes' constants of a scale 2^e: e in the exponent field, and the smallest |x| bits whose
// product is normal in E4M3 (2^-6), at least bfloat16's smallest normal.
// rebias: codes16_pow2_in_range's (120 - e) << 7 where e <= 120 (in_range), else 0.
struct LaneScale {
  int16_t exponent_add;
  int16_t normal_from;
  int16_t rebias;
  bool in_range;
};

bool lane_scale(float scale, float amax, LaneScale* out) {
  int e = 0;
  // amax * 2^e is exact unless subnormal, and then far below 448 (an inf or NaN amax fails).
  if (!detail::pow2_exponent(scale, &e) || !(amax * scale <= Float8E4M3::kMax)) return false;
  out->exponent_add = static_cast<int16_t>(e * 128);
  out->normal_from = static_cast<int16_t>(std::max((121 - e) * 128, 0x80));
  out->rebias = static_cast<int16_t>(std::max(120 - e, 0) * 128);
  out->in_range = e <= 120;
  return true;
}

// The E4M3 codes of 16 bfloat16 values (bits h) in 16-bit lanes (fp8_codes_avx2.h); `slow` gets
// a nonzero mask where a lane needs the float32 path.
MANTISSA_AVX2 inline __m256i codes16(__m256i h, __m256i exponent_add, __m256i normal_from,
                                     int* slow) {
  __m256i lanes;
  const __m256i c = detail::codes16_pow2<3, 7, 0x7e>(h, exponent_add, normal_from, &lanes);
  *slow = _mm256_movemask_epi8(lanes);
  return c;
}

struct Counts {
  int64_t saturated = 0;
  int64_t flushed = 0;
};

// One lane's count (0 or 1, counted_codes's from zero) of each of 8 lanes, summed.
MANTISSA_AVX2 inline int ones(__m256i lanes) {
  return __builtin_popcount(
      static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(lanes, 31)))));
}

// The codes of 8 float32 values x times s, counted as scaled_cast counts them.
MANTISSA_AVX2 inline __m256i exact8(__m256 x, __m256 s, Counts& counts) {
  detail::LaneCounts lanes{_mm256_setzero_si256(), _mm256_setzero_si256()};
  const __m256i c = detail::counted_codes<3, 7, 0x7e>(x, _mm256_mul_ps(x, s),
                                                      _mm256_set1_ps(Float8E4M3::kMax), lanes);
  counts.saturated += ones(lanes.saturated);
  counts.flushed += ones(lanes.flushed);
  return c;
}

// The 16 codes of bfloat16 bits h under the scales s0 (lanes 0-7) and s1 (8-15) in float32
// lanes, as 16-bit lanes.
MANTISSA_AVX2 inline __m256i exact16(__m256i h, __m256 s0, __m256 s1, Counts& counts) {
  const __m256 x0 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16));
  const __m256 x1 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16));
  const __m256i c = _mm256_packus_epi32(exact8(x0, s0, counts), exact8(x1, s1, counts));
  return _mm256_permute4x64_epi64(c, 0xD8);  // the 128-bit lanes' halves back in order
}

// 16 codes in 16-bit lanes -> 16 bytes at dst.
MANTISSA_AVX2 inline void store16(uint8_t* dst, __m256i c) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm_packus_epi16(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1)));
}

MANTISSA_AVX2 inline __m256i load16(const uint16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

MANTISSA_AVX2 inline int max_lane16(__m256i v) {
  alignas(32) int16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  int m = 0;
  for (int16_t l : lanes) m = l > m ? l : m;
  return m;
}

// The magnitudes' bits of a bfloat16 buffer, largest first; above 0x7F80: a NaN.
MANTISSA_AVX2 int max_magnitude_bits(const uint16_t* src, int64_t n) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_epi16(m0, _mm256_and_si256(load16(src + i), abs));
    m1 = _mm256_max_epi16(m1, _mm256_and_si256(load16(src + i + 16), abs));
  }
  for (; i + 16 <= n; i += 16) m0 = _mm256_max_epi16(m0, _mm256_and_si256(load16(src + i), abs));
  int m = max_lane16(_mm256_max_epi16(m0, m1));
  for (; i < n; ++i) m = std::max(m, src[i] & 0x7FFF);
  return m;
}

float bf16_value(int bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

}  // namespace

bool rowwise_bf16_usable(SimdLevel level) {
  return level >= SimdLevel::kAvx2 && simd_level() >= SimdLevel::kAvx2;
}

bool bf16_amax_without_nan(const uint16_t* src, int64_t n, float* amax) {
  const int m = max_magnitude_bits(src, n);
  if (m > 0x7F80) return false;
  *amax = bf16_value(m);
  return true;
}

MANTISSA_AVX2 bool cast_bf16_pow2(const uint16_t* src, uint8_t* dst, int64_t n, float scale,
                                  float amax, CastStats* stats) {
  LaneScale ls{};
  if (!lane_scale(scale, amax, &ls)) return false;
  const __m256i exponent_add = _mm256_set1_epi16(ls.exponent_add);
  const __m256i normal_from = _mm256_set1_epi16(ls.normal_from);
  const __m256 s = _mm256_set1_ps(scale);
  Counts counts;
  int64_t i = 0;
  // 64 values a step in the fewer operations of codes16_pow2_in_range; a step holding a value
  // whose code is subnormal or flushed is cast again as the 16-value steps below cast it.
  if (ls.in_range) {
    const __m256i rebias = _mm256_set1_epi16(ls.rebias);
    for (; i + 64 <= n; i += 64) {
      const uint16_t* p = src + i;
      __m256i low = _mm256_set1_epi16(-1);
      __m256i c0 = detail::codes16_pow2_in_range<3, 7>(load16(p), rebias, &low);
      __m256i c1 = detail::codes16_pow2_in_range<3, 7>(load16(p + 16), rebias, &low);
      __m256i c2 = detail::codes16_pow2_in_range<3, 7>(load16(p + 32), rebias, &low);
      __m256i c3 = detail::codes16_pow2_in_range<3, 7>(load16(p + 48), rebias, &low);
      if (detail::any_below(low, normal_from)) [[unlikely]] {
        __m256i* c[4] = {&c0, &c1, &c2, &c3};
        for (int v = 0; v < 4; ++v) {
          const __m256i h = load16(p + 16 * v);
          int slow = 0;
          *c[v] = codes16(h, exponent_add, normal_from, &slow);
          if (slow) *c[v] = exact16(h, s, s, counts);
        }
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), detail::pack32_bytes16(c0, c1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32), detail::pack32_bytes16(c2, c3));
    }
  }
  for (; i + 16 <= n; i += 16) {
    const __m256i h = load16(src + i);
    int slow = 0;
    __m256i c = codes16(h, exponent_add, normal_from, &slow);
    if (slow) c = exact16(h, s, s, counts);
    store16(dst + i, c);
  }
  if (i < n) {
    const CastStats tail =
        detail::scaled_cast_scalar(src + i, kBFloat16, dst + i, n - i, scale, kFloat8_e4m3fn);
    counts.saturated += tail.saturated;
    counts.flushed += tail.flushed;
  }
  stats->amax = amax;
  stats->saturated = counts.saturated;
  stats->flushed = counts.flushed;
  return true;
}

MANTISSA_AVX2 bool bf16_column_amax_without_nan(const uint16_t* src, int64_t rows, int64_t cols,
                                                float* amax) {
  // Row by row through the matrix (in memory order), four rows a step, each column's running
  // maximum of the magnitude bits in a buffer that stays in L1.
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  const int64_t vec_cols = cols / 16 * 16;
  std::vector<int16_t> best(static_cast<size_t>(cols), 0);
  int16_t* m = best.data();
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const uint16_t* p = src + r * cols;
    for (int64_t c = 0; c < vec_cols; c += 16) {
      auto* acc = reinterpret_cast<__m256i*>(m + c);
      const __m256i a01 = _mm256_max_epi16(_mm256_and_si256(load16(p + c), abs),
                                           _mm256_and_si256(load16(p + cols + c), abs));
      const __m256i a23 = _mm256_max_epi16(_mm256_and_si256(load16(p + 2 * cols + c), abs),
                                           _mm256_and_si256(load16(p + 3 * cols + c), abs));
      _mm256_storeu_si256(acc,
                          _mm256_max_epi16(_mm256_loadu_si256(acc), _mm256_max_epi16(a01, a23)));
    }
  }
  for (; r < rows; ++r) {
    const uint16_t* p = src + r * cols;
    for (int64_t c = 0; c < vec_cols; c += 16) {
      auto* acc = reinterpret_cast<__m256i*>(m + c);
      _mm256_storeu_si256(
          acc, _mm256_max_epi16(_mm256_loadu_si256(acc), _mm256_and_si256(load16(p + c), abs)));
    }
  }
  for (int64_t c = vec_cols; c < cols; ++c) {
    int t = 0;
    for (int64_t k = 0; k < rows; ++k) t = std::max(t, src[k * cols + c] & 0x7FFF);
    m[c] = static_cast<int16_t>(t);
  }
  for (int64_t c = 0; c < cols; ++c) {
    if (m[c] > 0x7F80) return false;
    amax[c] = bf16_value(m[c]);
  }
  return true;
}

MANTISSA_AVX2 bool cast_columns_bf16_pow2(const uint16_t* src, uint8_t* dst, int64_t rows,
                                          int64_t cols, const float* scales, const float* amax,
                                          CastStats* stats) {
  const int64_t vec_cols = cols / 16 * 16;
  std::vector<int16_t> exponent_add(static_cast<size_t>(vec_cols)),
      normal_from(static_cast<size_t>(vec_cols));
  float largest = 0.0f;
  for (int64_t c = 0; c < cols; ++c) {
    LaneScale ls{};
    if (!lane_scale(scales[c], amax[c], &ls)) return false;
    if (c < vec_cols) {
      exponent_add[static_cast<size_t>(c)] = ls.exponent_add;
      normal_from[static_cast<size_t>(c)] = ls.normal_from;
    }
    largest = std::max(largest, amax[c]);
  }
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(+ : saturated, flushed) if (rows * cols > kChunk)
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* in = src + r * cols;
    uint8_t* out = dst + r * cols;
    Counts counts;
    for (int64_t c = 0; c < vec_cols; c += 16) {
      const __m256i h = load16(in + c);
      int slow = 0;
      __m256i code = codes16(h, load16(reinterpret_cast<const uint16_t*>(&exponent_add[c])),
                             load16(reinterpret_cast<const uint16_t*>(&normal_from[c])), &slow);
      if (slow)
        code = exact16(h, _mm256_loadu_ps(scales + c), _mm256_loadu_ps(scales + c + 8), counts);
      store16(out + c, code);
    }
    if (vec_cols < cols) {
      const CastStats tail =
          detail::scaled_cast_each_scalar(in + vec_cols, kBFloat16, out + vec_cols, cols - vec_cols,
                                          scales + vec_cols, kFloat8_e4m3fn);
      counts.saturated += tail.saturated;
      counts.flushed += tail.flushed;
    }
    saturated += counts.saturated;
    flushed += counts.flushed;
  }
  stats->amax = largest;
  stats->saturated = saturated;
  stats->flushed = flushed;
  return true;
}

}  // namespace mantissa::kernels::fp8
