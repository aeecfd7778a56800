#pragma once
// The E2M1 row cast under the floor scale by a table of each element's step on the grid, as the
// AVX2 body (mx_rows_e2m1_avx2.cpp) and the AVX-512 body (mx_rows_e2m1_avx512.cpp) take it: the
// arithmetic of the index, a group's preparation a group ahead (prepare_fp4), its constants
// (Fp4Table), counts (Fp4Counts) and records (Fp4Records), and the loop over a segment's whole
// groups (encode_fp4_groups), which a level's Body casts the blocks of. A file includes it last,
// after mx_row_groups_avx2.h.

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

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
// takes the upper's index either way. b (0..20) gives the code through a byte lookup, 32 codes
// a vector (the level's Body: one 16-entry pshufb table of b = 7..20 and the test of b <= 0 at
// AVX2, one vpermb at AVX-512 VBMI): 16-bit lanes only add, shift and pack. Saturated: y > 6;
// flushed: nonzero x whose index is 0. Blocks of other E (tiny, infinite or NaN amax) and their
// group take encode_block; a zero block's index is 0. A float32 source is cast on bfloat16 bits:
// each element's high half with bit 0 set where its low half is not 0 (sticky). The steps and 6
// are bfloat16 values with bit 0 clear, so each compare with them (strict or not), and the zero
// test, comes out on those bits as on the float32 bits.

// The per-group values of eight blocks: amax bits (float32's), multipliers and the offsets
// added to |x|'s bits (((1 - 4 max(E, 5)) << kShift) - 1: the bits of 0.25, e << kFrac, the
// ceiling's kStep - 1 and the table's 16 steps folded into one). A group of the table's blocks
// only (prepare_fp4) holds no multipliers but each block's top, its amax bits less max(E, 5)'s:
// a nonzero block's mantissa bits (its amax times its multiplier is 4 (1 + top / 2^kMant)), a
// zero block's below 0. A bfloat16 group holds its amax, tops and offsets in 16-bit lanes
// (amax16, top16, off16): they come in those from its blocks' lanes.
struct Fp4Group {
  __m256i amax, top;
  alignas(32) float mul[8];
  alignas(32) int32_t off[8];
  unsigned slow;  // 1: a block is not cast by the table
  __m128i amax16, top16;
  alignas(16) int16_t off16[8];
};

// The table's 16-bit lanes (bfloat16 bits): kFrac fraction bits, kStep = 2^kShift.
struct Fp4Lanes {
  static constexpr int kFrac = 7;
  static constexpr int kShift = kFrac - 2;
};

// The constants of the table's groups and blocks that every body takes, made once a segment and
// read from memory (GCC would otherwise rebuild each broadcast in registers every group). A body
// adds its lookup's own (its Table derives from this).
struct Fp4Table {
  __m256i eight;          // the sign's bit of a code
  __m256i first_flushed;  // -15: b - 16 below it is index 0
  __m256i sat16;          // 96 (3 steps) in bytes: u above it is saturated
  __m256i pair;           // maddubs weights 1, 16: two codes to a byte
  __m256i dword_order;
  __m256i magnitude16, magnitude32, one32;
  __m256i bit6_16;  // the bit of |x| worth 2 kSteps
  // The groups' (32-bit lanes): 2 (emax of E2M1), 5, 254, inf's bits, 2^126's.
  __m256i two, five, c254, inf, scale0_mul;
  // The wrap and bound of prepare_fp4's test of E in [5, 254], and the offsets' (1 << kShift) - 1:
  // in 32-bit lanes, and in a bfloat16 group's 16-bit lanes with its 2 and 5.
  __m256i wrap32, fast32, off32;
  __m128i two16, five16, off16, wrap16, fast16;
  Fp4Table()
      : eight(_mm256_set1_epi8(8)),
        first_flushed(_mm256_set1_epi8(-15)),
        sat16(_mm256_set1_epi8(3 << Fp4Lanes::kShift)),
        pair(_mm256_set1_epi16(0x1001)),
        dword_order(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)),
        magnitude16(_mm256_set1_epi16(0x7FFF)),
        magnitude32(_mm256_set1_epi32(0x7FFFFFFF)),
        one32(_mm256_set1_epi32(1)),
        bit6_16(_mm256_set1_epi16(1 << (Fp4Lanes::kShift + 1))),
        two(_mm256_set1_epi32(2)),
        five(_mm256_set1_epi32(5)),
        c254(_mm256_set1_epi32(254)),
        inf(_mm256_set1_epi32(0x7F800000)),
        scale0_mul(_mm256_castps_si256(_mm256_set1_ps(0x1p126f))),
        wrap32(_mm256_set1_epi32(0x7FFFFFFB)),
        fast32(_mm256_set1_epi32(INT32_MIN + 250)),
        off32(_mm256_set1_epi32((1 << Fp4Lanes::kShift) - 1)),
        two16(_mm_set1_epi16(2)),
        five16(_mm_set1_epi16(5)),
        off16(_mm_set1_epi16((1 << Fp4Lanes::kShift) - 1)),
        wrap16(_mm_set1_epi16(0x8000 - 5)),
        fast16(_mm_set1_epi16(-0x8000 + 250)) {}
};

