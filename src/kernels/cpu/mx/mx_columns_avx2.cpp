// AVX2 (+FMA, F16C) bodies of the MX casts with blocks along the columns (mx_quantize_columns),
// which the AVX-512 level runs too: a band of 32 rows read as it lies, in chunks of
// columns (kChunkBytes of the band), twice: each column's amax (and, for FP8, its least nonzero
// magnitude) as vertical maxima of the magnitude bits row by row, then, from the chunk in cache,
// each row's codes under its columns' constants, written in the source's layout. FP8 codes are
// cast on the source's bits (16-bit lanes for bfloat16, 32-bit for float32) under power-of-2
// multipliers, one a lane; E2M1 codes under the floor by a byte table of the E2M1 steps (an
// offset a column), under rceil in float32 lanes. A column whose block the lanes do not
// cast (an infinite or NaN amax, a multiplier that is not a normal power of 2, a nonzero element
// below the normal codes) is encoded again by the scalar body (encode_column_block_scalar).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/common/stream_codes.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// The bytes of a band's chunk: its 32 rows are read once from memory and once from L2.
constexpr int64_t kChunkBytes = 256 * 1024;

// The next chunk, fetched into L2 a line with each 64 bytes of source the current chunk's
// second pass reads (a burst of fetches is dropped where the miss buffers are full), so that its
// first pass reads from L2.
struct Ahead {
  const char* base = nullptr;  // row 0's first byte; null: nothing to fetch
  int64_t row_bytes = 0;
  int64_t ld_bytes = 0;
  int rows = 0;
  int row = 0;
  int64_t at = 0;  // the next line's offset in `row`
  [[gnu::always_inline]] void next() {
    if (row >= rows) return;
    _mm_prefetch(base + row * ld_bytes + at, _MM_HINT_T1);
    at += 64;
    if (at >= row_bytes) {
      at = 0;
      ++row;
    }
  }
};

// The 16-bit lanes' constants of 16 columns' blocks (column j in lane j) from their amax bits
// (float32 bits, NaN above 0x7F800000) and multipliers, for column_codes16: `round` the
// exponent add 2^e of the multiplier with the rounding bias and the rebias to the code folded
// in, `from` lane_constants's smallest |x| bits with a normal code, `sat_above` the largest |x|
// bits whose product does not exceed the element max (0x7FFF: none does). Returns the columns
// that need the float32 path (bit j: an infinite or NaN amax, a multiplier that is not a normal
// power of 2 or is above 2^(127 - kBias), under which a zero's code would not be 0), whose lanes
// get from = 0x7FFF and no saturation.
template <Element E>
inline unsigned column_constants16(const uint32_t* bits, const float* mul, __m256i& round,
                                   __m256i& from, __m256i& sat_above) {
  using L = Bf16Lanes<E>;
  constexpr int kDrop = 7 - L::kMant;
  constexpr int kMaxBits = (L::kMaxCode + ((127 - L::kBias) << L::kMant)) << kDrop;
  constexpr int kRound = (1 << (kDrop - 1)) - 1 - (((127 - L::kBias) << L::kMant) << kDrop);
  __m256i r[2], f[2], t[2];
  unsigned fallback = 0;
  for (int h = 0; h < 2; ++h) {
    const __m256i mb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mul + 8 * h));
    const __m256i ab = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 * h));
    const __m256i field = _mm256_srli_epi32(mb, 23);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i bad = _mm256_or_si256(
        _mm256_or_si256(
            _mm256_xor_si256(
                _mm256_cmpeq_epi32(_mm256_and_si256(mb, _mm256_set1_epi32(0x807FFFFF)), zero),
                _mm256_set1_epi32(-1)),
            _mm256_cmpgt_epi32(ab, _mm256_set1_epi32(0x7F7FFFFF))),
        _mm256_or_si256(_mm256_cmpeq_epi32(field, zero),
                        _mm256_cmpgt_epi32(field, _mm256_set1_epi32(254 - L::kBias))));
    const __m256i e = _mm256_sub_epi32(field, _mm256_set1_epi32(127));
    const __m256i add = _mm256_slli_epi32(e, 7);
    const __m256i none = _mm256_set1_epi32(0x7FFF);
    r[h] = _mm256_andnot_si256(bad, _mm256_add_epi32(add, _mm256_set1_epi32(kRound)));
    f[h] = _mm256_blendv_epi8(
        _mm256_max_epi32(
            _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(128 - L::kBias), e), 7),
            _mm256_set1_epi32(0x80)),
        none, bad);
    t[h] = _mm256_blendv_epi8(
        _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(kMaxBits), add), none), none, bad);
    fallback |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(bad))) << (8 * h);
  }
  // packs works within 128-bit lanes: [lanes 0-3, 8-11 | 4-7, 12-15] before the permute.
  round = _mm256_permute4x64_epi64(_mm256_packs_epi32(r[0], r[1]), 0xD8);
  from = _mm256_permute4x64_epi64(_mm256_packs_epi32(f[0], f[1]), 0xD8);
  sat_above = _mm256_permute4x64_epi64(_mm256_packs_epi32(t[0], t[1]), 0xD8);
  return fallback;
}

