// AVX2 (+FMA, F16C) bodies of the MX row casts to E2M1, which the AVX-512 level runs too (under
// the floor scale only without VBMI; else mx_rows_e2m1_avx512.cpp's body of the same table): eight
// blocks' amax and scales at a time, a group ahead, then each block cast on the source's bits:
// under the floor scale by a byte table of each element's step on the grid in 16-bit lanes
// (encode_fp4_groups; a float32 source's high halves, sticky), under rceil by integer rounding
// and two compares in the source's lanes (encode_groups); other blocks in float32 lanes, 8 at a
// time (four vectors a block), and those whose multiplier is NaN, and a row's short last block, by
// the scalar body. Float32 casts whose codes outgrow the caches stream them past the caches.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/common/fetch_ahead.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mx_rows_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"
#include "kernels/cpu/mx/mx_row_groups_avx2.h"
#include "kernels/cpu/mx/mx_rows_e2m1_table.h"

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// The E2M1 codes of 32 values in order (bytes, each below 16, the sign in bit 3) as 16 bytes
// of nibble pairs, the even element low.
[[gnu::always_inline]] inline void store_nibbles(uint8_t* out, __m256i codes) {
  const __m256i pairs = _mm256_maddubs_epi16(codes, _mm256_set1_epi16(0x1001));  // even + 16 odd
  const __m256i bytes = _mm256_packus_epi16(pairs, pairs);  // [0-7 0-7 | 8-15 8-15]
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm256_castsi256_si128(_mm256_permute4x64_epi64(bytes, 0x08)));
}

// One block of 32 float32 values from p cast to E2M1 on their bits (RowConstants, lane b) into
// 16 bytes at out, under the rceil scale (no product above 6). kKept: the elements not flushed
// (zero, or above 0.25 times the multiplier) subtracted from `kept` as -1 masks.
template <bool kKept>
inline void fast_block_f32_fp4(const float* p, uint8_t* out,
                               const RowConstants<Element::kE2m1, DType::Id::f32>& k, int b,
                               __m256i& kept) {
  using K = RowConstants<Element::kE2m1, DType::Id::f32>;
  const __m256i one = k.one32, magnitude = k.magnitude32;
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8));
  const __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
  const __m256i x3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 24));
  const __m256i add = _mm256_set1_epi32(k.add[b]);
  const __m256i quarter = _mm256_set1_epi32(k.from_less_1[b]);
  const __m256i three_quarters = _mm256_set1_epi32(k.three_quarters[b]);
  const auto code = [&](__m256i x) {
    const __m256i a = _mm256_and_si256(x, magnitude);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, K::kDrop), one);
    const __m256i rounded =
        _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(a, lsb), add), K::kDrop);
    const __m256i half = _mm256_cmpgt_epi32(a, quarter);
    const __m256i low = _mm256_sub_epi32(
        _mm256_setzero_si256(), _mm256_add_epi32(half, _mm256_cmpgt_epi32(a, three_quarters)));
    if constexpr (kKept)
      kept = _mm256_add_epi32(kept,
                              _mm256_or_si256(half, _mm256_cmpeq_epi32(a, _mm256_setzero_si256())));
    return _mm256_max_epi32(rounded, low);
  };
  const __m256i codes = _mm256_min_epu8(_mm256_packus_epi16(_mm256_packs_epi32(code(x0), code(x1)),
                                                            _mm256_packs_epi32(code(x2), code(x3))),
                                        k.max_code8);
  // The signs' 0x80 moved to bit 3 of each byte.
  const __m256i signs = _mm256_srli_epi16(
      _mm256_and_si256(_mm256_packs_epi16(_mm256_packs_epi32(x0, x1), _mm256_packs_epi32(x2, x3)),
                       k.sign8),
      4);
  store_nibbles(out, _mm256_permutevar8x32_epi32(_mm256_or_si256(codes, signs), k.dword_order));
}

