// AVX-512 (F, BW, VL) body of the MX row casts of bfloat16 to FP8 (E4M3, E5M2), a block of 32
// elements a vector. Each group of eight blocks is prepared while the group before it is cast: its
// amax, scales and per-block constants as the AVX2 body takes them (mx_fp8_groups_avx2.h), but for
// the check of each block's least nonzero |x| against the normal codes, which the cast makes with
// a compare into a mask instead (the AVX2 body's unsigned minima folded across the blocks cost
// more than the compares). A group whose blocks all pass is cast on the source's bits (the
// arithmetic of RowConstants' comment, mx_blocks_avx2.h), two blocks to 64 code bytes at a time:
// codes by integer rounding in 16-bit lanes, saturated to bytes by the packs and a byte minimum,
// their signs by one ternary-logic op, the saturated elements counted in lanes under compare
// masks. A block holding a nonzero element below the normal codes (about one group in 40 of
// N(0, 3) data) is cast again here in float32 lanes (recast_low_blocks): handing its group to the
// AVX2 body, a call that builds the segment's table, cost about 300 ns a group out of the caches
// (bench/results/2026-11-30-2050-mxrow7.md), where the recast costs a few. A group the bits do not
// take at all (a multiplier that is not a normal power of 2, an infinite or NaN amax) is cast by
// the AVX2 body (mx_rows_fp8_avx2.cpp), whose float32 lanes and scalar body take such blocks, as
// are a segment's blocks after its whole groups. Float32 sources take the AVX2 body: this level's
// float32 body (two vectors a block) measured 5% faster in the caches but slower out of them.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/common/fetch_ahead.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mx_rows_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it; with FMA and
// F16C, which the AVX2 level's helpers this file shares take (the AVX-512 level requires them,
// cpu_features.cpp).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"
#include "kernels/cpu/mx/mx_fp8_groups_avx2.h"
#include "kernels/cpu/mx/mx_row_groups_avx2.h"

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// An Fp8Group with each block's least |x| bits with a normal code, less 1 (finish_fp8_group's
// `from`), which its cast checks the block against.
struct Fp8Group512 : Fp8Group {
  alignas(32) int32_t from[8];
};

constexpr DType::Id kSrc = DType::Id::bf16;

// A segment's 512-bit constants, read from memory.
template <Element E>
struct Fp8Lanes512 {
  __m512i one, magnitude, max_code8, sign8;
  // The permute that puts two blocks' packed codes in element order: the packs leave qwords
  // [a 0-7, b 0-7 | a 8-15, b 8-15 | ...] (blocks a, b).
  __m512i order;
  Fp8Lanes512()
      : one(_mm512_set1_epi16(1)),
        magnitude(_mm512_set1_epi16(0x7FFF)),
        max_code8(_mm512_set1_epi8(RowConstants<E, kSrc>::kMaxCode)),
        sign8(_mm512_set1_epi8(static_cast<char>(0x80))),
        order(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7)) {}
};

// The Fp8Group of the eight blocks from element i, their scales into s: prepare_fp8 of the AVX2
// body without the least |x| bits, which the blocks' cast checks (fp8_pair).
template <Element E, E8m0Rounding R, bool kSat>
[[gnu::always_inline]] inline void prepare_fp8(const uint16_t* src, int64_t i, uint8_t* s,
                                               const Fp8Table<E, kSrc>& t, Fp8Group512& g) {
  __m256i hi[8];
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    const uint16_t* h = src + i + b * kMxBlock;
    hi[b] = _mm256_max_epi16(_mm256_and_si256(load16_bits(h), t.magnitude16),
                             _mm256_and_si256(load16_bits(h + 16), t.magnitude16));
  }
  const __m256i amax = transposed_max8_16(hi);
  if constexpr (R == E8m0Rounding::kRceil)
    rceil_group<E, kSrc, false>(amax, amax, s, t, g, g.from);
  else
    finish_fp8_group<E, R, kSrc, kSat, false>(amax, amax, s, t, g, g.from);
}

// The codes (before the packs) of one block (bits h) under its `add`; its lanes holding a nonzero
// |x| below `from` (Fp8Group512::from) set in `bad`; with kSat its elements above `above`
// counted in sat's lanes.
template <Element E, bool kSat>
[[gnu::always_inline]] inline __m512i lane_codes(__m512i h, __m512i add, __m512i from,
                                                 __m512i above, const Fp8Lanes512<E>& w,
                                                 __m512i& sat, uint64_t& bad) {
  using K = RowConstants<E, kSrc>;
  const __m512i a = _mm512_and_si512(h, w.magnitude);
  bad |= _mm512_cmplt_epu16_mask(_mm512_sub_epi16(a, w.one), from);
  if constexpr (kSat)
    sat = _mm512_mask_add_epi16(sat, _mm512_cmpgt_epi16_mask(a, above), sat, w.one);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(a, K::kDrop), w.one);
  return _mm512_srai_epi16(_mm512_add_epi16(_mm512_add_epi16(a, lsb), add), K::kDrop);
}

// Blocks b and b + 1 of group g from element j cast on their bits, their 64 codes stored at out;
// their lanes that need another body set in `bad`. kClamp as the AVX2 body's fp8_block takes it
// (under rceil no code exceeds the element's largest).
template <Element E, bool kSat, bool kClamp>
[[gnu::always_inline]] inline void fp8_pair(const uint16_t* src, int64_t j, uint8_t* out,
                                            const Fp8Group512& g, int b, const Fp8Lanes512<E>& w,
                                            __m512i& sat, uint64_t& bad) {
  const __m512i h0 = _mm512_loadu_si512(src + j), h1 = _mm512_loadu_si512(src + j + kMxBlock);
  const auto lanes = [&](const int32_t* v, int k) {
    return _mm512_set1_epi16(static_cast<int16_t>(v[k]));
  };
  const auto code = [&](__m512i h, int k) {
    return lane_codes<E, kSat>(h, lanes(g.add, k), lanes(g.from, k),
                               kSat ? lanes(g.sat_above, k) : h, w, sat, bad);
  };
  const __m512i codes = _mm512_packus_epi16(code(h0, b), code(h1, b + 1));
  const __m512i signs = _mm512_packs_epi16(h0, h1);
  // codes (below the element's largest) | the signs' 0x80.
  const __m512i bytes = _mm512_ternarylogic_epi32(
      kClamp ? _mm512_min_epu8(codes, w.max_code8) : codes, signs, w.sign8, 0xF8);
  _mm512_storeu_si512(out, _mm512_permutexvar_epi64(w.order, bytes));
}

// The blocks of group g (from element i) that hold a nonzero |x| below the normal codes, whose
// codes fp8_pair stored wrong, cast again in float32 lanes as the AVX2 body casts them
// (encode_block), their saturated and flushed elements counted in st's lanes; with kSat the
// group's other blocks' saturated elements counted into st->run as fp8_pair's lanes count them
// (the group's lanes, which hold the recast blocks' as well, are dropped).
template <Element E, E8m0Rounding R, bool kSat>
[[gnu::always_inline]] inline void recast_low_blocks(const uint16_t* src, int64_t i, uint8_t* codes,
                                                     const Fp8Group512& g, const Fp8Lanes512<E>& w,
                                                     SegmentStats* st) {
  for (int b = 0; b < 8; ++b) {
    const int64_t j = i + b * kMxBlock;
    const __m512i a = _mm512_and_si512(_mm512_loadu_si512(src + j), w.magnitude);
    const __m512i from = _mm512_set1_epi16(static_cast<int16_t>(g.from[b]));
    if (_mm512_cmplt_epu16_mask(_mm512_sub_epi16(a, w.one), from) != 0) {
      encode_block<E, R, kSrc>(src, j, g.mul[b], codes, st);
    } else if constexpr (kSat) {
      const __m512i above = _mm512_set1_epi16(static_cast<int16_t>(g.sat_above[b]));
      st->run.saturated += __builtin_popcount(_mm512_cmpgt_epi16_mask(a, above));
    }
  }
}

// The FP8 row cast of a bfloat16 segment: its whole groups of eight blocks here where every block
// passes the group's checks (the blocks holding a nonzero |x| below the normal codes cast again,
// recast_low_blocks), else by the AVX2 body, as is the rest; statistics (kStats) as mx_run_stats
// counts them, the AVX2 body's runs appended in their place.
template <Element E, E8m0Rounding R, bool kStats>
MxStatsRun encode_fp8_rows(const uint16_t* src, int64_t n, uint8_t* codes, uint8_t* scales) {
  constexpr int64_t kGroup = 8 * kMxBlock;
  constexpr bool kSat = kStats && R == E8m0Rounding::kFloor;
  MxStatsRun run;
  const auto by_avx2 = [&](int64_t i, int64_t len) {
    const MxStatsRun r = avx2::mx_rows_fp8(src + i, kBFloat16, len, E, R, codes + i,
                                           scales + i / kMxBlock, kStats, false);
    if constexpr (kStats) run.append(r);
  };
  const int64_t groups = n / kGroup;
  if (groups > 0) {
    Fp8Table<E, kSrc> t;
    Fp8Lanes512<E> w;
    asm("" : "+m"(t), "+m"(w));  // their constants read from memory, not rebuilt
    // Saturated elements: 16-bit lanes that see one element a block (moved out every 2^10
    // groups, below 2^15); a group's own until its blocks pass.
    __m512i sat = _mm512_setzero_si512();
    const auto move_sat = [&] {
      run.saturated += _mm512_reduce_add_epi32(_mm512_madd_epi16(sat, w.one));
      sat = _mm512_setzero_si512();
    };
    __m256 peak = _mm256_setzero_ps();
    // The recast blocks' saturated and flushed elements (encode_block's lanes), with kSat the
    // saturated elements of the other blocks of their groups (low.run.saturated).
    SegmentStats low{_mm256_setzero_si256(), _mm256_setzero_si256(), {}};
    Fp8Group512 ahead[2];
    prepare_fp8<E, R, kSat>(src, 0, scales, t, ahead[0]);
    for (int64_t q = 0; q < groups; ++q) {
      const int64_t i = q * kGroup;
      const Fp8Group512& g = ahead[q & 1];
      fetch_group_ahead<kSrc, false>(src, i);
      if (q + 1 < groups)
        prepare_fp8<E, R, kSat>(src, i + kGroup, scales + (i + kGroup) / kMxBlock, t,
                                ahead[(q + 1) & 1]);
      if (g.slow == 0) {
        __m512i group_sat = _mm512_setzero_si512();
        uint64_t bad = 0;
#pragma GCC unroll 4
        for (int b = 0; b < 8; b += 2) {
          const int64_t j = i + b * kMxBlock;
          fp8_pair<E, kSat, R == E8m0Rounding::kFloor>(src, j, codes + j, g, b, w, group_sat, bad);
        }
        if (bad == 0) [[likely]] {
          if constexpr (kSat) sat = _mm512_add_epi16(sat, group_sat);
        } else {
          recast_low_blocks<E, R, kSat>(src, i, codes, g, w, kStats ? &low : nullptr);
        }
        if constexpr (kStats) record_group(run, g.amax, g.mul, peak);
      } else {
        by_avx2(i, kGroup);
      }
      if (kSat && (q & 1023) == 1023) move_sat();
    }
    if constexpr (kStats) {
      if constexpr (kSat) move_sat();
      finish_peak(run, peak, element_limits(E).max);
      run.saturated += lane_sum(low.saturated) + low.run.saturated;
      run.flushed += lane_sum(low.flushed);
    }
  }
  if (groups * kGroup < n) by_avx2(groups * kGroup, n - groups * kGroup);
  return run;
}

template <Element E>
MxStatsRun encode_fp8_rows(const uint16_t* src, int64_t n, E8m0Rounding r, uint8_t* codes,
                           uint8_t* scales, bool stats) {
  constexpr E8m0Rounding kFloor = E8m0Rounding::kFloor, kRceil = E8m0Rounding::kRceil;
  if (r == kFloor)
    return stats ? encode_fp8_rows<E, kFloor, true>(src, n, codes, scales)
                 : encode_fp8_rows<E, kFloor, false>(src, n, codes, scales);
  return stats ? encode_fp8_rows<E, kRceil, true>(src, n, codes, scales)
               : encode_fp8_rows<E, kRceil, false>(src, n, codes, scales);
}

}  // namespace

MxStatsRun avx512::mx_rows_fp8(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                               uint8_t* codes, uint8_t* scales, bool stats, bool stream) {
  // Float32 sources: the AVX2 body, which measured faster out of the caches (its codes streamed).
  if (dtype == kFloat32)
    return avx2::mx_rows_fp8(src, dtype, n, e, r, codes, scales, stats, stream);
  const auto* h = static_cast<const uint16_t*>(src);
  if (e == Element::kE4m3) return encode_fp8_rows<Element::kE4m3>(h, n, r, codes, scales, stats);
  return encode_fp8_rows<Element::kE5m2>(h, n, r, codes, scales, stats);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