// The 32-bit lanes' constants of 8 columns' blocks (column j in lane j) from their amax bits
// and multipliers, column_constants16's for a float32 source: `round` the exponent add e << 23
// with the rounding bias and the rebias folded in, `from` the smallest |x| bits with a normal
// code (at least float32's smallest normal), `sat_above` the largest |x| bits whose product does
// not exceed the element max. `bad` gets -1 in the lanes that need the row-wise body (an infinite
// or NaN amax, a multiplier that is not a normal power of 2 or is above 2^(127 - kBias)), whose
// lanes get round 0, from and sat_above 0x7FFFFFFF.
template <Element E>
[[gnu::always_inline]] inline void column_constants32(__m256i amax, const float* mul,
                                                      __m256i& round, __m256i& from,
                                                      __m256i& sat_above, __m256i& bad) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr int kBias = Bf16Lanes<E>::kBias;
  constexpr int kDrop = 23 - Bf16Lanes<E>::kMant;
  constexpr int kRound = (1 << (kDrop - 1)) - 1 - ((127 - kBias) << 23);
  const __m256i mb = _mm256_castps_si256(_mm256_loadu_ps(mul));
  const __m256i field = _mm256_srli_epi32(mb, 23);
  const __m256i zero = _mm256_setzero_si256();
  bad = _mm256_or_si256(
      _mm256_or_si256(
          _mm256_xor_si256(
              _mm256_cmpeq_epi32(_mm256_and_si256(mb, _mm256_set1_epi32(0x807FFFFF)), zero),
              _mm256_set1_epi32(-1)),
          _mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF))),
      _mm256_or_si256(_mm256_cmpeq_epi32(field, zero),
                      _mm256_cmpgt_epi32(field, _mm256_set1_epi32(254 - kBias))));
  const __m256i e = _mm256_sub_epi32(field, _mm256_set1_epi32(127));
  const __m256i add = _mm256_slli_epi32(e, 23);
  const __m256i none = _mm256_set1_epi32(0x7FFFFFFF);
  round = _mm256_andnot_si256(bad, _mm256_add_epi32(add, _mm256_set1_epi32(kRound)));
  // e <= 127 - kBias: (128 - kBias - e) << 23 is at least float32's smallest normal.
  from = _mm256_blendv_epi8(
      _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(128 - kBias), e), 23), none, bad);
  sat_above = _mm256_blendv_epi8(
      _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int32_t>(bits_of(lim.max))), add), none, bad);
}

// 32 code bytes to p, past the caches where `stream` (p then 32-byte aligned).
[[gnu::always_inline]] inline void store_codes(uint8_t* p, __m256i v, bool stream) {
  if (stream)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

// The FP8 magnitude codes of 16 bfloat16 values (bits h) under their lanes' constants
// (column_constants16), before the element's largest code caps them; a zero's is 0 or below.
// With kStats, `sat` counts (subtracts -1 in) the lanes above sat_above.
template <Element E, bool kStats>
[[gnu::always_inline]] inline __m256i codes16(__m256i h, __m256i round, __m256i sat_above,
                                              __m256i& sat) {
  constexpr int kDrop = 7 - Bf16Lanes<E>::kMant;
  const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  // Round to nearest even on the dropped bits: bit kDrop of |x| is that of |x| * 2^e.
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(h, kDrop), _mm256_set1_epi16(1));
  if constexpr (kStats) sat = _mm256_add_epi16(sat, _mm256_cmpgt_epi16(a, sat_above));
  return _mm256_srai_epi16(_mm256_add_epi16(_mm256_add_epi16(a, lsb), round), kDrop);
}

// The same for 8 float32 values (bits v) under column_constants32's constants.
template <Element E, bool kStats>
[[gnu::always_inline]] inline __m256i codes32(__m256i v, __m256i round, __m256i sat_above,
                                              __m256i& sat) {
  constexpr int kDrop = 23 - Bf16Lanes<E>::kMant;
  const __m256i a = _mm256_and_si256(v, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, kDrop), _mm256_set1_epi32(1));
  if constexpr (kStats) sat = _mm256_add_epi32(sat, _mm256_cmpgt_epi32(a, sat_above));
  return _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(a, lsb), round), kDrop);
}

// The scales of 8 columns from their amax bits (float32 bits, NaN above 0x7F800000), written to
// scale[0..7], their multipliers to mul[0..7].
template <Element E, E8m0Rounding R>
[[gnu::always_inline]] inline void scales8(__m256i bits, uint8_t* scale, float* mul) {
  alignas(8) uint8_t s[8];
  all_block_scales8<E, R>(bits, s, mul);
  std::memcpy(scale, s, 8);
}

// Each column's MxStatsRun record of a block cast in the lanes (amax bits finite).
template <Element E, DType::Id kSrc>
[[gnu::always_inline]] inline void record_columns(MxStatsRun* runs, const uint32_t* bits,
                                                  const uint8_t* s, const float* mul, int n,
                                                  unsigned fallback) {
  for (int j = 0; j < n; ++j)
    if (!((fallback >> j) & 1u)) record_block<E, kSrc>(runs[j], nullptr, 0, bits[j], s[j], mul[j]);
}

// A bfloat16 band's FP8 codes: chunks of `width` columns (a multiple of 32) from column c0.
template <Element E, E8m0Rounding R, bool kStats>
void fp8_chunk_bf16(const uint16_t* src, int64_t ld, int n, int64_t c0, int64_t width,
                    uint8_t* codes, int64_t code_row, uint8_t* scale_row, MxStatsRun* runs,
                    int64_t& saturated, Ahead ahead, bool stream) {
  using L = Bf16Lanes<E>;
  constexpr int64_t kMax = kChunkBytes / (kMxBlock * 2) / 16;
  alignas(32) __m256i amax[kMax], lowest[kMax], round[kMax], sat_above[kMax];
  const int64_t groups = width / 16;
  for (int64_t g = 0; g < groups; ++g) {
    amax[g] = _mm256_setzero_si256();
    lowest[g] = _mm256_set1_epi16(-1);
  }
  // Pass 1: the columns' largest magnitude bits and least |x| - 1 (0xFFFF for a zero).
  for (int k = 0; k < n; ++k) {
    const uint16_t* row = src + k * ld + c0;
    for (int64_t g = 0; g < groups; ++g) {
      const __m256i a = _mm256_and_si256(load16_bits(row + 16 * g), _mm256_set1_epi16(0x7FFF));
      amax[g] = _mm256_max_epi16(amax[g], a);
      lowest[g] = _mm256_min_epu16(lowest[g], _mm256_add_epi16(a, _mm256_set1_epi16(-1)));
    }
  }
  // The columns' scales and lane constants; the columns the lanes do not cast (bit j of
  // fallback[g]) get sat_above 0x7FFF (their statistics are the scalar body's).
  alignas(32) uint32_t fallback[kMax];
  for (int64_t g = 0; g < groups; ++g) {
    alignas(32) uint32_t bits[16];
    alignas(32) float mul[16];
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(bits),
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(amax[g])), 16));
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(bits + 8),
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(amax[g], 1)), 16));
    uint8_t* s = scale_row + c0 + 16 * g;
    scales8<E, R>(_mm256_load_si256(reinterpret_cast<const __m256i*>(bits)), s, mul);
    scales8<E, R>(_mm256_load_si256(reinterpret_cast<const __m256i*>(bits + 8)), s + 8, mul + 8);
    __m256i from;
    unsigned fb = column_constants16<E>(bits, mul, round[g], from, sat_above[g]);
    // Lanes with a nonzero |x| below `from`: lowest < from - 1 (unsigned).
    const __m256i fine = _mm256_cmpeq_epi16(
        _mm256_subs_epu16(_mm256_sub_epi16(from, _mm256_set1_epi16(1)), lowest[g]),
        _mm256_setzero_si256());
    const auto fine_bits =
        static_cast<unsigned>(_mm256_movemask_epi8(_mm256_packs_epi16(fine, fine)));
    fb |= ~((fine_bits & 0xFFu) | ((fine_bits >> 8) & 0xFF00u)) & 0xFFFFu;
    fallback[g] = fb;
    if (fb) {
      alignas(32) uint16_t lanes[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sat_above[g]);
      for (int j = 0; j < 16; ++j)
        if ((fb >> j) & 1u) lanes[j] = 0x7FFF;
      sat_above[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    }
    if constexpr (kStats)
      record_columns<E, DType::Id::bf16>(runs + c0 + 16 * g, bits, s, mul, 16, fb);
  }
  // Pass 2: each row's codes, two groups (32 columns, 32 bytes) a step.
  __m256i sat = _mm256_setzero_si256();
  for (int k = 0; k < n; ++k) {
    const uint16_t* row = src + k * ld + c0;
    uint8_t* out = codes + k * code_row + c0;
    for (int64_t g = 0; g < groups; g += 2) {
      ahead.next();
      const __m256i h0 = load16_bits(row + 16 * g), h1 = load16_bits(row + 16 * g + 16);
      const __m256i x0 = codes16<E, kStats>(h0, round[g], sat_above[g], sat);
      const __m256i x1 = codes16<E, kStats>(h1, round[g + 1], sat_above[g + 1], sat);
      // packs keeps each value's sign in its byte's top bit; packus the codes (a zero's
      // negative ones to 0), capped at the element's largest.
      const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(-128));
      const __m256i c = _mm256_min_epu8(_mm256_packus_epi16(x0, x1), _mm256_set1_epi8(L::kMaxCode));
      store_codes(out + 16 * g, _mm256_permute4x64_epi64(_mm256_or_si256(c, sign), 0xD8), stream);
    }
    // A lane counts at most 32 rows of 64 groups: within 16 bits.
    if constexpr (kStats)
      if ((k & 31) == 31 || k == n - 1) {
        saturated -= lane_sum(_mm256_madd_epi16(sat, _mm256_set1_epi16(1)));
        sat = _mm256_setzero_si256();
      }
  }
  // The streamed codes reach memory before the scalar body's stores overwrite some of them.
  bool fenced = !stream;
  for (int64_t g = 0; g < groups; ++g)
    for (unsigned f = fallback[g]; f; f &= f - 1) {
      if (!fenced) {
        _mm_sfence();
        fenced = true;
      }
      const int64_t c = c0 + 16 * g + __builtin_ctz(f);
      encode_column_block_scalar(src, DType{DType::Id::bf16}, ld, n, c, E, R, codes, code_row,
                                 scale_row + c, kStats ? runs + c : nullptr);
    }
}

// A float32 band's FP8 codes: chunks of `width` columns (a multiple of 32) from column c0.
template <Element E, E8m0Rounding R, bool kStats>
void fp8_chunk_f32(const float* src, int64_t ld, int n, int64_t c0, int64_t width, uint8_t* codes,
                   int64_t code_row, uint8_t* scale_row, MxStatsRun* runs, int64_t& saturated,
                   Ahead ahead, bool stream) {
  using L = Bf16Lanes<E>;
  constexpr int64_t kMax = kChunkBytes / (kMxBlock * 4) / 8;
  alignas(32) __m256i amax[kMax], lowest[kMax], round[kMax], sat_above[kMax];
  const int64_t groups = width / 8;
  for (int64_t g = 0; g < groups; ++g) {
    amax[g] = _mm256_setzero_si256();
    lowest[g] = _mm256_set1_epi32(-1);
  }
  for (int k = 0; k < n; ++k) {
    const float* row = src + k * ld + c0;
    for (int64_t g = 0; g < groups; ++g) {
      const __m256i a =
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 8 * g)),
                           _mm256_set1_epi32(0x7FFFFFFF));
      amax[g] = _mm256_max_epi32(amax[g], a);
      lowest[g] = _mm256_min_epu32(lowest[g], _mm256_add_epi32(a, _mm256_set1_epi32(-1)));
    }
  }
  alignas(32) uint32_t fallback[kMax];
  for (int64_t g = 0; g < groups; ++g) {
    alignas(32) uint32_t bits[8];
    alignas(32) float mul[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax[g]);
    uint8_t* s = scale_row + c0 + 8 * g;
    scales8<E, R>(amax[g], s, mul);
    __m256i from, bad;
    column_constants32<E>(amax[g], mul, round[g], from, sat_above[g], bad);
    // The lanes cast here: a normal multiplier in range and no nonzero |x| below `from`.
    const __m256i floor = _mm256_sub_epi32(from, _mm256_set1_epi32(1));
    const __m256i fine =
        _mm256_andnot_si256(bad, _mm256_cmpeq_epi32(_mm256_max_epu32(lowest[g], floor), lowest[g]));
    const unsigned fb =
        ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(fine))) & 0xFFu;
    sat_above[g] = _mm256_blendv_epi8(_mm256_set1_epi32(0x7FFFFFFF), sat_above[g], fine);
    fallback[g] = fb;
    if constexpr (kStats) record_columns<E, DType::Id::f32>(runs + c0 + 8 * g, bits, s, mul, 8, fb);
  }
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i sat = _mm256_setzero_si256();
  for (int k = 0; k < n; ++k) {
    const float* row = src + k * ld + c0;
    uint8_t* out = codes + k * code_row + c0;
    for (int64_t g = 0; g < groups; g += 4) {
      ahead.next();
      ahead.next();
      __m256i v[4], c[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        v[q] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 8 * (g + q)));
        c[q] = codes32<E, kStats>(v[q], round[g + q], sat_above[g + q], sat);
      }
      // packus makes a zero's negative code 0; packs keeps each value's sign in its top bit.
      const __m256i codes8 = _mm256_min_epu8(
          _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3])),
          _mm256_set1_epi8(L::kMaxCode));
      const __m256i sign =
          _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      const __m256i bytes = _mm256_or_si256(codes8, _mm256_and_si256(sign, _mm256_set1_epi8(-128)));
      store_codes(out + 8 * g, _mm256_permutevar8x32_epi32(bytes, order), stream);
    }
  }
  if constexpr (kStats) saturated -= lane_sum(sat);
  // The streamed codes reach memory before the scalar body's stores overwrite some of them.
  bool fenced = !stream;
  for (int64_t g = 0; g < groups; ++g)
    for (unsigned f = fallback[g]; f; f &= f - 1) {
      if (!fenced) {
        _mm_sfence();
        fenced = true;
      }
      const int64_t c = c0 + 8 * g + __builtin_ctz(f);
      encode_column_block_scalar(src, DType{DType::Id::f32}, ld, n, c, E, R, codes, code_row,
                                 scale_row + c, kStats ? runs + c : nullptr);
    }
}