// The same for 32 bfloat16 values in 16-bit lanes.
template <bool kKept>
inline void fast_block_bf16_fp4(const uint16_t* p, uint8_t* out,
                                const RowConstants<Element::kE2m1, DType::Id::bf16>& k, int b,
                                __m256i& kept) {
  using K = RowConstants<Element::kE2m1, DType::Id::bf16>;
  const __m256i one = k.one16, magnitude = k.magnitude16;
  const __m256i h0 = load16_bits(p), h1 = load16_bits(p + 16);
  const __m256i add = _mm256_set1_epi16(static_cast<int16_t>(k.add[b]));
  const __m256i quarter = _mm256_set1_epi16(static_cast<int16_t>(k.from_less_1[b]));
  const __m256i three_quarters = _mm256_set1_epi16(static_cast<int16_t>(k.three_quarters[b]));
  const auto code = [&](__m256i h) {
    const __m256i a = _mm256_and_si256(h, magnitude);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(a, K::kDrop), one);
    const __m256i rounded =
        _mm256_srai_epi16(_mm256_add_epi16(_mm256_add_epi16(a, lsb), add), K::kDrop);
    const __m256i half = _mm256_cmpgt_epi16(a, quarter);
    const __m256i low = _mm256_sub_epi16(
        _mm256_setzero_si256(), _mm256_add_epi16(half, _mm256_cmpgt_epi16(a, three_quarters)));
    if constexpr (kKept)
      kept = _mm256_add_epi16(kept,
                              _mm256_or_si256(half, _mm256_cmpeq_epi16(a, _mm256_setzero_si256())));
    return _mm256_max_epi16(rounded, low);
  };
  const __m256i codes = _mm256_min_epu8(_mm256_packus_epi16(code(h0), code(h1)), k.max_code8);
  const __m256i signs = _mm256_srli_epi16(_mm256_and_si256(_mm256_packs_epi16(h0, h1), k.sign8), 4);
  store_nibbles(out, _mm256_permute4x64_epi64(_mm256_or_si256(codes, signs), 0xD8));
}

// One group of eight blocks ready to encode: their amax bits, scales (written), multipliers
// and constants.
template <Element E, DType::Id kSrc>
struct RowGroup {
  __m256i amax;
  alignas(32) float mul[8];
  RowConstants<E, kSrc> k;
};

// RowGroup of the eight blocks from element i: their amax by integer maxima of the magnitude
// bits, their scales (into s) and multipliers as vectors, the lanes' exceptions from
// mx_scalar.h.
template <Element E, E8m0Rounding R, DType::Id kSrc>
[[gnu::always_inline]] inline void prepare_group(const void* src, int64_t i, uint8_t* s,
                                                 RowGroup<E, kSrc>& g) {
  __m256i m[8];
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    const int64_t j = i + b * kMxBlock;
    if constexpr (kSrc == DType::Id::bf16) {
      const auto* h = static_cast<const uint16_t*>(src);
      m[b] = _mm256_max_epi16(abs16_bits(h + j), abs16_bits(h + j + 16));
    } else {
      m[b] = _mm256_max_epi32(
          _mm256_max_epi32(abs_bits8<kSrc>(src, j), abs_bits8<kSrc>(src, j + 8)),
          _mm256_max_epi32(abs_bits8<kSrc>(src, j + 16), abs_bits8<kSrc>(src, j + 24)));
    }
  }
  g.amax = kSrc == DType::Id::bf16 ? transposed_max8_16(m) : transposed_max8(m);
  all_block_scales8<E, R>(g.amax, s, g.mul);
  g.k.set(g.amax, g.mul);
}

