// The rowwise recipes' bfloat16 casts under power-of-2 scales (rowwise_cast.h), on AVX2.
//
// The codes come sixteen a vector from 16-bit lanes (fp8_codes_avx2.h, codes16_pow2: the
// exponent add and integer rounding that give scaled_cast's bits). Rows and columns take 64
// values a step under scales up to 2^120 through magnitudes16 (codes16_pow2_in_range's rounding,
// its constant folded into the rebias) with the signs packed in bytes (signed_bytes32), fewer
// operations a vector. A vector holding a value whose code is subnormal or flushed is cast again
// in float32 lanes (satfinite_codes).
// amax * 2^e <= 448 keeps every code at most 0x7E, so nothing saturates.
#include <immintrin.h>

#include <algorithm>
#include <bit>

#include "kernels/cpu/common/aligned_vector.h"
#include "kernels/cpu/common/column_bands.h"
#include "kernels/cpu/common/fetch_ahead.h"
#include "kernels/cpu/common/stream_codes.h"
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

// 64 code bytes at dst, past the caches where streamed (dst then 32-byte aligned).
MANTISSA_AVX2 inline void store64(uint8_t* dst, __m256i b0, __m256i b1, bool streamed) {
  auto* o = reinterpret_cast<__m256i*>(dst);
  if (streamed) {
    _mm256_stream_si256(o, b0);
    _mm256_stream_si256(o + 1, b1);
  } else {
    _mm256_storeu_si256(o, b0);
    _mm256_storeu_si256(o + 1, b1);
  }
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

// The bits of 16 float32 values (two vectors) rounded to odd at bfloat16's width, as 16-bit lanes
// holding values 0-3 8-11 | 4-7 12-15: the top half of each, its lowest bit set where the bottom
// half is not 0. Rounding that to E4M3's three mantissa bits to nearest even gives the float32
// value's rounding (eight bits, at least two more than three, keep every tie and every value
// beside one apart), and a nonzero value never becomes 0.
MANTISSA_AVX2 inline __m256i odd16(__m256i x0, __m256i x1) {
  // min_epu16 with 1 in each dword's low word and 0 in its high word: 1 where the low half is
  // not 0.
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i t0 = _mm256_or_si256(_mm256_srli_epi32(x0, 16), _mm256_min_epu16(x0, one));
  const __m256i t1 = _mm256_or_si256(_mm256_srli_epi32(x1, 16), _mm256_min_epu16(x1, one));
  return _mm256_packus_epi32(t0, t1);
}
MANTISSA_AVX2 inline __m256i odd16(const float* p) {
  return odd16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8)));
}

// The E4M3 code magnitudes (0x08-0x7E) of 16 bfloat16 magnitudes a (|h|) whose product by 2^e
// (e <= 120) is normal, in 16-bit lanes: codes16_pow2_in_range's rounding with its constant
// folded into the rebias where it can be. y = |h| - rebias + 7, subtracted with unsigned
// saturation so that 0 stays 0 (kFolded: k = rebias - 7, at least 121 where e <= 119; else
// k = rebias, and 7 added); rounding y - 7's four low bits to nearest even is (y + bit 4 of y) >>
// 4, as bit 4 of y - 7 differs only where those bits round up either way.
template <bool kFolded>
MANTISSA_AVX2 inline __m256i magnitudes16(__m256i a, __m256i k) {
  __m256i y = _mm256_subs_epu16(a, k);
  if (!kFolded) y = _mm256_add_epi16(y, _mm256_set1_epi16(7));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi16(y, 4), _mm256_set1_epi16(1));
  return _mm256_srli_epi16(_mm256_add_epi16(y, odd), 4);
}

// magnitudes16 of bfloat16 bits h; low: as codes16_pow2_in_range's (the minimum of |h| - 1).
template <bool kFolded>
MANTISSA_AVX2 inline __m256i magnitudes16(__m256i h, __m256i k, __m256i* low) {
  const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  *low = _mm256_min_epu16(*low, _mm256_sub_epi16(a, _mm256_set1_epi16(1)));
  return magnitudes16<kFolded>(a, k);
}

// magnitudes16 of bfloat16 bits h under per-column constants k; below gets nonzero lanes where
// 0 < |h| < normal_from (nf1: normal_from - 1 of each column).
template <bool kFolded>
MANTISSA_AVX2 inline __m256i column_magnitudes16(__m256i h, __m256i k, __m256i nf1,
                                                 __m256i* below) {
  const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  *below =
      _mm256_or_si256(*below, _mm256_subs_epu16(nf1, _mm256_sub_epi16(a, _mm256_set1_epi16(1))));
  return magnitudes16<kFolded>(a, k);
}

// The 32 code bytes of magnitudes m0, m1 with the signs of their bfloat16 bits h0, h1, in
// packus_epi16's order (each 128-bit lane: 8 of m0's, then 8 of m1's). packs_epi16's signed
// saturation gives a byte with bit 7 set exactly where h is negative (no NaN, whose bits could
// lie between -128 and -1).
MANTISSA_AVX2 inline __m256i signed_bytes32(__m256i m0, __m256i m1, __m256i h0, __m256i h1) {
  const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(-128));
  return _mm256_or_si256(_mm256_packus_epi16(m0, m1), sign);
}

// The 16-bit lanes of 16 values: bfloat16's bits, or float32's rounded to odd (odd16's order).
MANTISSA_AVX2 inline __m256i bits16(const uint16_t* p) { return load16(p); }
MANTISSA_AVX2 inline __m256i bits16(const float* p) { return odd16(p); }

// signed_bytes32's bytes of those lanes back in element order.
MANTISSA_AVX2 inline __m256i in_order(__m256i b, const uint16_t*) {
  return _mm256_permute4x64_epi64(b, 0xD8);
}
MANTISSA_AVX2 inline __m256i in_order(__m256i b, const float*) {
  return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 64 code bytes in element order.
struct Bytes64 {
  __m256i lo, hi;
};

// The 64-value steps of a row of bfloat16 or float32 values (T) under ls (ls.in_range): the
// codes of each step from magnitudes16 (float32 values rounded to odd at bfloat16's width,
// odd16), or from slow_step(p) where one of its values has a subnormal or flushed code; next:
// null, or the row read next, fetched a step at a time into L1 (a float32 row's into L2 where
// streamed: out of the caches, one thread, 4096 x 4096, the float32 rows then ran at 1.25 times
// the GB/s, while the bfloat16 rows ran at 0.95 times theirs and keep L1);
// stream: the codes past the caches (dst 32-byte aligned); bits(p): the 16-bit lanes of the 16
// values at p (bits16's). Returns the values cast (a multiple of 64).
template <typename T, bool kFolded, typename SlowStep, typename Bits>
MANTISSA_AVX2 inline int64_t cast_steps64(const T* src, uint8_t* dst, int64_t n,
                                          const LaneScale& ls, const T* next, bool stream,
                                          const SlowStep& slow_step, const Bits& bits) {
  const __m256i k = _mm256_set1_epi16(kFolded ? ls.rebias - 7 : ls.rebias);
  const __m256i normal_from = _mm256_set1_epi16(ls.normal_from);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const T* p = src + i;
    if (next) {  // the next row's lines at this place
      const char* ahead = reinterpret_cast<const char*>(next + i);
      for (int l = 0; l < 64 * static_cast<int>(sizeof(T)); l += 64) {
        if (sizeof(T) == 4 && stream)
          _mm_prefetch(ahead + l, _MM_HINT_T1);
        else
          _mm_prefetch(ahead + l, _MM_HINT_T0);
      }
    }
    const __m256i h0 = bits(p), h1 = bits(p + 16), h2 = bits(p + 32), h3 = bits(p + 48);
    __m256i low = _mm256_set1_epi16(-1);
    const __m256i m0 = magnitudes16<kFolded>(h0, k, &low);
    const __m256i m1 = magnitudes16<kFolded>(h1, k, &low);
    const __m256i m2 = magnitudes16<kFolded>(h2, k, &low);
    const __m256i m3 = magnitudes16<kFolded>(h3, k, &low);
    Bytes64 b{in_order(signed_bytes32(m0, m1, h0, h1), p),
              in_order(signed_bytes32(m2, m3, h2, h3), p)};
    if (detail::any_below(low, normal_from)) [[unlikely]]
      b = slow_step(p);
    store64(dst + i, b.lo, b.hi, stream);
  }
  if (stream) _mm_sfence();
  return i;
}

// bits16 as cast_steps64's `bits`.
struct Bits16 {
  template <typename T>
  MANTISSA_AVX2 __m256i operator()(const T* p) const {
    return bits16(p);
  }
};

// cast_steps64, folded where ls allows it (bits: bits16 unless given).
template <typename T, typename SlowStep, typename Bits>
MANTISSA_AVX2 inline int64_t cast_steps64(const T* src, uint8_t* dst, int64_t n,
                                          const LaneScale& ls, const T* next, bool stream,
                                          const SlowStep& slow_step, const Bits& bits) {
  return ls.rebias > 0 ? cast_steps64<T, true>(src, dst, n, ls, next, stream, slow_step, bits)
                       : cast_steps64<T, false>(src, dst, n, ls, next, stream, slow_step, bits);
}
template <typename T, typename SlowStep>
MANTISSA_AVX2 inline int64_t cast_steps64(const T* src, uint8_t* dst, int64_t n,
                                          const LaneScale& ls, const T* next, bool stream,
                                          const SlowStep& slow_step) {
  return cast_steps64(src, dst, n, ls, next, stream, slow_step, Bits16{});
}

// How far ahead of a column step its source lines are fetched into L2 (prefetcht1): every line
// of the 64 values 8 KiB on. On the hardware prefetchers alone the steps wait on their loads:
// out of the caches (4096 x 4096 float32, one thread) the cast pass took 0.6-0.65 of their CPU
// time with this fetch (6-24 KiB ahead alike), 0.8-0.95 fetched into L1 (2-8 KiB ahead), and
// 1.5 times as long fetching every other line only.
constexpr int kFetchAhead = 8192;

// The 64-column steps of a row of a bfloat16 or float32 matrix (T), columns [0, wide_cols), under
// each column's k (magnitudes16's) and normal_from - 1 (nf1), both in bits16's lane order: the
// codes of each step from column_magnitudes16, or from slow_step(c) where one of its values has
// a subnormal or flushed code; streamed: the codes past the caches (out 32-byte aligned); fetch:
// the source lines fetched kFetchAhead bytes ahead (a source beyond the caches).
template <bool kFolded, typename T, typename SlowStep>
MANTISSA_AVX2 inline void column_steps64(const T* in, uint8_t* out, int64_t wide_cols,
                                         const uint16_t* k, const uint16_t* nf1, bool streamed,
                                         bool fetch, const SlowStep& slow_step) {
  for (int64_t c = 0; c < wide_cols; c += 64) {
    if (fetch) fetch_group_lines_to_l2<static_cast<int>(sizeof(T)), kFetchAhead>(in + c);
    // Four named vectors, not arrays: GCC 12 keeps arrays of them on the stack in this loop.
    __m256i below = _mm256_setzero_si256();
    const auto magnitudes_at = [&](const __m256i& h, int64_t j) MANTISSA_AVX2 {
      return column_magnitudes16<kFolded>(h, load16(k + j), load16(nf1 + j), &below);
    };
    const __m256i h0 = bits16(in + c), h1 = bits16(in + c + 16), h2 = bits16(in + c + 32),
                  h3 = bits16(in + c + 48);
    const __m256i m0 = magnitudes_at(h0, c), m1 = magnitudes_at(h1, c + 16),
                  m2 = magnitudes_at(h2, c + 32), m3 = magnitudes_at(h3, c + 48);
    Bytes64 b{in_order(signed_bytes32(m0, m1, h0, h1), in),
              in_order(signed_bytes32(m2, m3, h2, h3), in)};
    if (!_mm256_testz_si256(below, below)) [[unlikely]]
      b = slow_step(c);
    store64(out + c, b.lo, b.hi, streamed);
  }
}
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
                                  float amax, CastStats* stats, const uint16_t* next, bool stream) {
  LaneScale ls{};
  if (!lane_scale(scale, amax, &ls)) return false;
  const __m256i exponent_add = _mm256_set1_epi16(ls.exponent_add);
  const __m256i normal_from = _mm256_set1_epi16(ls.normal_from);
  const __m256 s = _mm256_set1_ps(scale);
  Counts counts;
  int64_t i = 0;
  // 64 values a step through magnitudes16; a step holding a value whose code is subnormal or
  // flushed is cast again as the 16-value steps below cast it.
  if (ls.in_range) {
    stream = stream && reinterpret_cast<uintptr_t>(dst) % 32 == 0;
    const auto slow_step = [&](const uint16_t* p) MANTISSA_AVX2 {
      __m256i c[4];
      for (int v = 0; v < 4; ++v) {
        const __m256i h = load16(p + 16 * v);
        int slow = 0;
        c[v] = codes16(h, exponent_add, normal_from, &slow);
        if (slow) c[v] = exact16(h, s, s, counts);
      }
      return Bytes64{detail::pack32_bytes16(c[0], c[1]), detail::pack32_bytes16(c[2], c[3])};
    };
    i = cast_steps64(src, dst, n, ls, next, stream, slow_step);
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

MANTISSA_AVX2 bool f32_amax_without_nan(const float* src, int64_t n, float* amax) {
  // The largest magnitude bits (a NaN's lie above infinity's), two vectors a step.
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_epi32(
        m0, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)), abs));
    m1 = _mm256_max_epi32(
        m1,
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8)), abs));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_max_epi32(m0, m1));
  uint32_t m = 0;
  for (uint32_t l : lanes) m = std::max(m, l);
  for (; i < n; ++i) m = std::max(m, std::bit_cast<uint32_t>(src[i]) & 0x7FFFFFFFu);
  if (m > 0x7F800000u) return false;
  *amax = std::bit_cast<float>(m);
  return true;
}

