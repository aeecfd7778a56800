// AVX2 (+FMA, F16C) bodies of the MX transposed cast (mx_quantize_transposed's column-wise
// copies), whose E2M1 columns the AVX-512 level runs too (its FP8 columns: mx_columns_avx512.cpp):
// x walked one block row (32 rows) at a time in chunks of columns, the band's rows copied to a
// contiguous tile as the column amaxes are taken (rows a multiple of 4 KiB apart share L1 sets),
// each group of 16 columns coded from the tile under per-column constants and transposed in
// registers, whole 64-byte lines of codes written past the caches. A column whose block needs the
// general path is encoded again from a copy of its block by the row-wise body (mx_blocks_avx2.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/common/byte_transpose_avx2.h"
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

// The codes of the fallback columns (bit j of `fallback`: column j of the block at p, its 32 rows
// ld elements apart) encoded again from a copy of the column by the row-wise body (mx_encode_as)
// into redone[j], with its scale at scale + j * scale_row and, with kStats, its statistics
// appended to runs[j].
template <Element E, E8m0Rounding R, bool kStats, typename T, size_t kBytes>
[[gnu::always_inline]] inline void redo_columns(const T* p, int64_t ld, unsigned fallback,
                                                uint8_t* scale, int64_t scale_row, MxStatsRun* runs,
                                                uint8_t (*redone)[kBytes]) {
  constexpr DType::Id kSrc = sizeof(T) == 2 ? DType::Id::bf16 : DType::Id::f32;
  for (unsigned f = fallback; f; f &= f - 1) {
    const int j = __builtin_ctz(f);
    alignas(32) T column[kMxBlock];
    for (int k = 0; k < kMxBlock; ++k) column[k] = p[k * ld + j];
    uint8_t* sp = scale + j * scale_row;
    if constexpr (kStats) {
      SegmentStats st{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
      mx_encode_as<E, R, kSrc>(column, kMxBlock, redone[j], sp, &st);
      st.run.saturated += lane_sum(st.saturated);
      st.run.flushed += lane_sum(st.flushed);
      runs[j].append(st.run);
    } else {
      mx_encode_as<E, R, kSrc>(column, kMxBlock, redone[j], sp, nullptr);
    }
  }
}

// The scales of 16 columns' blocks from their amax bits (float32 bits, NaN above 0x7F800000;
// lo: columns 0-7, hi: 8-15): two block_scales8 and, for the lanes they leave, the scalar
// e8m0_rceil and rceil_multiplier; the codes written from `scale` (scale_row bytes apart) and
// kept with the bits and multipliers for the block's encode and statistics.
struct ColumnScales16 {
  alignas(32) uint32_t bits[16];
  alignas(32) float mul[16];
  uint8_t s[16];

  // Returns the columns whose amax is infinite or NaN (bit j: column j).
  template <Element E, E8m0Rounding R>
  [[gnu::always_inline]] unsigned set(__m256i lo, __m256i hi, uint8_t* scale, int64_t scale_row) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits + 8), hi);
    all_block_scales8<E, R>(lo, s, mul);
    all_block_scales8<E, R>(hi, s + 8, mul + 8);
    for (int j = 0; j < 16; ++j) scale[j * scale_row] = s[j];
    const __m256i inf = _mm256_set1_epi32(0x7F7FFFFF);
    return static_cast<unsigned>(
               _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(lo, inf)))) |
           static_cast<unsigned>(
               _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(hi, inf))))
               << 8;
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

// The FP8 magnitude codes of one row of 16 columns (bfloat16 bits h) under their lanes'
// power-of-2 multipliers (column_constants16), the codes of codes16 less the sign and before the
// element's largest code caps them, where |x| has a normal code; a zero's is 0 or below (packus
// makes it 0), a nonzero |x| below `from` (the float32 path's) gives no code that is used. lowest
// gets the least |x| - 1 (as unsigned, 0xFFFF for 0) so far, from which those lanes are found
// once per block; with kStats, `sat` counts (subtracts -1 in) the lanes above sat_above.
template <Element E, bool kStats>
[[gnu::always_inline]] inline __m256i column_codes16(__m256i h, __m256i round, __m256i sat_above,
                                                     __m256i& lowest, __m256i& sat) {
  using L = Bf16Lanes<E>;
  constexpr int kDrop = 7 - L::kMant;
  const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  // Round to nearest even on the dropped bits: bit kDrop of |x| is that of |x| * 2^e.
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(h, kDrop), _mm256_set1_epi16(1));
  lowest = _mm256_min_epu16(lowest, _mm256_add_epi16(a, _mm256_set1_epi16(-1)));
  if constexpr (kStats) sat = _mm256_add_epi16(sat, _mm256_cmpgt_epi16(a, sat_above));
  return _mm256_srai_epi16(_mm256_add_epi16(_mm256_add_epi16(a, lsb), round), kDrop);
}

// One block (32 rows from p, ld elements apart) of 16 columns: their amax bits m (16-bit
// lanes), their scales written from `scale` (scale_row bytes apart), their codes to
// sink(j, column j's 32 bytes) and with kStats their statistics appended to runs[j]
// (the 16-bit lanes' saturated elements added to sat_total). The scales as two vectors
// (block_scales8), the rows' codes in 16-bit lanes (column_codes16) with each lane's own
// multiplier, and the 32 x 16 codes transposed in registers into the columns' 32 bytes. A
// column whose block needs the float32 path (its multiplier not a normal power of 2, a lane
// below the normal codes that is not zero, an infinite or NaN amax) is encoded again from a
// copy of its block by the row-wise body, over the bytes written.
template <Element E, E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_column_block16(const uint16_t* p, int64_t ld, __m256i m,
                                                         uint8_t* scale, int64_t scale_row,
                                                         Sink sink, MxStatsRun* runs,
                                                         __m256i& sat_total) {
  using L = Bf16Lanes<E>;
  ColumnScales16 cs;
  const __m256i lo_bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(m)), 16);
  const __m256i hi_bits =
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(m, 1)), 16);
  cs.set<E, R>(lo_bits, hi_bits, scale, scale_row);
  __m256i round, from, sat_above;
  unsigned fallback = column_constants16<E>(cs.bits, cs.mul, round, from, sat_above);
  __m256i lowest = _mm256_set1_epi16(-1), sat = _mm256_setzero_si256();
  __m256i x[16];  // rows k (low 128-bit lane) and k + 16 (high) as 16 code bytes each
  for (int k = 0; k < 16; ++k) {
    const __m256i h0 = load16_bits(p + k * ld), h1 = load16_bits(p + (k + 16) * ld);
    const __m256i c0 = column_codes16<E, kStats>(h0, round, sat_above, lowest, sat);
    const __m256i c1 = column_codes16<E, kStats>(h1, round, sat_above, lowest, sat);
    // packs keeps each value's sign in its byte's top bit; packus the codes (a zero's negative
    // ones to 0, the others below 0x100), capped at the element's largest.
    const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(-128));
    const __m256i codes =
        _mm256_min_epu8(_mm256_packus_epi16(c0, c1), _mm256_set1_epi8(L::kMaxCode));
    x[k] = _mm256_permute4x64_epi64(_mm256_or_si256(codes, sign), 0xD8);
  }
  transpose16x16_bytes(x);
  // Lanes with a nonzero |x| below `from`: lowest < from - 1 (unsigned).
  const __m256i fine =
      _mm256_cmpeq_epi16(_mm256_subs_epu16(_mm256_sub_epi16(from, _mm256_set1_epi16(1)), lowest),
                         _mm256_setzero_si256());
  const auto fine_bits =
      static_cast<unsigned>(_mm256_movemask_epi8(_mm256_packs_epi16(fine, fine)));
  fallback |= ~((fine_bits & 0xFFu) | ((fine_bits >> 8) & 0xFF00u)) & 0xFFFFu;
  if constexpr (kStats) {
    sat = _mm256_and_si256(sat, fine);  // fallback columns are counted by the row-wise body
    sat_total = _mm256_sub_epi32(sat_total, _mm256_madd_epi16(sat, _mm256_set1_epi16(1)));
    for (int j = 0; j < 16; ++j)
      if (!((fallback >> j) & 1u))
        record_block<E, DType::Id::bf16>(runs[j], nullptr, 0, cs.bits[j], cs.s[j], cs.mul[j]);
  }
  alignas(32) uint8_t redone[16][kMxBlock];  // the fallback columns' codes
  redo_columns<E, R, kStats>(p, ld, fallback, scale, scale_row, runs, redone);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    sink(j, __builtin_expect((fallback >> j) & 1u, 0)
                ? _mm256_load_si256(reinterpret_cast<const __m256i*>(redone[j]))
                : x[j]);
}

// The largest magnitude bits of each of N groups of 16 columns over 32 rows from p (ld elements
// apart), into amax[0..N-1], the rows copied into tile (group g's row k at tile + 16 (32 g + k)):
// the encode reads the block from there, contiguous, where the rows themselves (a multiple of
// 4 KiB apart, often) would fall in one L1 set.
template <int N>
[[gnu::always_inline]] inline void column_amax16(const uint16_t* p, int64_t ld, __m256i* amax,
                                                 uint16_t* tile) {
  __m256i m[N];
#pragma GCC unroll 8
  for (int g = 0; g < N; ++g) m[g] = _mm256_setzero_si256();
  for (int k = 0; k < kMxBlock; ++k) {
    const uint16_t* row = p + k * ld;
#pragma GCC unroll 8
    for (int g = 0; g < N; ++g) {
      const __m256i h = load16_bits(row + 16 * g);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tile + 16 * (kMxBlock * g + k)), h);
      m[g] = _mm256_max_epi16(m[g], _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < N; ++g) amax[g] = m[g];
}