// The E2M1 row cast under the rceil scale of whole groups of eight blocks from the start of a
// segment: each group's amax, scales and constants (prepare_group), taken while the group before
// it is encoded (their latency hidden behind its blocks), then each block on its bits where it
// can (fast_block_*_fp4), else as mx_encode_as does. With kStats the statistics as mx_run_stats
// counts them: the fast blocks' flushed elements (the rest of those not kept, counted in lanes;
// none saturate under rceil), the records of a group at once where no amax is NaN. Returns the
// elements done (the rest: mx_encode_as).
template <Element E, E8m0Rounding R, DType::Id kSrc, bool kStats>
int64_t encode_groups(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                      SegmentStats* st) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr int64_t kGroup = 8 * kMxBlock;
  constexpr bool kHalf = kSrc == DType::Id::bf16;
  static_assert(E == Element::kE2m1 && R == E8m0Rounding::kRceil,
                "FP8 rows take encode_fp8_groups, E2M1 under the floor encode_fp4_groups");
  const int64_t groups = n / kGroup;
  if (groups == 0) return 0;
  // The fast blocks' kept elements as -1s: 32-bit lanes, or 16-bit lanes that see two
  // elements a block (moved out every 2^10 groups, below 2^15).
  __m256i kept = _mm256_setzero_si256();
  int64_t fast_fp4 = 0, kept_total = 0;
  const auto move_counts = [&] {
    kept_total += kHalf ? lane_sum16(kept) : lane_sum(kept);
    kept = _mm256_setzero_si256();
  };
  __m256 peak = _mm256_setzero_ps();
  RowGroup<E, kSrc> groups_ahead[2];
  prepare_group<E, R, kSrc>(src, 0, scales, groups_ahead[0]);
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t i = q * kGroup;
    const RowGroup<E, kSrc>& g = groups_ahead[q & 1];
    if (q + 1 < groups)
      prepare_group<E, R, kSrc>(src, i + kGroup, scales + (i + kGroup) / kMxBlock,
                                groups_ahead[(q + 1) & 1]);
    const uint8_t* s = scales + i / kMxBlock;
    // A NaN amax: every block's record in order, beside the scalar body's runs.
    const bool nan = kStats && _mm256_movemask_ps(_mm256_castsi256_ps(
                                   _mm256_cmpgt_epi32(g.amax, _mm256_set1_epi32(0x7F800000)))) != 0;
    for (int b = 0; b < 8; ++b) {
      const int64_t j = i + b * kMxBlock;
      bool done = false;
      if (!((g.k.slow >> b) & 1u)) {
        const auto* h = static_cast<const uint16_t*>(src) + j;
        const auto* f = static_cast<const float*>(src) + j;
        if constexpr (kHalf)
          fast_block_bf16_fp4<kStats>(h, codes + j / 2, g.k, b, kept);
        else
          fast_block_f32_fp4<kStats>(f, codes + j / 2, g.k, b, kept);
        done = true;
        ++fast_fp4;
      }
      if (!done) {
        if (s[b] == kE8m0Nan) {  // NaN multiplier: the scalar body
          encode_scalar<E, R, kSrc>(src, j, kMxBlock, codes, scales, st);
          continue;
        }
        encode_block<E, R, kSrc>(src, j, g.mul[b], codes, kStats ? st : nullptr);
      }
      if (nan) {
        alignas(32) uint32_t bits[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(bits), g.amax);
        record_block<E, kSrc>(st->run, src, j, bits[b], s[b], g.mul[b]);
      }
    }
    if constexpr (kStats) {
      if (!nan) record_group(st->run, g.amax, g.mul, peak);
      if (kHalf && (q & 1023) == 1023) move_counts();
    }
  }
  if constexpr (kStats) {
    move_counts();
    st->run.flushed += kMxBlock * fast_fp4 + kept_total;
    finish_peak(st->run, peak, lim.max);
  }
  return groups * kGroup;
}

// --- The AVX2 body of the floor table (mx_rows_e2m1_table.h) ---------------------------------