// A band's E2M1 codes in float32 lanes (encode_block's arithmetic with a multiplier a lane):
// chunks of `width` columns (a multiple of 32) from column c0. A rceil column whose amax is NaN
// (a NaN multiplier) goes to the scalar body.
template <E8m0Rounding R, bool kStats, DType::Id kSrc>
void e2m1_chunk(const void* src, int64_t ld, int n, int64_t c0, int64_t width, uint8_t* codes,
                int64_t code_row, uint8_t* scale_row, MxStatsRun* runs, int64_t& saturated,
                int64_t& flushed, Ahead ahead) {
  constexpr Element E = Element::kE2m1;
  constexpr int64_t kItem = kSrc == DType::Id::f32 ? 4 : 2;
  constexpr int64_t kMax = kChunkBytes / (kMxBlock * kItem) / 8;
  const DType dtype{kSrc};
  alignas(32) __m256i amax[kMax];
  alignas(32) float mul[kMax * 8];
  const int64_t groups = width / 8;
  for (int64_t g = 0; g < groups; ++g) amax[g] = _mm256_setzero_si256();
  for (int k = 0; k < n; ++k)
    for (int64_t g = 0; g < groups; ++g)
      amax[g] = _mm256_max_epi32(amax[g], abs_bits8<kSrc>(src, k * ld + c0 + 8 * g));
  alignas(32) uint32_t fallback[kMax];
  for (int64_t g = 0; g < groups; ++g) {
    alignas(32) uint32_t bits[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax[g]);
    uint8_t* s = scale_row + c0 + 8 * g;
    scales8<E, R>(amax[g], s, mul + 8 * g);
    unsigned fb = 0;
    for (int j = 0; j < 8; ++j) {
      if (R == E8m0Rounding::kRceil && s[j] == kE8m0Nan) {
        fb |= 1u << j;
        mul[8 * g + j] = 0.0f;  // lanes the scalar body redoes
      }
      if (kStats && bits[j] > 0x7F800000u && !((fb >> j) & 1u)) {
        float a = 0.0f;  // the column's amax, NaN passed over
        for (int k = 0; k < n; ++k) {
          const float v = std::fabs(load(src, dtype, k * ld + c0 + 8 * g + j));
          a = v > a ? v : a;
        }
        bits[j] = bits_of(a);
      }
    }
    fallback[g] = fb;
    if constexpr (kStats) record_columns<E, kSrc>(runs + c0 + 8 * g, bits, s, mul + 8 * g, 8, fb);
  }
  constexpr bool clamp = R == E8m0Rounding::kRceil;
  __m256i sat = _mm256_setzero_si256(), flush = _mm256_setzero_si256();
  for (int k = 0; k < n; ++k) {
    uint8_t* out = codes + k * code_row + c0 / 2;
    for (int64_t g = 0; g < groups; ++g) {
      if (kItem == 4 || g % 2 == 0) ahead.next();
      const __m256 x = load8(src, dtype, k * ld + c0 + 8 * g);
      __m256 y = _mm256_mul_ps(x, _mm256_load_ps(mul + 8 * g));
      if constexpr (kStats)
        sat = _mm256_sub_epi32(
            sat, _mm256_castps_si256(_mm256_cmp_ps(abs8(y), _mm256_set1_ps(kE2m1Max), _CMP_GT_OQ)));
      if constexpr (clamp) y = clamp8(y, kE2m1Max);
      const __m256i c = e2m1_codes(y);
      store_e2m1(out + 4 * g, c);
      if constexpr (kStats) {
        const __m256i zero_code =
            _mm256_cmpeq_epi32(_mm256_and_si256(c, _mm256_set1_epi32(7)), _mm256_setzero_si256());
        const __m256i nonzero =
            _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_OQ));
        flush = _mm256_sub_epi32(flush, _mm256_and_si256(zero_code, nonzero));
      }
    }
  }
  for (int64_t g = 0; g < groups; ++g)
    for (unsigned f = fallback[g]; f; f &= f - 1) {
      const int j = __builtin_ctz(f);
      const int64_t c = c0 + 8 * g + j;
      if constexpr (kStats) {  // the vector lanes' counts of the column, taken back
        // A NaN multiplier's lanes ran with 0: their y is 0 or NaN, none saturated; flushed
        // counts the nonzero finite elements, which the scalar body counts again.
        for (int k = 0; k < n; ++k) {
          const float v = load(src, dtype, k * ld + c);
          if (v == v && v != 0.0f && !std::isinf(v)) --flushed;
        }
      }
      encode_column_block_scalar(src, dtype, ld, n, c, E, R, codes, code_row, scale_row + c,
                                 kStats ? runs + c : nullptr);
    }
  if constexpr (kStats) {
    saturated += lane_sum(sat);
    flushed += lane_sum(flush);
  }
}

// --- E2M1 under the floor scale, by a table (mx_rows_e2m1_avx2.cpp's, a column a lane) ------
//
// A column's multiplier is 2^e with e = 129 - E for its amax's biased exponent E; for E in
// [5, 254] (or a zero amax) y = |x| * 2^e has |x|'s bits plus e << kFrac wherever y >= 2^-2, and
// the code is a table's at the index b = ceil((v + bit6) / kStep) of v = bits(y) - bits(0.25)
// (kStep = 2^(kFrac - 2), bit6 the bit of v worth 2 kSteps): e2m1_code's steps on the grid lie on
// multiples of kStep, the non-strict ones with that bit set. `off` folds bits(0.25), e << kFrac,
// the ceiling's kStep - 1 and the table's 16 steps into one addend a column. Columns of other E
// (tiny, infinite or NaN amax) go to the scalar body.
struct Fp4Consts {
  __m256i low, high, floor16, top, eight, first_flushed, sat16, sat32, pair, dword_order;
  Fp4Consts()
      : low(_mm256_setr_epi8(0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 5, 0, 1, 1, 1, 1, 1, 1, 2,
                             2, 2, 3, 3, 4, 4, 5, 5)),
        high(_mm256_setr_epi8(6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 7, 7, 7, 7, 7,
                              7, 7, 7, 7, 7, 7, 7, 7, 7)),
        floor16(_mm256_set1_epi8(-16)),
        top(_mm256_set1_epi8(static_cast<char>(0x80))),
        eight(_mm256_set1_epi8(8)),
        first_flushed(_mm256_set1_epi8(-15)),
        sat16(_mm256_set1_epi8((3 << 5) - 1)),
        sat32(_mm256_set1_epi32((3 << 21) - 1)),
        pair(_mm256_set1_epi16(0x1001)),
        dword_order(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)) {}
};

// The codes of 32 elements from their table indices b - 16 (q) and signs (bytes whose top bit is
// the sign), the sign in bit 3, in q's element order.
[[gnu::always_inline]] inline __m256i fp4_nibbles(__m256i q, __m256i signs, const Fp4Consts& t) {
  const __m256i codes = _mm256_or_si256(
      _mm256_shuffle_epi8(t.high, q),
      _mm256_shuffle_epi8(t.low, _mm256_xor_si256(_mm256_max_epi8(q, t.floor16), t.top)));
  return _mm256_blendv_epi8(codes, _mm256_or_si256(codes, t.eight), signs);
}

// The sum of v's bytes.
inline int64_t byte_sum(__m256i v) { return lane_sum(_mm256_sad_epu8(v, _mm256_setzero_si256())); }

// A band's E2M1 codes under the floor scale by the table: chunks of `width` columns (a multiple
// of 64) from column c0.
template <bool kStats, DType::Id kSrc>
void e2m1_floor_chunk(const void* src, int64_t ld, int n, int64_t c0, int64_t width, uint8_t* codes,
                      int64_t code_row, uint8_t* scale_row, MxStatsRun* runs, int64_t& saturated,
                      int64_t& flushed, Ahead ahead) {
  constexpr Element E = Element::kE2m1;
  constexpr bool kBf16 = kSrc == DType::Id::bf16;
  constexpr int kShift = kBf16 ? 5 : 21;
  constexpr int64_t kItem = kBf16 ? 2 : 4;
  constexpr int64_t kMax = kChunkBytes / (kMxBlock * kItem) / 8;
  const DType dtype{kSrc};
  static const Fp4Consts t;
  // Per 8 columns: amax bits (32-bit lanes), the offsets, and `fast`, the table's columns.
  alignas(32) __m256i amax[kMax], off[kMax], fast[kMax];
  const int64_t groups = width / 8;
  for (int64_t g = 0; g < groups; ++g) amax[g] = _mm256_setzero_si256();
  for (int k = 0; k < n; ++k)
    for (int64_t g = 0; g < groups; ++g) {
      if ((g & 3) == 0) ahead.next();
      amax[g] = _mm256_max_epi32(amax[g], abs_bits8<kSrc>(src, k * ld + c0 + 8 * g));
    }
  alignas(32) uint32_t fallback[kMax];
  for (int64_t g = 0; g < groups; ++g) {
    alignas(32) uint32_t bits[8];
    alignas(32) float mul[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax[g]);
    uint8_t* s = scale_row + c0 + 8 * g;
    scales8<E, E8m0Rounding::kFloor>(amax[g], s, mul);
    const __m256i e = _mm256_srli_epi32(amax[g], 23);
    const __m256i ok =
        _mm256_or_si256(_mm256_and_si256(_mm256_cmpgt_epi32(e, _mm256_set1_epi32(4)),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(255), e)),
                        _mm256_cmpeq_epi32(amax[g], _mm256_setzero_si256()));
    fast[g] = ok;
    const __m256i steps = _mm256_sub_epi32(
        _mm256_set1_epi32(1), _mm256_slli_epi32(_mm256_max_epi32(e, _mm256_set1_epi32(5)), 2));
    off[g] = _mm256_sub_epi32(_mm256_slli_epi32(steps, kShift), _mm256_set1_epi32(1));
    const unsigned fb = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok))) & 0xFFu;
    fallback[g] = fb;
    if constexpr (kStats) record_columns<E, kSrc>(runs + c0 + 8 * g, bits, s, mul, 8, fb);
  }
  // bfloat16: the offsets and masks of 16 columns in 16-bit lanes, in groups g (even).
  if constexpr (kBf16)
    for (int64_t g = 0; g < groups; g += 2) {
      off[g] = _mm256_permute4x64_epi64(_mm256_packs_epi32(off[g], off[g + 1]), 0xD8);
      fast[g] = _mm256_permute4x64_epi64(_mm256_packs_epi32(fast[g], fast[g + 1]), 0xD8);
    }
  for (int k = 0; k < n; ++k) {
    uint8_t* out = codes + k * code_row + c0 / 2;
    __m256i sat = _mm256_setzero_si256(), flush = _mm256_setzero_si256();
    for (int64_t g = 0; g < groups; g += 8) {  // 64 columns: 32 bytes
      ahead.next();
      __m256i pairs[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int64_t gh = g + 4 * h;  // 32 columns
        __m256i q, signs, zero, keep;
        if constexpr (kBf16) {
          const auto* p = static_cast<const uint16_t*>(src) + k * ld + c0 + 8 * gh;
          const __m256i h0 = load16_bits(p), h1 = load16_bits(p + 16);
          const __m256i mag = _mm256_set1_epi16(0x7FFF), one = _mm256_set1_epi16(1);
          const __m256i a0 = _mm256_and_si256(h0, mag), a1 = _mm256_and_si256(h1, mag);
          const __m256i t0 = _mm256_add_epi16(a0, off[gh]);
          const __m256i t1 = _mm256_add_epi16(a1, off[gh + 2]);
          const __m256i v0 = _mm256_srai_epi16(
              _mm256_add_epi16(t0, _mm256_and_si256(_mm256_srli_epi16(a0, 6), one)), kShift);
          const __m256i v1 = _mm256_srai_epi16(
              _mm256_add_epi16(t1, _mm256_and_si256(_mm256_srli_epi16(a1, 6), one)), kShift);
          q = _mm256_packs_epi16(v0, v1);
          signs = _mm256_packs_epi16(h0, h1);
          if constexpr (kStats) {
            keep = _mm256_packs_epi16(fast[gh], fast[gh + 2]);
            zero = _mm256_packs_epi16(a0, a1);
            // y > 6: v > 18 steps, t above 3 steps less 1 (t saturated to a byte keeps it).
            sat = _mm256_sub_epi8(
                sat,
                _mm256_and_si256(keep, _mm256_cmpgt_epi8(_mm256_packs_epi16(t0, t1), t.sat16)));
          }
        } else {
          const auto* p = static_cast<const float*>(src) + k * ld + c0 + 8 * gh;
          __m256i x[4], a[4], idx[4];
#pragma GCC unroll 4
          for (int v = 0; v < 4; ++v) {
            x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * v));
            a[v] = _mm256_and_si256(x[v], _mm256_set1_epi32(0x7FFFFFFF));
            const __m256i tv = _mm256_add_epi32(a[v], off[gh + v]);
            idx[v] = _mm256_srai_epi32(
                _mm256_add_epi32(
                    tv, _mm256_and_si256(_mm256_srli_epi32(a[v], 22), _mm256_set1_epi32(1))),
                kShift);
            if constexpr (kStats)
              sat = _mm256_sub_epi32(
                  sat, _mm256_and_si256(fast[gh + v], _mm256_cmpgt_epi32(tv, t.sat32)));
          }
          q = _mm256_packs_epi16(_mm256_packs_epi32(idx[0], idx[1]),
                                 _mm256_packs_epi32(idx[2], idx[3]));
          signs =
              _mm256_packs_epi16(_mm256_packs_epi32(x[0], x[1]), _mm256_packs_epi32(x[2], x[3]));
          if constexpr (kStats) {
            keep = _mm256_packs_epi16(_mm256_packs_epi32(fast[gh], fast[gh + 1]),
                                      _mm256_packs_epi32(fast[gh + 2], fast[gh + 3]));
            zero =
                _mm256_packs_epi16(_mm256_packs_epi32(a[0], a[1]), _mm256_packs_epi32(a[2], a[3]));
          }
        }
        if constexpr (kStats)  // index 0 (b - 16 below -15) and x nonzero
          flush = _mm256_sub_epi8(
              flush, _mm256_sign_epi8(_mm256_and_si256(keep, _mm256_cmpgt_epi8(t.first_flushed, q)),
                                      zero));
        __m256i nibbles = fp4_nibbles(q, signs, t);
        if constexpr (!kBf16) nibbles = _mm256_permutevar8x32_epi32(nibbles, t.dword_order);
        pairs[h] = _mm256_maddubs_epi16(nibbles, t.pair);
      }
      const __m256i bytes = _mm256_packus_epi16(pairs[0], pairs[1]);
      // bfloat16: dwords [a 0-7, a 16-23, b 0-7, b 16-23 | a 8-15, ...]; float32: qwords
      // [a 0-15, b 0-15 | a 16-31, b 16-31] (two elements a byte).
      const __m256i ordered = kBf16 ? _mm256_permutevar8x32_epi32(bytes, t.dword_order)
                                    : _mm256_permute4x64_epi64(bytes, 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * g), ordered);
    }
    if constexpr (kStats) {
      saturated += kBf16 ? byte_sum(sat) : lane_sum(sat);
      flushed += byte_sum(flush);
    }
  }
  for (int64_t g = 0; g < groups; ++g)
    for (unsigned f = fallback[g]; f; f &= f - 1) {
      const int64_t c = c0 + 8 * g + __builtin_ctz(f);
      encode_column_block_scalar(src, dtype, ld, n, c, E, E8m0Rounding::kFloor, codes, code_row,
                                 scale_row + c, kStats ? runs + c : nullptr);
    }
}