// The E8M0 floor codes (into s) and multipliers (into mul) of eight blocks' amax bits (float32's):
// codes max(E - 2, 0) (NaN 0xFF), multipliers 2^(127 - code), 2^126 for code 0 and 0 for NaN
// (floor_reciprocal).
[[gnu::always_inline]] inline void floor_scales8(__m256i amax, uint8_t* s, float* mul,
                                                 const Fp4Table& t) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i e = _mm256_srli_epi32(amax, 23);
  const __m256i nan = _mm256_cmpgt_epi32(amax, t.inf);
  const __m256i c = _mm256_or_si256(_mm256_max_epi32(_mm256_sub_epi32(e, t.two), zero),
                                    _mm256_srli_epi32(nan, 24));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(s), bytes_of(c));
  const __m256i m = _mm256_blendv_epi8(_mm256_slli_epi32(_mm256_sub_epi32(t.c254, c), 23),
                                       t.scale0_mul, _mm256_cmpeq_epi32(c, zero));
  _mm256_store_si256(reinterpret_cast<__m256i*>(mul), _mm256_andnot_si256(nan, m));
}

// Fp4Group of the eight blocks from element i, their scales into s. A group of the table's blocks
// (E in [5, 254], or amax 0) takes its scales (E8M0 floor: max(E - 2, 0)), offsets and tops
// straight from its amax in the source's lanes; another group its scales and multipliers
// (floor_scales8) for encode_block.
template <DType::Id kSrc, bool kStats>
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
  g.slow = 1;
  if constexpr (kSrc == DType::Id::bf16) {
    const __m128i a = _mm256_castsi256_si128(transposed_max16<8>(m));
    const __m128i e = _mm_srli_epi16(a, 7);
    // E in [5, 254]: E + 0x7FFB wraps those E to the lowest 250 int16 values.
    const __m128i zero = _mm_setzero_si128();
    const __m128i fast = _mm_or_si128(_mm_cmpgt_epi16(t.fast16, _mm_add_epi16(e, t.wrap16)),
                                      _mm_cmpeq_epi16(a, zero));
    if (_mm_movemask_epi8(fast) == 0xFFFF) {
      const __m128i c = _mm_max_epi16(_mm_sub_epi16(e, t.two16), zero);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(s), _mm_packus_epi16(c, c));
      const __m128i big = _mm_slli_epi16(_mm_max_epi16(e, t.five16), 7);
      _mm_store_si128(reinterpret_cast<__m128i*>(g.off16), _mm_sub_epi16(t.off16, big));
      if constexpr (kStats) {
        g.amax16 = a;
        g.top16 = _mm_sub_epi16(a, big);
      }
      g.slow = 0;
      return;
    }
    g.amax = _mm256_slli_epi32(_mm256_cvtepu16_epi32(a), 16);
  } else {
    g.amax = transposed_max8(m);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i e = _mm256_srli_epi32(g.amax, 23);
    // As above in 32-bit lanes.
    const __m256i fast =
        _mm256_or_si256(_mm256_cmpgt_epi32(t.fast32, _mm256_add_epi32(e, t.wrap32)),
                        _mm256_cmpeq_epi32(g.amax, zero));
    if (_mm256_movemask_epi8(fast) == -1) {
      const __m256i c = _mm256_max_epi32(_mm256_sub_epi32(e, t.two), zero);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(s), bytes_of(c));
      const __m256i big = _mm256_max_epi32(e, t.five);
      _mm256_store_si256(reinterpret_cast<__m256i*>(g.off),
                         _mm256_sub_epi32(t.off32, _mm256_slli_epi32(big, 7)));
      if constexpr (kStats) g.top = _mm256_sub_epi32(g.amax, _mm256_slli_epi32(big, 23));
      g.slow = 0;
      return;
    }
  }
  floor_scales8(g.amax, s, g.mul, t);
}