// The float32 source's counterparts, 8 columns a vector: the largest magnitude bits (int32) of N
// groups of 16 columns over 32 rows from p, group g's in amax[2 g] (columns 0-7) and
// amax[2 g + 1], the rows copied into tile (group g's row k at tile + 16 (32 g + k)).
template <int N>
[[gnu::always_inline]] inline void column_amax32(const float* p, int64_t ld, __m256i* amax,
                                                 float* tile) {
  __m256i m[2 * N];
#pragma GCC unroll 8
  for (int g = 0; g < 2 * N; ++g) m[g] = _mm256_setzero_si256();
  for (int k = 0; k < kMxBlock; ++k) {
    const float* row = p + k * ld;
#pragma GCC unroll 8
    for (int g = 0; g < 2 * N; ++g) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 8 * g));
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(tile + 16 * (kMxBlock * (g / 2) + k) + 8 * (g % 2)), v);
      m[g] = _mm256_max_epi32(m[g], _mm256_and_si256(v, _mm256_set1_epi32(0x7FFFFFFF)));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < 2 * N; ++g) amax[g] = m[g];
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

// The FP8 magnitude codes (int32) of 8 columns' float32 values (bits v) under their lanes'
// power-of-2 multipliers (column_constants32) where |x| has a normal code, before the element's
// largest code caps them; a zero's is 0 or below. lowest gets the least |x| - 1 (as unsigned) so
// far, from which the lanes with a nonzero |x| below `from` are found once per block; with
// kStats, `sat` counts (subtracts -1 in) the lanes above sat_above.
template <Element E, bool kStats>
[[gnu::always_inline]] inline __m256i column_codes32(__m256i v, __m256i round, __m256i sat_above,
                                                     __m256i& lowest, __m256i& sat) {
  constexpr int kDrop = 23 - Bf16Lanes<E>::kMant;
  const __m256i a = _mm256_and_si256(v, _mm256_set1_epi32(0x7FFFFFFF));
  // Round to nearest even on the dropped bits: bit kDrop of |x| is that of |x| * 2^e.
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, kDrop), _mm256_set1_epi32(1));
  lowest = _mm256_min_epu32(lowest, _mm256_add_epi32(a, _mm256_set1_epi32(-1)));
  if constexpr (kStats) sat = _mm256_add_epi32(sat, _mm256_cmpgt_epi32(a, sat_above));
  return _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(a, lsb), round), kDrop);
}

// encode_column_block16 for a float32 source (p: the block's 32 rows of 16 columns, ld apart;
// amax: the columns' largest magnitude bits, 0-7 and 8-15): each row's codes on x's bits in
// 32-bit lanes (column_codes32) under the columns' power-of-2 multipliers, then transposed as
// there. A column whose block needs the float32 path (its multiplier not a normal power of 2 or
// above 2^(127 - bias), a nonzero |x| below the normal codes, an infinite or NaN amax) is encoded
// again from a copy of its block by the row-wise body; with kStats the saturated counts of the
// others are added to sat_total (they flush no element).
template <Element E, E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_column_block32(const float* p, int64_t ld,
                                                         const __m256i* amax, uint8_t* scale,
                                                         int64_t scale_row, Sink sink,
                                                         MxStatsRun* runs, __m256i& sat_total) {
  using L = Bf16Lanes<E>;
  ColumnScales16 cs;
  cs.set<E, R>(amax[0], amax[1], scale, scale_row);
  __m256i round[2], from[2], sat_above[2], bad[2], lowest[2], sat[2];
  for (int h = 0; h < 2; ++h) {
    column_constants32<E>(amax[h], cs.mul + 8 * h, round[h], from[h], sat_above[h], bad[h]);
    lowest[h] = _mm256_set1_epi32(-1);
    sat[h] = _mm256_setzero_si256();
  }
  __m256i x[16];
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int k = 0; k < 16; ++k) {
    __m256i half[2], sign[2];
    for (int r = 0; r < 2; ++r) {
      const float* row = p + (k + 16 * r) * ld;
      const __m256i xl = _mm256_load_si256(reinterpret_cast<const __m256i*>(row));
      const __m256i xh = _mm256_load_si256(reinterpret_cast<const __m256i*>(row + 8));
      const __m256i cl = column_codes32<E, kStats>(xl, round[0], sat_above[0], lowest[0], sat[0]);
      const __m256i ch = column_codes32<E, kStats>(xh, round[1], sat_above[1], lowest[1], sat[1]);
      // packus makes a zero's negative code 0: [cols 0-3, 8-11 | 4-7, 12-15].
      half[r] = _mm256_packus_epi32(cl, ch);
      // packs keeps each value's sign in its 16-bit lane's top bit (and then its byte's).
      sign[r] = _mm256_packs_epi32(xl, xh);
    }
    const __m256i codes =
        _mm256_min_epu8(_mm256_packus_epi16(half[0], half[1]), _mm256_set1_epi8(L::kMaxCode));
    const __m256i bytes = _mm256_or_si256(
        codes, _mm256_and_si256(_mm256_packs_epi16(sign[0], sign[1]), _mm256_set1_epi8(-128)));
    // dwords [k: 0-3, 8-11, k+16: 0-3, 8-11 | k: 4-7, 12-15, k+16: 4-7, 12-15] into row k's 16
    // codes (low 128-bit lane) and row k + 16's (high), as encode_column_block16 lays them.
    x[k] = _mm256_permutevar8x32_epi32(bytes, order);
  }
  transpose16x16_bytes(x);
  // The columns cast here: a normal multiplier in range and no nonzero |x| below `from` (lowest
  // at least from - 1, unsigned).
  __m256i fine[2];
  unsigned fallback = 0;
  for (int h = 0; h < 2; ++h) {
    const __m256i floor = _mm256_sub_epi32(from[h], _mm256_set1_epi32(1));
    fine[h] = _mm256_andnot_si256(
        bad[h], _mm256_cmpeq_epi32(_mm256_max_epu32(lowest[h], floor), lowest[h]));
    fallback |= (~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(fine[h]))) & 0xFFu)
                << (8 * h);
  }
  if constexpr (kStats) {
    sat_total = _mm256_sub_epi32(sat_total, _mm256_and_si256(fine[0], sat[0]));
    sat_total = _mm256_sub_epi32(sat_total, _mm256_and_si256(fine[1], sat[1]));
    for (int j = 0; j < 16; ++j)
      if (!((fallback >> j) & 1u))
        record_block<E, DType::Id::f32>(runs[j], nullptr, 0, cs.bits[j], cs.s[j], cs.mul[j]);
  }
  alignas(32) uint8_t redone[16][kMxBlock];  // the fallback columns' codes
  redo_columns<E, R, kStats>(p, ld, fallback, scale, scale_row, runs, redone);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    sink(j, __builtin_expect((fallback >> j) & 1u, 0)
                ? _mm256_load_si256(reinterpret_cast<const __m256i*>(redone[j]))
                : x[j]);
}