// encode_column_band for one element format, rounding and source dtype: the band's block rows
// one at a time, their columns in chunks (the vectors take whole groups of 32 columns; the
// last columns the scalar body).
template <Element E, E8m0Rounding R, bool kStats, DType::Id kSrc>
void band_as(const void* src, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales,
             MxStatsRun* runs) {
  constexpr int64_t kItem = kSrc == DType::Id::f32 ? 4 : 2;
  constexpr int64_t kWidth = kChunkBytes / (kMxBlock * kItem);
  const DType dtype{kSrc};
  const int64_t code_row = code_bytes(E, cols);
  // Whole steps of the vectors: 32 columns (FP8), 64 (E2M1: 32 code bytes).
  const int64_t vec_cols = E == Element::kE2m1 ? cols / 64 * 64 : cols / 32 * 32;
  int64_t saturated = 0, flushed = 0;
  // FP8 codes of a band past the cast-wide threshold are stored past the caches, where each row's
  // 32-byte steps are aligned.
  const bool stream = E != Element::kE2m1 && rows * code_row >= kStreamCodesFrom &&
                      reinterpret_cast<uintptr_t>(codes) % 32 == 0 && code_row % 32 == 0;
  for (int64_t r0 = 0; r0 < rows; r0 += kMxBlock) {
    const int n = static_cast<int>(std::min(kMxBlock, rows - r0));
    const void* band = at(src, dtype, r0 * cols);
    uint8_t* c = codes + r0 * code_row;
    uint8_t* s = scales + r0 / kMxBlock * cols;
    for (int64_t c0 = 0; c0 < vec_cols; c0 += kWidth) {
      const int64_t w = std::min(kWidth, vec_cols - c0);
      // The next chunk: the band's next columns, or the next band's first.
      Ahead ahead;
      const int64_t next_r0 = c0 + w < vec_cols ? r0 : r0 + kMxBlock;
      const int64_t next_c0 = c0 + w < vec_cols ? c0 + w : 0;
      if (next_r0 < rows) {
        ahead.base = at(src, dtype, next_r0 * cols + next_c0);
        ahead.row_bytes = std::min(kWidth, vec_cols - next_c0) * kItem;
        ahead.ld_bytes = cols * kItem;
        ahead.rows = static_cast<int>(std::min(kMxBlock, rows - next_r0));
      }
      if constexpr (E == Element::kE2m1 && R == E8m0Rounding::kFloor)
        e2m1_floor_chunk<kStats, kSrc>(band, cols, n, c0, w, c, code_row, s, runs, saturated,
                                       flushed, ahead);
      else if constexpr (E == Element::kE2m1)
        e2m1_chunk<R, kStats, kSrc>(band, cols, n, c0, w, c, code_row, s, runs, saturated, flushed,
                                    ahead);
      else if constexpr (kSrc == DType::Id::bf16)
        fp8_chunk_bf16<E, R, kStats>(static_cast<const uint16_t*>(band), cols, n, c0, w, c,
                                     code_row, s, runs, saturated, ahead, stream);
      else
        fp8_chunk_f32<E, R, kStats>(static_cast<const float*>(band), cols, n, c0, w, c, code_row, s,
                                    runs, saturated, ahead, stream);
    }
    if (vec_cols < cols) {
      for (int k = 0; k < n; ++k)  // E2M1 codes go into their nibbles
        std::fill(c + k * code_row + code_bytes(E, vec_cols), c + (k + 1) * code_row, uint8_t{0});
      for (int64_t j = vec_cols; j < cols; ++j)
        encode_column_block_scalar(band, dtype, cols, n, j, E, R, c, code_row, s + j,
                                   kStats ? runs + j : nullptr);
    }
  }
  if (stream) _mm_sfence();
  if constexpr (kStats) {
    runs[0].saturated += saturated;
    runs[0].flushed += flushed;
  }
}

template <Element E, E8m0Rounding R>
void band_for(const void* src, DType dtype, int64_t rows, int64_t cols, uint8_t* codes,
              uint8_t* scales, MxStatsRun* runs) {
  if (dtype == kBFloat16) {
    if (runs)
      band_as<E, R, true, DType::Id::bf16>(src, rows, cols, codes, scales, runs);
    else
      band_as<E, R, false, DType::Id::bf16>(src, rows, cols, codes, scales, runs);
  } else if (runs) {
    band_as<E, R, true, DType::Id::f32>(src, rows, cols, codes, scales, runs);
  } else {
    band_as<E, R, false, DType::Id::f32>(src, rows, cols, codes, scales, runs);
  }
}

}  // namespace

void mx_encode_column_band_avx2(const void* src, DType dtype, int64_t rows, int64_t cols,
                                Element element, E8m0Rounding rounding, uint8_t* codes,
                                uint8_t* scales, MxStatsRun* runs) {
  const bool floor = rounding == E8m0Rounding::kFloor;
  if (element == Element::kE2m1 && floor)
    band_for<Element::kE2m1, E8m0Rounding::kFloor>(src, dtype, rows, cols, codes, scales, runs);
  else if (element == Element::kE2m1)
    band_for<Element::kE2m1, E8m0Rounding::kRceil>(src, dtype, rows, cols, codes, scales, runs);
  else if (element == Element::kE4m3 && floor)
    band_for<Element::kE4m3, E8m0Rounding::kFloor>(src, dtype, rows, cols, codes, scales, runs);
  else if (element == Element::kE4m3)
    band_for<Element::kE4m3, E8m0Rounding::kRceil>(src, dtype, rows, cols, codes, scales, runs);
  else if (floor)
    band_for<Element::kE5m2, E8m0Rounding::kFloor>(src, dtype, rows, cols, codes, scales, runs);
  else
    band_for<Element::kE5m2, E8m0Rounding::kRceil>(src, dtype, rows, cols, codes, scales, runs);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