// The records of a segment's groups as record_group takes them: peak, and for the groups of the
// table's blocks (prepare_fp4's tops, in the source's lanes: 16-bit for bfloat16, 32-bit for
// float32) the lane maxima of their tops in top, whose largest finish makes peak's; best and
// scale where a block raises best (rarely past a segment's first blocks: then by record_group on
// the float32 bits and multipliers). best: run.best's bits broadcast (bfloat16's in 16-bit lanes),
// which order non-negative amax as int do; -1 (no block) lies below them all.
template <DType::Id kSrc>
struct Fp4Records {
  static constexpr bool kHalf = kSrc == DType::Id::bf16;
  __m256 peak = _mm256_setzero_ps();
  __m128i top16 = _mm_set1_epi16(INT16_MIN), best16;  // bfloat16's
  __m256i top = _mm256_set1_epi32(INT32_MIN), best;   // float32's
  explicit Fp4Records(const MxStatsRun& run) { reset(run); }
  // best from run.best, after a record elsewhere.
  void reset(const MxStatsRun& run) {
    if constexpr (kHalf)
      best16 = _mm_set1_epi16(static_cast<int16_t>(bits_of(run.best) >> 16));
    else
      best = _mm256_set1_epi32(static_cast<int32_t>(bits_of(run.best)));
  }
  [[gnu::always_inline]] void group(MxStatsRun& run, const Fp4Group& g, const Fp4Table& t) {
    __m256i amax;
    if constexpr (kHalf) {
      top16 = _mm_max_epi16(top16, g.top16);
      if (_mm_movemask_epi8(_mm_cmpgt_epi16(g.amax16, best16)) == 0) return;
      amax = _mm256_slli_epi32(_mm256_cvtepu16_epi32(g.amax16), 16);
    } else {
      top = _mm256_max_epi32(top, g.top);
      if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(g.amax, best)) == 0) return;
      amax = g.amax;
    }
    alignas(32) float mul[8];
    uint8_t s[8];
    floor_scales8(amax, s, mul, t);
    record_group(run, amax, mul, peak);
    reset(run);
  }
  // run.peak from peak and top, as finish_peak.
  void finish(MxStatsRun& run, float elem_max) {
    int m;
    if constexpr (kHalf) {
      __m128i v = _mm_max_epi16(top16, _mm_srli_si128(top16, 8));
      v = _mm_max_epi16(v, _mm_srli_si128(v, 4));
      v = _mm_max_epi16(v, _mm_srli_si128(v, 2));
      m = static_cast<int16_t>(_mm_cvtsi128_si32(v));
    } else {
      __m128i v = _mm_max_epi32(_mm256_castsi256_si128(top), _mm256_extracti128_si256(top, 1));
      v = _mm_max_epi32(v, _mm_srli_si128(v, 8));
      v = _mm_max_epi32(v, _mm_srli_si128(v, 4));
      m = _mm_cvtsi128_si32(v);
    }
    constexpr int kMant = kHalf ? 7 : 23;
    const float scaled =
        m >= 0 ? static_cast<float>((1 << kMant) + m) * (4.0f / (1 << kMant)) : 0.0f;
    finish_peak(run, _mm256_max_ps(peak, _mm256_set1_ps(scaled)), elem_max);
  }
};