namespace {
// The 64 codes of float32 values p[0, 64) times s in float32 lanes (a step holding a subnormal or
// flushed code), counted.
MANTISSA_AVX2 Bytes64 exact64(const float* p, __m256 s, Counts& counts) {
  __m256i c[8];
  for (int v = 0; v < 8; ++v) c[v] = exact8(_mm256_loadu_ps(p + 8 * v), s, counts);
  return Bytes64{detail::pack32_bytes(c[0], c[1], c[2], c[3]),
                 detail::pack32_bytes(c[4], c[5], c[6], c[7])};
}

// A float32 cast's values [i, n) past its 64-value steps, then its statistics.
MANTISSA_AVX2 void finish_f32(const float* src, uint8_t* dst, int64_t i, int64_t n, float scale,
                              float amax, Counts& counts, CastStats* stats) {
  if (i < n) {
    const CastStats tail =
        detail::scaled_cast_avx2(src + i, kFloat32, dst + i, n - i, scale, kFloat8_e4m3fn);
    counts.saturated += tail.saturated;
    counts.flushed += tail.flushed;
  }
  stats->amax = amax;
  stats->saturated = counts.saturated;
  stats->flushed = counts.flushed;
}
}  // namespace

MANTISSA_AVX2 bool cast_f32_pow2(const float* src, uint8_t* dst, int64_t n, float scale, float amax,
                                 CastStats* stats, const float* next, bool stream) {
  stream = stream && reinterpret_cast<uintptr_t>(dst) % 32 == 0;
  LaneScale ls{};
  if (!lane_scale(scale, amax, &ls) || !ls.in_range) return false;
  const __m256 s = _mm256_set1_ps(scale);
  Counts counts;
  // A subnormal or flushed code among a step's values: the 64 in float32 lanes.
  const auto slow_step = [&](const float* p) MANTISSA_AVX2 { return exact64(p, s, counts); };
  const int64_t i = cast_steps64(src, dst, n, ls, next, stream, slow_step);
  finish_f32(src, dst, i, n, scale, amax, counts, stats);
  return true;
}

MANTISSA_AVX2 bool cast_f32_scaled(const float* src, uint8_t* dst, int64_t n, float scale,
                                   float amax, CastStats* stats, bool stream) {
  stream = stream && reinterpret_cast<uintptr_t>(dst) % 32 == 0;
  // y = x * scale never exceeds amax * scale (rounding is monotonic), and is 0 only where x is
  // (scale >= 1): y's codes are those of y under the scale 1, nothing saturates, and a value
  // flushes only where y's code is subnormal or 0, a step that slow_step casts again.
  LaneScale ls{};
  if (!(scale >= 1.0f) || !lane_scale(1.0f, amax * scale, &ls)) return false;
  const __m256 s = _mm256_set1_ps(scale);
  Counts counts;
  const auto slow_step = [&](const float* p) MANTISSA_AVX2 { return exact64(p, s, counts); };
  const auto products = [s](const float* p) MANTISSA_AVX2 {
    return odd16(_mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(p), s)),
                 _mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(p + 8), s)));
  };
  const int64_t i = cast_steps64(src, dst, n, ls, static_cast<const float*>(nullptr), stream,
                                 slow_step, products);
  finish_f32(src, dst, i, n, scale, amax, counts, stats);
  return true;
}

namespace {
// Raises m[c] (a column's largest magnitude bits) with `rows` rows of the matrix from src.
MANTISSA_AVX2 void bf16_column_bits(const uint16_t* src, int64_t rows, int64_t cols, int16_t* m) {
  // Row by row through the matrix (in memory order), four rows a step, each column's running
  // maximum of the magnitude bits in a buffer that stays in L1.
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  const int64_t vec_cols = cols / 16 * 16;
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
    int t = m[c];
    for (int64_t k = 0; k < rows; ++k) t = std::max(t, src[k * cols + c] & 0x7FFF);
    m[c] = static_cast<int16_t>(t);
  }
}
}  // namespace

bool bf16_column_amax_without_nan(const uint16_t* src, int64_t rows, int64_t cols, float* amax) {
  AlignedVector<int16_t> best(static_cast<size_t>(cols), 0);
  column_maxima_in_bands(rows, cols, rows * cols > kChunk, best.data(),
                         [src, cols](int64_t r0, int64_t n, int16_t* m) {
                           bf16_column_bits(src + r0 * cols, n, cols, m);
                         });
  for (int64_t c = 0; c < cols; ++c) {
    if (best[c] > 0x7F80) return false;
    amax[c] = bf16_value(best[c]);
  }
  return true;
}

MANTISSA_AVX2 bool cast_columns_bf16_pow2(const uint16_t* src, uint8_t* dst, int64_t rows,
                                          int64_t cols, const float* scales, const float* amax,
                                          CastStats* stats) {
  const int64_t vec_cols = cols / 16 * 16;
  AlignedVector<int16_t> exponent_add(static_cast<size_t>(vec_cols)),
      normal_from(static_cast<size_t>(vec_cols)), rebias(static_cast<size_t>(vec_cols));
  float largest = 0.0f;
  bool in_range = true;
  for (int64_t c = 0; c < cols; ++c) {
    LaneScale ls{};
    if (!lane_scale(scales[c], amax[c], &ls)) return false;
    if (c < vec_cols) {
      exponent_add[static_cast<size_t>(c)] = ls.exponent_add;
      normal_from[static_cast<size_t>(c)] = ls.normal_from;
      rebias[static_cast<size_t>(c)] = ls.rebias;
      in_range = in_range && ls.in_range;
    }
    largest = std::max(largest, amax[c]);
  }
  // 64 columns a step through column_magnitudes16 where every column's scale allows it, its
  // rounding constant folded into each column's k where every column allows that.
  const int64_t wide_cols = in_range ? vec_cols / 64 * 64 : 0;
  const bool folded = std::all_of(rebias.begin(), rebias.end(), [](int16_t r) { return r > 0; });
  const bool stream = rows * cols >= kStreamCodesFrom;  // common/stream_codes.h
  const auto* ea = reinterpret_cast<const uint16_t*>(exponent_add.data());
  const auto* nf = reinterpret_cast<const uint16_t*>(normal_from.data());
  AlignedVector<int16_t> normal_from_less_1(static_cast<size_t>(vec_cols)), k(rebias);
  for (size_t c = 0; c < normal_from.size(); ++c) {
    normal_from_less_1[c] = static_cast<int16_t>(normal_from[c] - 1);
    if (folded) k[c] = static_cast<int16_t>(rebias[c] - 7);
  }
  const auto* nf1 = reinterpret_cast<const uint16_t*>(normal_from_less_1.data());
  const auto* kc = reinterpret_cast<const uint16_t*>(k.data());
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(+ : saturated, flushed) if (rows * cols > kChunk)
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* in = src + r * cols;
    uint8_t* out = dst + r * cols;
    const bool streamed = stream && reinterpret_cast<uintptr_t>(out) % 32 == 0;
    Counts counts;
    // The 16 codes of columns c.. by codes16_pow2, in float32 lanes where one is subnormal.
    const auto codes_at = [&](int64_t c) MANTISSA_AVX2 {
      const __m256i h = load16(in + c);
      int slow = 0;
      const __m256i code = codes16(h, load16(ea + c), load16(nf + c), &slow);
      return slow ? exact16(h, _mm256_loadu_ps(scales + c), _mm256_loadu_ps(scales + c + 8), counts)
                  : code;
    };
    const auto slow_step = [&](int64_t c) MANTISSA_AVX2 {
      return Bytes64{detail::pack32_bytes16(codes_at(c), codes_at(c + 16)),
                     detail::pack32_bytes16(codes_at(c + 32), codes_at(c + 48))};
    };
    if (folded)
      column_steps64<true>(in, out, wide_cols, kc, nf1, streamed, stream, slow_step);
    else
      column_steps64<false>(in, out, wide_cols, kc, nf1, streamed, stream, slow_step);
    int64_t c = wide_cols;
    for (; c < vec_cols; c += 16) store16(out + c, codes_at(c));
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
  if (stream) _mm_sfence();
  stats->amax = largest;
  stats->saturated = saturated;
  stats->flushed = flushed;
  return true;
}

MANTISSA_AVX2 bool cast_columns_f32_pow2(const float* src, uint8_t* dst, int64_t rows, int64_t cols,
                                         const float* scales, const float* amax, CastStats* stats) {
  const int64_t wide_cols = cols / 64 * 64;
  // Each column's k (magnitudes16's) and normal_from - 1 in odd16's order of its 16 (0-3 8-11
  // 4-7 12-15).
  AlignedVector<int16_t> rebias(static_cast<size_t>(wide_cols)),
      normal_from_less_1(static_cast<size_t>(wide_cols));
  float largest = 0.0f;
  for (int64_t c = 0; c < cols; ++c) {
    LaneScale ls{};
    if (!lane_scale(scales[c], amax[c], &ls) || !ls.in_range) return false;
    if (c < wide_cols) {
      const int64_t j = c % 16, lane = c - j + (j / 4 == 1 ? j + 4 : j / 4 == 2 ? j - 4 : j);
      rebias[static_cast<size_t>(lane)] = ls.rebias;
      normal_from_less_1[static_cast<size_t>(lane)] = static_cast<int16_t>(ls.normal_from - 1);
    }
    largest = std::max(largest, amax[c]);
  }
  const bool folded = std::all_of(rebias.begin(), rebias.end(), [](int16_t r) { return r > 0; });
  AlignedVector<int16_t> k(rebias);
  if (folded)
    for (int16_t& v : k) v = static_cast<int16_t>(v - 7);
  const bool stream = rows * cols >= kStreamCodesFrom;
  const auto* kc = reinterpret_cast<const uint16_t*>(k.data());
  const auto* nf1 = reinterpret_cast<const uint16_t*>(normal_from_less_1.data());
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(+ : saturated, flushed) if (rows * cols > kChunk)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * cols;
    uint8_t* out = dst + r * cols;
    const bool streamed = stream && reinterpret_cast<uintptr_t>(out) % 32 == 0;
    Counts counts;
    // A subnormal or flushed code among them: the 64 in float32 lanes.
    const auto slow_step = [&](int64_t c) MANTISSA_AVX2 {
      __m256i e[8];
      for (int v = 0; v < 8; ++v)
        e[v] = exact8(_mm256_loadu_ps(in + c + 8 * v), _mm256_loadu_ps(scales + c + 8 * v), counts);
      return Bytes64{detail::pack32_bytes(e[0], e[1], e[2], e[3]),
                     detail::pack32_bytes(e[4], e[5], e[6], e[7])};
    };
    if (folded)
      column_steps64<true>(in, out, wide_cols, kc, nf1, streamed, stream, slow_step);
    else
      column_steps64<false>(in, out, wide_cols, kc, nf1, streamed, stream, slow_step);
    if (wide_cols < cols) {
      const CastStats tail =
          detail::scaled_cast_each_avx2(in + wide_cols, kFloat32, out + wide_cols, cols - wide_cols,
                                        scales + wide_cols, kFloat8_e4m3fn);
      counts.saturated += tail.saturated;
      counts.flushed += tail.flushed;
    }
    saturated += counts.saturated;
    flushed += counts.flushed;
  }
  if (stream) _mm_sfence();
  stats->amax = largest;
  stats->saturated = saturated;
  stats->flushed = flushed;
  return true;
}

}  // namespace mantissa::kernels::fp8