// Its lookup's constants: one pshufb table of the codes less 1 of b = 7..20 at b - 7, and the
// index's shift to it, 9, which is also a negative element's sign and 1 (one: a positive's).
struct Fp4Avx2Table : Fp4Table {
  __m256i codes, nine, one;
  Fp4Avx2Table()
      : codes(_mm256_setr_epi8(1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 6, 6, 6, 1, 1, 1, 2, 2, 3, 3,
                               4, 4, 5, 5, 6, 6, 6, 6, 6)),
        nine(_mm256_set1_epi8(9)),
        one(_mm256_set1_epi8(1)) {}
};

// The index b - 16 of 32 elements' magnitudes (the source's element order within 128-bit
// halves: bfloat16 [0-7 16-23 | 8-15 24-31], float32 [0-3 8-11 16-19 24-27 | 4-7 ...]), their
// signs in the same order, and (kStats) their saturated and flushed counts.
template <DType::Id kSrc, bool kStats>
[[gnu::always_inline]] inline __m256i fp4_pairs(const void* src, int64_t j, int32_t off_bits,
                                                const Fp4Avx2Table& t, Fp4Counts& n) {
  using L = Fp4Lanes;
  __m256i h0, h1;  // bfloat16 bits: a float32 source's high halves, sticky in bit 0
  if constexpr (kSrc == DType::Id::bf16) {
    const auto* p = static_cast<const uint16_t*>(src) + j;
    h0 = load16_bits(p);
    h1 = load16_bits(p + 16);
  } else {
    // Each float32's sticky high half: the high half shifted down (its sign extended, so the
    // pack keeps it) or'd with the low half's minimum with 1.
    const auto* p = static_cast<const float*>(src) + j;
    const __m256i one = t.one32;
    const auto sticky = [&](int v) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * v));
      return _mm256_or_si256(_mm256_srai_epi32(x, 16), _mm256_min_epu16(x, one));
    };
    h0 = _mm256_packs_epi32(sticky(0), sticky(1));  // [0-3 8-11 | 4-7 12-15]
    h1 = _mm256_packs_epi32(sticky(2), sticky(3));
  }
  const __m256i off = _mm256_set1_epi16(static_cast<int16_t>(off_bits));
  const __m256i mag = t.magnitude16;
  const __m256i a0 = _mm256_and_si256(h0, mag), a1 = _mm256_and_si256(h1, mag);
  const __m256i t0 = _mm256_add_epi16(a0, off), t1 = _mm256_add_epi16(a1, off);
  // (t + bit 6 of a) >> kShift, the bit as a compare's -1 subtracted: a compare in place of a
  // shift, which on Zen 4 shares two pipes with the packs and table lookups.
  const __m256i bit = t.bit6_16;
  const __m256i u0 = _mm256_sub_epi16(t0, _mm256_cmpeq_epi16(_mm256_and_si256(a0, bit), bit));
  const __m256i u1 = _mm256_sub_epi16(t1, _mm256_cmpeq_epi16(_mm256_and_si256(a1, bit), bit));
  const __m256i q =
      _mm256_packs_epi16(_mm256_srai_epi16(u0, L::kShift), _mm256_srai_epi16(u1, L::kShift));
  const __m256i signs = _mm256_packs_epi16(h0, h1);
  __m256i sat, zero;
  if constexpr (kStats) {
    // y > 6: u above 3 steps (as fp4_pairs512 tests it; u saturated to a byte keeps it).
    sat = _mm256_cmpgt_epi8(_mm256_packs_epi16(u0, u1), t.sat16);
    zero = _mm256_packs_epi16(a0, a1);
  }
  // b - 16 = q (-128 where the pack saturates, up to 4). The code: b <= 0 gives 0, b = 1..6
  // gives 1, b = 7..20 the table's (code less 1) at b - 7 = q + 9, which pshufb reads as 0 for
  // every b below 7 (its sign set): so the table's entry, plus 1 (9 with the sign's bit 8 where
  // x is negative), less 1 where b <= 0 (the compare's -1, which the flushed count takes too).
  const __m256i low = _mm256_cmpgt_epi8(t.first_flushed, q);  // b <= 0
  const __m256i codes = _mm256_shuffle_epi8(t.codes, _mm256_add_epi8(q, t.nine));
  if constexpr (kStats) {
    // Index 0 and x nonzero: the index's mask, 0 where |x|'s byte is.
    n.flushed = _mm256_sub_epi8(n.flushed, _mm256_sign_epi8(low, zero));
    n.sat = _mm256_sub_epi8(n.sat, sat);
    // Counted here, in registers: GCC otherwise sinks the counts below the group's other
    // blocks, spilling each block's lanes until then.
    asm("" : "+x"(n.sat), "+x"(n.flushed));
  }
  __m256i nibbles =
      _mm256_add_epi8(_mm256_add_epi8(codes, low), _mm256_blendv_epi8(t.one, t.nine, signs));
  if constexpr (kSrc == DType::Id::f32)
    nibbles = _mm256_permutevar8x32_epi32(nibbles, t.dword_order);  // elements in order
  return _mm256_maddubs_epi16(nibbles, t.pair);
}

// Two blocks' code pairs (fp4_pairs) stored as 32 bytes at out in element order, streamed
// (kStream) past the caches. kDwords: the pairs come as dwords [a 0-7, a 16-23, b 0-7, b 16-23 |
// a 8-15, ...] (a bfloat16 source); else as qwords [a 0-15, b 0-15 | a 16-31, b 16-31] (a float32
// source). Two elements a byte.
template <bool kDwords, bool kStream>
[[gnu::always_inline]] inline void store_fp4_pairs(uint8_t* out, __m256i a, __m256i b,
                                                   const Fp4Table& t) {
  const __m256i bytes = _mm256_packus_epi16(a, b);
  const __m256i ordered = kDwords ? _mm256_permutevar8x32_epi32(bytes, t.dword_order)
                                  : _mm256_permute4x64_epi64(bytes, 0xD8);
  if constexpr (kStream)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out), ordered);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

// The level's pairs and their store for encode_fp4_groups (fp4_group_blocks): a bfloat16
// source's pairs come as dwords, a float32 source's as qwords.
struct Fp4Avx2Body {
  using Table = Fp4Avx2Table;
  template <DType::Id kSrc, bool kStats>
  [[gnu::always_inline]] static __m256i pairs(const void* src, int64_t j, int32_t off_bits,
                                              const Table& t, Fp4Counts& counts) {
    return fp4_pairs<kSrc, kStats>(src, j, off_bits, t, counts);
  }
  template <DType::Id kSrc, bool kStream>
  [[gnu::always_inline]] static void store(uint8_t* out, __m256i a, __m256i b, const Table& t) {
    store_fp4_pairs<kSrc == DType::Id::bf16, kStream>(out, a, b, t);
  }
};

// encode_fp4_groups under the floor scale, encode_groups under rceil.
template <Element E, E8m0Rounding R, DType::Id kSrc, bool kStream>
struct Fp4Groups {
  static int64_t run(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                     SegmentStats* st) {
    if constexpr (R == E8m0Rounding::kFloor)
      return st ? encode_fp4_groups<Fp4Avx2Body, kSrc, true, kStream>(src, n, codes, scales, st)
                : encode_fp4_groups<Fp4Avx2Body, kSrc, false, kStream>(src, n, codes, scales, st);
    else
      return st ? encode_groups<E, R, kSrc, true>(src, n, codes, scales, st)
                : encode_groups<E, R, kSrc, false>(src, n, codes, scales, st);
  }
};

}  // namespace

MxStatsRun avx2::mx_rows_e2m1(const void* src, DType dtype, int64_t n, E8m0Rounding r,
                              uint8_t* codes, uint8_t* scales, bool stats, bool stream) {
  return encode_rows_of<Fp4Groups, Element::kE2m1>(src, dtype, n, r, codes, scales, stats, stream);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