// The E2M1 codes of 16 columns' blocks, column j's 32 in x[j] (one a byte, rows 0-15 in the low
// 128-bit lane), packed two a byte (the even row in the low nibble) for sink(j, its 16 bytes), or
// redone[j] for a fallback column (bit j).
template <typename Sink>
[[gnu::always_inline]] inline void sink_nibbles(const __m256i* x, unsigned fallback,
                                                const uint8_t (*redone)[kMxBlock / 2], Sink sink) {
  // Two codes a byte: even + 16 * odd in 16-bit lanes, then packed to bytes, two columns a step.
  const __m256i pairs = _mm256_set1_epi16(0x1001);
#pragma GCC unroll 8
  for (int j = 0; j < 16; j += 2) {
    const __m256i b =
        _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_maddubs_epi16(x[j], pairs),
                                                     _mm256_maddubs_epi16(x[j + 1], pairs)),
                                 0xD8);
    for (int q = 0; q < 2; ++q) {
      const __m128i v = q ? _mm256_extracti128_si256(b, 1) : _mm256_castsi256_si128(b);
      sink(j + q, __builtin_expect((fallback >> (j + q)) & 1u, 0)
                      ? _mm_load_si128(reinterpret_cast<const __m128i*>(redone[j + q]))
                      : v);
    }
  }
}

// E2M1 codes of a float32 block of 16 columns on x's bits in 32-bit lanes, as
// encode_column_block_e2m1_bf16 takes a bfloat16 block (RowConstants<kE2m1, f32>, one column a
// lane): p is the block's 32 rows of 16 columns (16 elements apart), amax their largest magnitude
// bits (columns 0-7 and 8-15). The 32 x 16 codes are transposed in registers and each column's 32
// packed two a byte for sink(j, its 16 bytes). A column whose block is not cast on its bits
// (RowConstants::slow) is encoded again from a copy of its block by the row-wise body. With
// kStats the saturated (kFloor) and flushed elements of the other columns are added to sat_total
// and flushed_total.
template <E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_column_block_e2m1(const float* p, const __m256i* amax,
                                                            uint8_t* scale, int64_t scale_row,
                                                            Sink sink, MxStatsRun* runs,
                                                            __m256i& sat_total,
                                                            __m256i& flushed_total) {
  constexpr Element E = Element::kE2m1;
  using K = RowConstants<E, DType::Id::f32>;
  ColumnScales16 cs;
  cs.set<E, R>(amax[0], amax[1], scale, scale_row);
  K k[2];
  k[0].set(amax[0], cs.mul);
  k[1].set(amax[1], cs.mul + 8);
  const unsigned fallback = k[0].slow | k[1].slow << 8;
  const auto load = [&](const int32_t* v) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(v));
  };
  const __m256i add[2] = {load(k[0].add), load(k[1].add)};
  const __m256i quarter[2] = {load(k[0].from_less_1), load(k[1].from_less_1)};
  const __m256i three_quarters[2] = {load(k[0].three_quarters), load(k[1].three_quarters)};
  const __m256i above[2] = {load(k[0].sat_above), load(k[1].sat_above)};
  const __m256i one = _mm256_set1_epi32(1), magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i sat[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  __m256i kept[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  // Each lane's code: the rounded one of |x| * 2^e, or below 1 the count of the two thresholds
  // |x| exceeds where that is more (at most 7 once capped).
  const auto code = [&](__m256i v, int h) {
    const __m256i a = _mm256_and_si256(v, magnitude);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, K::kDrop), one);
    const __m256i rounded =
        _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(a, lsb), add[h]), K::kDrop);
    const __m256i half = _mm256_cmpgt_epi32(a, quarter[h]);
    const __m256i low = _mm256_sub_epi32(
        _mm256_setzero_si256(), _mm256_add_epi32(half, _mm256_cmpgt_epi32(a, three_quarters[h])));
    if constexpr (kStats && R == E8m0Rounding::kFloor)
      sat[h] = _mm256_add_epi32(sat[h], _mm256_cmpgt_epi32(a, above[h]));
    if constexpr (kStats)
      kept[h] = _mm256_add_epi32(
          kept[h], _mm256_or_si256(half, _mm256_cmpeq_epi32(a, _mm256_setzero_si256())));
    return _mm256_max_epi32(rounded, low);
  };
  __m256i x[16];
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int r = 0; r < 16; ++r) {
    __m256i half[2], sign[2];
    for (int q = 0; q < 2; ++q) {
      const float* row = p + (r + 16 * q) * 16;
      const __m256i xl = _mm256_load_si256(reinterpret_cast<const __m256i*>(row));
      const __m256i xh = _mm256_load_si256(reinterpret_cast<const __m256i*>(row + 8));
      half[q] = _mm256_packus_epi32(code(xl, 0), code(xh, 1));  // [0-3, 8-11 | 4-7, 12-15]
      // packs keeps each value's sign in its 16-bit lane's top bit (and then its byte's).
      sign[q] = _mm256_packs_epi32(xl, xh);
    }
    const __m256i codes =
        _mm256_min_epu8(_mm256_packus_epi16(half[0], half[1]), _mm256_set1_epi8(K::kMaxCode));
    // The signs' 0x80 moved to bit 3 of each byte.
    const __m256i signs =
        _mm256_srli_epi16(_mm256_and_si256(_mm256_packs_epi16(sign[0], sign[1]),
                                           _mm256_set1_epi8(static_cast<char>(0x80))),
                          4);
    // Row r's 16 codes in the low 128-bit lane, row r + 16's in the high.
    x[r] = _mm256_permutevar8x32_epi32(_mm256_or_si256(codes, signs), order);
  }
  transpose16x16_bytes(x);
  if constexpr (kStats) {
    // The lanes of the columns cast here (the others are counted by the row-wise body): their
    // saturated elements, and their flushed ones, 32 less those kept.
    for (int h = 0; h < 2; ++h) {
      const __m256i fine = _mm256_cmpeq_epi32(
          _mm256_and_si256(_mm256_set1_epi32(static_cast<int32_t>(fallback >> (8 * h))),
                           _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128)),
          _mm256_setzero_si256());
      sat_total = _mm256_sub_epi32(sat_total, _mm256_and_si256(sat[h], fine));
      flushed_total = _mm256_add_epi32(
          flushed_total,
          _mm256_and_si256(_mm256_add_epi32(kept[h], _mm256_set1_epi32(kMxBlock)), fine));
    }
    for (int j = 0; j < 16; ++j)
      if (!((fallback >> j) & 1u))
        record_block<E, DType::Id::f32>(runs[j], nullptr, 0, cs.bits[j], cs.s[j], cs.mul[j]);
  }
  alignas(16) uint8_t redone[16][kMxBlock / 2];  // the fallback columns' codes
  redo_columns<E, R, kStats>(p, 16, fallback, scale, scale_row, runs, redone);
  sink_nibbles(x, fallback, redone, sink);
}

// E2M1 codes of a bfloat16 block of 16 columns in 16-bit lanes, as the row cast's
// fast_block_bf16_fp4 takes a block (RowConstants, one column a lane): p is the block's 32 rows
// of 16 columns (16 elements apart), amax their largest magnitude bits (16-bit lanes). Each row's
// codes are the rounded ones of |x| * 2^e, or below 1 the count of the two thresholds it exceeds
// where that is more, at most 7, the sign in bit 3; the 32 x 16 codes are transposed in
// registers and each column's 32 packed two a byte (the even row in the low nibble) for sink(j,
// its 16 bytes). A column whose block is not cast on its bits (RowConstants::slow: an infinite or
// NaN amax, a multiplier that is not a normal power of 2 or above 2^124) is encoded again from a
// copy of its block by the row-wise body. With kStats the saturated (kFloor) and flushed
// elements of the other columns are added to sat_total and flushed_total.
template <E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_column_block_e2m1_bf16(const uint16_t* p, __m256i m,
                                                                 uint8_t* scale, int64_t scale_row,
                                                                 Sink sink, MxStatsRun* runs,
                                                                 __m256i& sat_total,
                                                                 __m256i& flushed_total) {
  constexpr Element E = Element::kE2m1;
  using K = RowConstants<E, DType::Id::bf16>;
  ColumnScales16 cs;
  const __m256i lo_bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(m)), 16);
  const __m256i hi_bits =
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(m, 1)), 16);
  cs.set<E, R>(lo_bits, hi_bits, scale, scale_row);
  K k[2];
  k[0].set(lo_bits, cs.mul);
  k[1].set(hi_bits, cs.mul + 8);
  const unsigned fallback = k[0].slow | k[1].slow << 8;
  // The lanes' constants (each fits 16 bits where the column is cast here); packs works within
  // 128-bit lanes, [0-3, 8-11 | 4-7, 12-15] before the permute.
  const auto pack = [&](const int32_t* a, const int32_t* b) {
    return _mm256_permute4x64_epi64(
        _mm256_packs_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(a)),
                           _mm256_load_si256(reinterpret_cast<const __m256i*>(b))),
        0xD8);
  };
  const __m256i add = pack(k[0].add, k[1].add);
  const __m256i quarter = pack(k[0].from_less_1, k[1].from_less_1);
  const __m256i three_quarters = pack(k[0].three_quarters, k[1].three_quarters);
  const __m256i above = pack(k[0].sat_above, k[1].sat_above);
  const __m256i one = _mm256_set1_epi16(1), magnitude = _mm256_set1_epi16(0x7FFF);
  __m256i sat = _mm256_setzero_si256(), kept = _mm256_setzero_si256();
  const auto code = [&](__m256i h) {
    const __m256i a = _mm256_and_si256(h, magnitude);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(a, K::kDrop), one);
    const __m256i rounded =
        _mm256_srai_epi16(_mm256_add_epi16(_mm256_add_epi16(a, lsb), add), K::kDrop);
    const __m256i half = _mm256_cmpgt_epi16(a, quarter);
    const __m256i low = _mm256_sub_epi16(
        _mm256_setzero_si256(), _mm256_add_epi16(half, _mm256_cmpgt_epi16(a, three_quarters)));
    if constexpr (kStats && R == E8m0Rounding::kFloor)
      sat = _mm256_add_epi16(sat, _mm256_cmpgt_epi16(a, above));
    if constexpr (kStats)
      kept = _mm256_add_epi16(kept,
                              _mm256_or_si256(half, _mm256_cmpeq_epi16(a, _mm256_setzero_si256())));
    return _mm256_max_epi16(rounded, low);
  };
  __m256i x[16];  // rows k (low 128-bit lane) and k + 16 (high) as 16 code bytes each
  for (int r = 0; r < 16; ++r) {
    const __m256i h0 = load16_bits(p + r * 16), h1 = load16_bits(p + (r + 16) * 16);
    const __m256i codes =
        _mm256_min_epu8(_mm256_packus_epi16(code(h0), code(h1)), _mm256_set1_epi8(K::kMaxCode));
    // The signs' 0x80 moved to bit 3 of each byte.
    const __m256i signs = _mm256_srli_epi16(
        _mm256_and_si256(_mm256_packs_epi16(h0, h1), _mm256_set1_epi8(static_cast<char>(0x80))), 4);
    x[r] = _mm256_permute4x64_epi64(_mm256_or_si256(codes, signs), 0xD8);
  }
  transpose16x16_bytes(x);
  if constexpr (kStats) {
    // The lanes of the columns cast here (the others are counted by the row-wise body): their
    // saturated elements, and their flushed ones, 32 less those kept.
    const __m256i fine = _mm256_cmpeq_epi16(
        _mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(fallback)),
                         _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                           8192, 16384, -32768)),
        _mm256_setzero_si256());
    const __m256i ones = _mm256_set1_epi16(1);
    sat_total = _mm256_sub_epi32(sat_total, _mm256_madd_epi16(_mm256_and_si256(sat, fine), ones));
    flushed_total = _mm256_add_epi32(
        flushed_total,
        _mm256_madd_epi16(
            _mm256_and_si256(_mm256_add_epi16(kept, _mm256_set1_epi16(kMxBlock)), fine), ones));
    for (int j = 0; j < 16; ++j)
      if (!((fallback >> j) & 1u))
        record_block<E, DType::Id::bf16>(runs[j], nullptr, 0, cs.bits[j], cs.s[j], cs.mul[j]);
  }
  alignas(16) uint8_t redone[16][kMxBlock / 2];  // the fallback columns' codes
  redo_columns<E, R, kStats>(p, 16, fallback, scale, scale_row, runs, redone);
  sink_nibbles(x, fallback, redone, sink);
}

// encode_columns_bf16 and encode_columns_f32 (mx_cast.h) for one element format and rounding,
// over chunks of up to kChunkGroups groups of 16 columns, each block row by block row, a tile of
// groups (8 of bfloat16, 4 of float32: 8 KiB) at a time: the tile's amax by integer maxima down
// its rows as they are copied out (column_amax16 / 32), then each group encoded from the copy
// (encode_column_block16 / 32; E2M1: encode_column_block_e2m1_bf16 / encode_column_block_e2m1),
// while the tile two on (past the chunk's last: the next block row's first) is fetched into L2,
// a few of its rows with each group (a whole block row ahead, as much as 64 KiB, took 13-15% more
// time at 4096 x 4096: its lines did not wait in L2 until used). Where a column's
// 64 code bytes of two block rows (E2M1: four) make a whole cache line, the codes of all but the
// last wait in `pending` and the last block's write the line past the caches (no line read for
// it).
template <Element E, E8m0Rounding R, bool kStats, typename T>
void encode_columns_as(const T* src, int64_t ld, int64_t rows, int64_t c0, int64_t groups,
                       uint8_t* codes, int64_t code_row, uint8_t* scales, int64_t scale_row,
                       MxStatsRun* runs) {
  constexpr bool kBf16 = sizeof(T) == 2;
  // 1024 columns: 32 KiB of pending codes.
  constexpr int64_t kChunkGroups = 64;
  constexpr int kTile = kBf16 ? 8 : 4;  // 256 bytes of each row
  constexpr int64_t kAhead = 2;         // tiles
  __m256i sat_total = _mm256_setzero_si256(), flushed_total = _mm256_setzero_si256();
  alignas(32) T tile[kTile * kMxBlock * 16];
  // A column's codes kept until their line is whole: 32 bytes (FP8), 48 (E2M1, in 64).
  struct alignas(32) Codes32 {
    uint8_t b[E == Element::kE2m1 ? 64 : 32];
  };
  std::vector<Codes32> pending(16 * static_cast<size_t>(std::min(kChunkGroups, groups)));
  const bool lines = code_row % 64 == 0;
  for (int64_t g0 = 0; g0 < groups; g0 += kChunkGroups) {
    const int64_t gn = std::min(kChunkGroups, groups - g0);
    for (int64_t r0 = 0; r0 < rows; r0 += kMxBlock) {
      const T* strip = src + r0 * ld + c0 + 16 * g0;
      // This block row's codes: the first half of lines (kept), the second (streamed with the
      // kept half), or neither (stored).
      const auto at = reinterpret_cast<uintptr_t>(codes) + static_cast<uintptr_t>(r0);
      const bool first = lines && at % 64 == 0 && r0 + kMxBlock < rows;
      const bool second = lines && at % 64 == 32 && r0 > 0;
      // E2M1: this block row's quarter of its codes' lines where the line's four block rows all
      // lie in rows, else -1.
      int quarter = -1;
      if (E == Element::kE2m1 && lines) {
        const auto half_at = reinterpret_cast<uintptr_t>(codes) + static_cast<uintptr_t>(r0 / 2);
        if (half_at % 16 == 0) {
          const int q = static_cast<int>(half_at % 64 / 16);
          if (r0 >= q * kMxBlock && r0 + (4 - q) * kMxBlock <= rows) quarter = q;
        }
      }
      const int64_t tiles = (gn + kTile - 1) / kTile;
      for (int64_t t = 0; t < gn; t += kTile) {
        const int n = static_cast<int>(std::min<int64_t>(kTile, gn - t));
        // The tile kAhead on (past the chunk's last: the next block row's first): its rows
        // (none past x), its first line and lines a row.
        int64_t ahead = t / kTile + kAhead, ahead_r0 = r0;
        if (ahead >= tiles) ahead -= tiles, ahead_r0 += kMxBlock;
        const int64_t ahead_rows =
            ahead < tiles ? std::clamp<int64_t>(rows - ahead_r0, 0, kMxBlock) : 0;
        const uintptr_t ahead_first =
            reinterpret_cast<uintptr_t>(src) +
            sizeof(T) * static_cast<uintptr_t>(ahead_r0 * ld + c0 + 16 * (g0 + kTile * ahead));
        const uintptr_t line0 = ahead_first & ~uintptr_t{63};
        const int64_t ahead_per = (kMxBlock + n - 1) / n;  // rows with each group
        const int64_t ahead_lines =
            ahead_rows > 0
                ? static_cast<int64_t>(
                      (ahead_first + sizeof(T) * 16 * std::min<int64_t>(kTile, gn - kTile * ahead) -
                       line0 + 63) /
                      64)
                : 0;
        __m256i amax[kBf16 ? kTile : 2 * kTile];
        if constexpr (kBf16) {
          if (n == kTile)
            column_amax16<kTile>(strip + 16 * t, ld, amax, tile);
          else
            for (int g = 0; g < n; ++g)
              column_amax16<1>(strip + 16 * (t + g), ld, amax + g, tile + kMxBlock * 16 * g);
        } else {
          if (n == kTile)
            column_amax32<kTile>(strip + 16 * t, ld, amax, tile);
          else
            for (int g = 0; g < n; ++g)
              column_amax32<1>(strip + 16 * (t + g), ld, amax + 2 * g, tile + kMxBlock * 16 * g);
        }
        for (int g = 0; g < n; ++g) {
          const int64_t c = c0 + 16 * (g0 + t + g);
          for (int64_t k = ahead_per * g; k < std::min(ahead_rows, ahead_per * (g + 1)); ++k)
            for (int64_t l = 0; l < ahead_lines; ++l)
              _mm_prefetch(reinterpret_cast<const char*>(line0 + k * ld * sizeof(T) + 64 * l),
                           _MM_HINT_T1);
          if constexpr (E == Element::kE2m1) {
            // 16 bytes a column and block: the first three quarters of a line kept, the last
            // streamed with them, or (no whole line) stored as they come.
            uint8_t* out = codes + c * code_row + r0 / 2;
            uint8_t* kept = pending[16 * (t + g)].b;
            const auto block = [&](auto sink) {
              uint8_t* scale = scales + c * scale_row + r0 / kMxBlock;
              MxStatsRun* column_runs = kStats ? runs + (c - c0) : nullptr;
              if constexpr (kBf16)
                encode_column_block_e2m1_bf16<R, kStats>(tile + kMxBlock * 16 * g, amax[g], scale,
                                                         scale_row, sink, column_runs, sat_total,
                                                         flushed_total);
              else
                encode_column_block_e2m1<R, kStats>(tile + kMxBlock * 16 * g, amax + 2 * g, scale,
                                                    scale_row, sink, column_runs, sat_total,
                                                    flushed_total);
            };
            if (quarter < 0) {
              block([&](int j, __m128i v) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j * code_row), v);
              });
            } else if (quarter < 3) {
              block([&](int j, __m128i v) {
                _mm_store_si128(reinterpret_cast<__m128i*>(kept + 64 * j + 16 * quarter), v);
              });
            } else {
              block([&](int j, __m128i v) {
                auto* o = reinterpret_cast<__m256i*>(out + j * code_row - 48);
                const uint8_t* k = kept + 64 * j;
                _mm256_stream_si256(o, _mm256_load_si256(reinterpret_cast<const __m256i*>(k)));
                _mm256_stream_si256(
                    o + 1,
                    _mm256_set_m128i(v, _mm_load_si128(reinterpret_cast<const __m128i*>(k + 32))));
              });
            }
            continue;
          }
          auto* kept = reinterpret_cast<__m256i*>(pending[16 * (t + g)].b);
          uint8_t* out = codes + c * code_row + r0;
          const auto block = [&](auto sink) {
            uint8_t* scale = scales + c * scale_row + r0 / kMxBlock;
            MxStatsRun* column_runs = kStats ? runs + (c - c0) : nullptr;
            if constexpr (kBf16)
              encode_column_block16<E, R, kStats>(tile + kMxBlock * 16 * g, 16, amax[g], scale,
                                                  scale_row, sink, column_runs, sat_total);
            else
              encode_column_block32<E, R, kStats>(tile + kMxBlock * 16 * g, 16, amax + 2 * g, scale,
                                                  scale_row, sink, column_runs, sat_total);
          };
          if (first) {
            block([&](int j, __m256i v) { _mm256_store_si256(kept + j, v); });
          } else if (second) {
            block([&](int j, __m256i v) {
              auto* o = reinterpret_cast<__m256i*>(out + j * code_row - kMxBlock);
              _mm256_stream_si256(o, _mm256_load_si256(kept + j));
              _mm256_stream_si256(o + 1, v);
            });
          } else {
            block([&](int j, __m256i v) {
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * code_row), v);
            });
          }
        }
      }
    }
  }
  _mm_sfence();  // the streamed lines before any later load of them, on any thread
  if (kStats) {
    runs[0].saturated += lane_sum(sat_total);
    runs[0].flushed += lane_sum(flushed_total);
  }
}

template <typename T>
void encode_columns(const T* src, int64_t ld, int64_t rows, int64_t c0, int64_t groups,
                    Element element, E8m0Rounding rounding, uint8_t* codes, int64_t code_row,
                    uint8_t* scales, int64_t scale_row, MxStatsRun* runs) {
  const auto run = [&]<Element E, E8m0Rounding R>() {
    if (runs)
      encode_columns_as<E, R, true>(src, ld, rows, c0, groups, codes, code_row, scales, scale_row,
                                    runs);
    else
      encode_columns_as<E, R, false>(src, ld, rows, c0, groups, codes, code_row, scales, scale_row,
                                     nullptr);
  };
  const bool floor = rounding == E8m0Rounding::kFloor;
  if (element == Element::kE2m1 && floor)
    run.template operator()<Element::kE2m1, E8m0Rounding::kFloor>();
  else if (element == Element::kE2m1)
    run.template operator()<Element::kE2m1, E8m0Rounding::kRceil>();
  else if (element == Element::kE4m3 && floor)
    run.template operator()<Element::kE4m3, E8m0Rounding::kFloor>();
  else if (element == Element::kE4m3)
    run.template operator()<Element::kE4m3, E8m0Rounding::kRceil>();
  else if (floor)
    run.template operator()<Element::kE5m2, E8m0Rounding::kFloor>();
  else
    run.template operator()<Element::kE5m2, E8m0Rounding::kRceil>();
}

}  // namespace

void mx_encode_columns_bf16_avx2(const uint16_t* src, int64_t ld, int64_t rows, int64_t c0,
                                 int64_t groups, Element element, E8m0Rounding rounding,
                                 uint8_t* codes, int64_t code_row, uint8_t* scales,
                                 int64_t scale_row, MxStatsRun* runs) {
  encode_columns(src, ld, rows, c0, groups, element, rounding, codes, code_row, scales, scale_row,
                 runs);
}

void mx_encode_columns_f32_avx2(const float* src, int64_t ld, int64_t rows, int64_t c0,
                                int64_t groups, Element element, E8m0Rounding rounding,
                                uint8_t* codes, int64_t code_row, uint8_t* scales,
                                int64_t scale_row, MxStatsRun* runs) {
  encode_columns(src, ld, rows, c0, groups, element, rounding, codes, code_row, scales, scale_row,
                 runs);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