// The statistics of the table's blocks: saturated and flushed elements, counts in bytes (moved
// out at least every 128 blocks), or (a body that counts compare masks) in sat_n and flushed_n.
struct Fp4Counts {
  __m256i sat, flushed;
  int64_t sat_n, flushed_n;
  [[gnu::always_inline]] void clear() {
    sat = flushed = _mm256_setzero_si256();
    sat_n = flushed_n = 0;
  }
};

// The eight blocks of a group from element i, two at a time: Body::pairs gives a block's code
// pairs (32 elements from j, its offset off_bits), which Body::store puts in element order.
template <class Body, DType::Id kSrc, bool kStats, bool kStream>
[[gnu::always_inline]] inline void fp4_group_blocks(const void* src, int64_t i, const Fp4Group& g,
                                                    const typename Body::Table& t,
                                                    Fp4Counts& counts, uint8_t* codes) {
#pragma GCC unroll 4
  for (int b = 0; b < 8; b += 2) {
    const int64_t j = i + b * kMxBlock;
    const auto off_of = [&](int k) -> int32_t {
      if constexpr (kSrc == DType::Id::bf16)
        return g.off16[k];
      else
        return g.off[k];
    };
    const __m256i pa = Body::template pairs<kSrc, kStats>(src, j, off_of(b), t, counts);
    const __m256i pb =
        Body::template pairs<kSrc, kStats>(src, j + kMxBlock, off_of(b + 1), t, counts);
    Body::template store<kSrc, kStream>(codes + j / 2, pa, pb, t);
  }
}

// The E2M1 floor row cast of whole groups of eight blocks (the table's), each group's amax,
// scales and offsets taken while the group before it is encoded, its eight blocks cast by
// fp4_group_blocks on Body::pairs (the level's index, lookup and pairs; Body::Table its
// constants); a group with a
// block the table does not take goes block by block through encode_block. With kStats the
// statistics as mx_run_stats counts them: the table's blocks' saturated and flushed elements
// counted in Fp4Counts' bytes, the records of a group at once where no amax is NaN. Returns the
// elements done.
template <class Body, DType::Id kSrc, bool kStats, bool kStream>
int64_t encode_fp4_groups(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                          SegmentStats* st) {
  constexpr E8m0Rounding R = E8m0Rounding::kFloor;
  constexpr Element E = Element::kE2m1;
  constexpr int64_t kGroup = 8 * kMxBlock;
  const int64_t groups = n / kGroup;
  if (groups == 0) return 0;
  typename Body::Table t;
  asm("" : "+m"(t));  // its constants read from memory, not rebuilt
  Fp4Counts counts;
  counts.clear();
  Fp4Records<kSrc> records(kStats ? st->run : MxStatsRun{});
  const auto move_counts = [&] {
    // Four 64-bit sums of bytes below 2^31: lane_sum's high halves are 0.
    st->run.saturated += lane_sum(_mm256_sad_epu8(counts.sat, _mm256_setzero_si256()));
    st->run.flushed += lane_sum(_mm256_sad_epu8(counts.flushed, _mm256_setzero_si256()));
    st->run.saturated += counts.sat_n;
    st->run.flushed += counts.flushed_n;
    counts.clear();
  };
  Fp4Group ahead[2];
  prepare_fp4<kSrc, kStats>(src, 0, scales, t, ahead[0]);
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t i = q * kGroup;
    const Fp4Group& g = ahead[q & 1];
    fetch_group_ahead<kSrc, kStream>(src, i);
    if (q + 1 < groups)
      prepare_fp4<kSrc, kStats>(src, i + kGroup, scales + (i + kGroup) / kMxBlock, t,
                                ahead[(q + 1) & 1]);
    if (g.slow == 0) {
      fp4_group_blocks<Body, kSrc, kStats, kStream>(src, i, g, t, counts, codes);
      if constexpr (kStats) records.group(st->run, g, t);
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
      if constexpr (kStats) {
        if (!nan) record_group(st->run, g.amax, g.mul, records.peak);
        records.reset(st->run);
      }
    }
    if (kStats && (q & 15) == 15) move_counts();
  }
  if constexpr (kStream) _mm_sfence();
  if constexpr (kStats) {
    move_counts();
    records.finish(st->run, element_limits(E).max);
  }
  return groups * kGroup;
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail
