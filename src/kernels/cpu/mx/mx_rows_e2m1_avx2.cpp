// AVX2 (+FMA, F16C) bodies of the MX row casts to E2M1, which the AVX-512 level runs too: eight
// blocks' amax and scales at a time, a group ahead, then each block cast on the source's bits:
// under the floor scale by a byte table of each element's step on the grid in 16-bit lanes
// (encode_fp4_groups; a float32 source's high halves, sticky), under rceil by integer rounding
// and two compares in the source's lanes (encode_groups); other blocks in float32 lanes, 8 at a
// time (four vectors a block), and those whose multiplier is NaN, and a row's short last block, by
// the scalar body. Float32 casts whose codes outgrow the caches stream them past the caches.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/common/fetch_page_ahead.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mx_rows_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"
#include "kernels/cpu/mx/mx_row_groups_avx2.h"

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

// --- E2M1 rows under the floor scale, by a table -------------------------------------------
//
// Under the floor scale a block's multiplier is 2^e with e = 129 - E for its amax's biased
// exponent E, so y = |x| * 2^e lies below 8 and, for E in [5, 254], y's bits are |x|'s plus
// e << kFrac wherever y >= 2^-2 (below it, and for a subnormal x, the sum stays below 2^-2's
// bits too). Every step of e2m1_code's grid lies at y = 0.25 * (1 + k / 4) * 2^n, a multiple of
// kStep = 2^(kFrac - 2) in the bits v = bits(y) - bits(0.25): code 1 from v > 0, 2 from v >= 192,
// 3 from v > 288, 4 from v >= 352, 5 from v > 416, 6 from v >= 480, 7 from v > 544 (bfloat16
// units, kStep = 32; ties round to the even code). The index b = ceil((v + bit6) / kStep), bit6
// the bit of v worth 2 kSteps, puts every such v on its side: a non-strict step (k = 6, 11, 15
// steps) has that bit set and a strict one (0, 9, 13, 17) clear, and a v between two steps
// takes the upper's index either way. b (0..20) gives the code through two 16-entry byte tables
// (Fp4Table), 32 codes a vector: 16-bit lanes only add, shift and pack. Saturated: y > 6;
// flushed: nonzero x whose index is 0. Blocks of other E (tiny, infinite or NaN amax) and their
// group take encode_block; a zero block's index is 0. A float32 source is cast on bfloat16 bits:
// each element's high half with bit 0 set where its low half is not 0 (sticky). The steps and 6
// are bfloat16 values with bit 0 clear, so each compare with them (strict or not), and the zero
// test, comes out on those bits as on the float32 bits.

// The per-group values of eight blocks: amax bits (float32's), multipliers and the offsets
// added to |x|'s bits (((1 - 4 max(E, 5)) << kShift) - 1: the bits of 0.25, e << kFrac, the
// ceiling's kStep - 1 and the table's 16 steps folded into one).
struct Fp4Group {
  __m256i amax;
  alignas(32) float mul[8];
  alignas(32) int32_t off[8];
  unsigned slow;  // bit b: block b is not cast by the table
};

// The table's 16-bit lanes (bfloat16 bits): kFrac fraction bits, kStep = 2^kShift.
struct Fp4Lanes {
  static constexpr int kFrac = 7;
  static constexpr int kShift = kFrac - 2;
};

// The constants of the table's groups and blocks, made once a segment and read from memory
// (GCC would otherwise rebuild each broadcast in registers every group).
struct Fp4Table {
  __m256i low, high;      // the codes of b = 0..15 and 16..31 in each 128-bit half
  __m256i floor16;        // -16: the lowest index b - 16 the low table reads
  __m256i top;            // 0x80: the low table's index b + 0x70 from max(b - 16, -16)
  __m256i eight;          // the sign's bit of a code
  __m256i first_flushed;  // -15: b - 16 below it is index 0
  __m256i sat16;          // 95 (3 steps less 1) in bytes
  __m256i pair;           // maddubs weights 1, 16: two codes to a byte
  __m256i dword_order;
  __m256i magnitude16, magnitude32, one32;
  __m256i bit6_16;  // the bit of |x| worth 2 kSteps
  // The groups' (32-bit lanes): 2 (emax of E2M1), 4, 5, 255, 254, one, inf's bits, 2^126's.
  __m256i two, four, five, c255, c254, inf, scale0_mul;
  Fp4Table()
      : low(_mm256_setr_epi8(0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 5, 0, 1, 1, 1, 1, 1, 1, 2,
                             2, 2, 3, 3, 4, 4, 5, 5)),
        high(_mm256_setr_epi8(6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 7, 7, 7, 7, 7,
                              7, 7, 7, 7, 7, 7, 7, 7, 7)),
        floor16(_mm256_set1_epi8(-16)),
        top(_mm256_set1_epi8(static_cast<char>(0x80))),
        eight(_mm256_set1_epi8(8)),
        first_flushed(_mm256_set1_epi8(-15)),
        sat16(_mm256_set1_epi8((3 << Fp4Lanes::kShift) - 1)),
        pair(_mm256_set1_epi16(0x1001)),
        dword_order(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)),
        magnitude16(_mm256_set1_epi16(0x7FFF)),
        magnitude32(_mm256_set1_epi32(0x7FFFFFFF)),
        one32(_mm256_set1_epi32(1)),
        bit6_16(_mm256_set1_epi16(1 << (Fp4Lanes::kShift + 1))),
        two(_mm256_set1_epi32(2)),
        four(_mm256_set1_epi32(4)),
        five(_mm256_set1_epi32(5)),
        c255(_mm256_set1_epi32(255)),
        c254(_mm256_set1_epi32(254)),
        inf(_mm256_set1_epi32(0x7F800000)),
        scale0_mul(_mm256_castps_si256(_mm256_set1_ps(0x1p126f))) {}
};

// Fp4Group of the eight blocks from element i, their scales into s: the codes and multipliers
// of block_scales8 (floor), the table's blocks (E in [5, 254], or amax 0) and their offsets.
template <DType::Id kSrc>
[[gnu::always_inline]] inline void prepare_fp4(const void* src, int64_t i, uint8_t* s,
                                               const Fp4Table& t, Fp4Group& g) {
  __m256i m[8];
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    const int64_t j = i + b * kMxBlock;
    if constexpr (kSrc == DType::Id::bf16) {
      const auto* h = static_cast<const uint16_t*>(src) + j;
      m[b] = _mm256_max_epi16(_mm256_and_si256(load16_bits(h), t.magnitude16),
                              _mm256_and_si256(load16_bits(h + 16), t.magnitude16));
    } else {
      const auto* x = reinterpret_cast<const __m256i*>(static_cast<const float*>(src) + j);
      const auto a = [&](int v) {
        return _mm256_and_si256(_mm256_loadu_si256(x + v), t.magnitude32);
      };
      m[b] = _mm256_max_epi32(_mm256_max_epi32(a(0), a(1)), _mm256_max_epi32(a(2), a(3)));
    }
  }
  g.amax = kSrc == DType::Id::bf16 ? transposed_max8_16(m) : transposed_max8(m);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i e = _mm256_srli_epi32(g.amax, 23);
  // e8m0_floor: E - 2, at least 0; NaN 0xFF. The multiplier 2^(127 - code), 2^126 for code 0
  // and 0 for NaN (floor_reciprocal).
  const __m256i nan = _mm256_cmpgt_epi32(g.amax, t.inf);
  const __m256i c = _mm256_or_si256(_mm256_max_epi32(_mm256_sub_epi32(e, t.two), zero),
                                    _mm256_srli_epi32(nan, 24));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(s), bytes_of(c));
  const __m256i mul = _mm256_blendv_epi8(_mm256_slli_epi32(_mm256_sub_epi32(t.c254, c), 23),
                                         t.scale0_mul, _mm256_cmpeq_epi32(c, zero));
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.mul), _mm256_andnot_si256(nan, mul));
  const __m256i fast = _mm256_or_si256(
      _mm256_and_si256(_mm256_cmpgt_epi32(e, t.four), _mm256_cmpgt_epi32(t.c255, e)),
      _mm256_cmpeq_epi32(g.amax, zero));
  g.slow = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(fast))) & 0xFFu;
  const __m256i steps =
      _mm256_sub_epi32(t.one32, _mm256_slli_epi32(_mm256_max_epi32(e, t.five), 2));
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.off),
                     _mm256_sub_epi32(_mm256_slli_epi32(steps, Fp4Lanes::kShift), t.one32));
}

// The statistics' lanes of the table's blocks: saturated and flushed elements, counts in bytes,
// moved out at least every 128 blocks.
struct Fp4Counts {
  __m256i sat, flushed;
  [[gnu::always_inline]] void clear() { sat = flushed = _mm256_setzero_si256(); }
};

// The index b - 16 of 32 elements' magnitudes (the source's element order within 128-bit
// halves: bfloat16 [0-7 16-23 | 8-15 24-31], float32 [0-3 8-11 16-19 24-27 | 4-7 ...]), their
// signs in the same order, and (kStats) their saturated and flushed counts.
template <DType::Id kSrc, bool kStats>
[[gnu::always_inline]] inline __m256i fp4_pairs(const void* src, int64_t j, int32_t off_bits,
                                                const Fp4Table& t, Fp4Counts& n) {
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
  const __m256i v0 = _mm256_srai_epi16(
      _mm256_sub_epi16(t0, _mm256_cmpeq_epi16(_mm256_and_si256(a0, bit), bit)), L::kShift);
  const __m256i v1 = _mm256_srai_epi16(
      _mm256_sub_epi16(t1, _mm256_cmpeq_epi16(_mm256_and_si256(a1, bit), bit)), L::kShift);
  const __m256i q = _mm256_packs_epi16(v0, v1);
  const __m256i signs = _mm256_packs_epi16(h0, h1);
  __m256i sat, zero;
  if constexpr (kStats) {
    // y > 6: v > 18 steps, t above 3 steps less 1 (95: t saturated to a byte keeps it).
    sat = _mm256_cmpgt_epi8(_mm256_packs_epi16(t0, t1), t.sat16);
    zero = _mm256_packs_epi16(a0, a1);
  }
  const __m256i codes = _mm256_or_si256(
      _mm256_shuffle_epi8(t.high, q),
      _mm256_shuffle_epi8(t.low, _mm256_xor_si256(_mm256_max_epi8(q, t.floor16), t.top)));
  if constexpr (kStats) {
    // Index 0 (b - 16 below -15) and x nonzero: the index's mask, 0 where |x|'s byte is.
    n.flushed =
        _mm256_sub_epi8(n.flushed, _mm256_sign_epi8(_mm256_cmpgt_epi8(t.first_flushed, q), zero));
    n.sat = _mm256_sub_epi8(n.sat, sat);
    // Counted here, in registers: GCC otherwise sinks the counts below the group's other
    // blocks, spilling each block's lanes until then.
    asm("" : "+x"(n.sat), "+x"(n.flushed));
  }
  __m256i nibbles = _mm256_blendv_epi8(codes, _mm256_or_si256(codes, t.eight), signs);
  if constexpr (kSrc == DType::Id::f32)
    nibbles = _mm256_permutevar8x32_epi32(nibbles, t.dword_order);  // elements in order
  return _mm256_maddubs_epi16(nibbles, t.pair);
}

// The codes of two blocks' pairs (fp4_pairs) stored as 32 bytes at out, streamed (kStream) past
// the caches.
template <DType::Id kSrc, bool kStream>
[[gnu::always_inline]] inline void store_fp4_pairs(uint8_t* out, __m256i a, __m256i b,
                                                   const Fp4Table& t) {
  const __m256i bytes = _mm256_packus_epi16(a, b);
  // bfloat16: dwords [a 0-7, a 16-23, b 0-7, b 16-23 | a 8-15, ...]; float32: qwords
  // [a 0-15, b 0-15 | a 16-31, b 16-31] (two elements a byte).
  const __m256i ordered = kSrc == DType::Id::bf16
                              ? _mm256_permutevar8x32_epi32(bytes, t.dword_order)
                              : _mm256_permute4x64_epi64(bytes, 0xD8);
  if constexpr (kStream)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out), ordered);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

// The E2M1 floor row cast of whole groups of eight blocks (the table's), each group's amax,
// scales and offsets taken while the group before it is encoded; a group with a block the
// table does not take goes block by block through encode_block. Statistics as encode_groups
// counts them. Returns the elements done.
template <DType::Id kSrc, bool kStats, bool kStream>
int64_t encode_fp4_groups(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                          SegmentStats* st) {
  constexpr E8m0Rounding R = E8m0Rounding::kFloor;
  constexpr Element E = Element::kE2m1;
  constexpr int64_t kGroup = 8 * kMxBlock;
  const int64_t groups = n / kGroup;
  if (groups == 0) return 0;
  Fp4Table t;
  asm("" : "+m"(t));  // its constants read from memory, not rebuilt
  Fp4Counts counts;
  counts.clear();
  __m256 peak = _mm256_setzero_ps();
  const auto move_counts = [&] {
    // Four 64-bit sums of bytes below 2^31: lane_sum's high halves are 0.
    st->run.saturated += lane_sum(_mm256_sad_epu8(counts.sat, _mm256_setzero_si256()));
    st->run.flushed += lane_sum(_mm256_sad_epu8(counts.flushed, _mm256_setzero_si256()));
    counts.clear();
  };
  Fp4Group ahead[2];
  prepare_fp4<kSrc>(src, 0, scales, t, ahead[0]);
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t i = q * kGroup;
    const Fp4Group& g = ahead[q & 1];
    fetch_page_ahead<kSrc>(src, i);
    if (q + 1 < groups)
      prepare_fp4<kSrc>(src, i + kGroup, scales + (i + kGroup) / kMxBlock, t, ahead[(q + 1) & 1]);
    if (g.slow == 0) {
#pragma GCC unroll 4
      for (int b = 0; b < 8; b += 2) {
        const int64_t j = i + b * kMxBlock;
        const __m256i pa = fp4_pairs<kSrc, kStats>(src, j, g.off[b], t, counts);
        const __m256i pb = fp4_pairs<kSrc, kStats>(src, j + kMxBlock, g.off[b + 1], t, counts);
        store_fp4_pairs<kSrc, kStream>(codes + j / 2, pa, pb, t);
      }
      if constexpr (kStats) record_group(st->run, g.amax, g.mul, peak);
    } else {
      const bool nan = kStats && _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                     g.amax, _mm256_set1_epi32(0x7F800000)))) != 0;
      alignas(32) uint32_t bits[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(bits), g.amax);
      for (int b = 0; b < 8; ++b) {
        const int64_t j = i + b * kMxBlock;
        encode_block<E, R, kSrc>(src, j, g.mul[b], codes, kStats ? st : nullptr);
        if (nan) record_block<E, kSrc>(st->run, src, j, bits[b], scales[j / kMxBlock], g.mul[b]);
      }
      if (kStats && !nan) record_group(st->run, g.amax, g.mul, peak);
    }
    if (kStats && (q & 15) == 15) move_counts();
  }
  if constexpr (kStream) _mm_sfence();
  if constexpr (kStats) {
    move_counts();
    finish_peak(st->run, peak, element_limits(E).max);
  }
  return groups * kGroup;
}

// encode_fp4_groups under the floor scale, encode_groups under rceil.
template <Element E, E8m0Rounding R, DType::Id kSrc, bool kStream>
struct Fp4Groups {
  static int64_t run(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                     SegmentStats* st) {
    if constexpr (R == E8m0Rounding::kFloor)
      return st ? encode_fp4_groups<kSrc, true, kStream>(src, n, codes, scales, st)
                : encode_fp4_groups<kSrc, false, kStream>(src, n, codes, scales, st);
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
