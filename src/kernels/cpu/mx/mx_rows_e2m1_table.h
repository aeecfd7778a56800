#pragma once
// The E2M1 row cast under the floor scale by a table of each element's step on the grid, as the
// AVX2 body (mx_rows_e2m1_avx2.cpp) and the AVX-512 body (mx_rows_e2m1_avx512.cpp) take it: the
// arithmetic of the index, a group's preparation a group ahead (prepare_fp4), its constants
// (Fp4Table) and counts (Fp4Counts), and the loop over a segment's whole groups
// (encode_fp4_groups), which a level's Body casts the blocks of. A file includes it last, after
// mx_row_groups_avx2.h.

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
// a vector (the level's Body: two 16-entry pshufb tables at AVX2, one vpermb at AVX-512 VBMI):
// 16-bit lanes only add, shift and pack. Saturated: y > 6;
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

// The constants of the table's groups and blocks that every body takes, made once a segment and
// read from memory (GCC would otherwise rebuild each broadcast in registers every group). A body
// adds its lookup's own (its Table derives from this).
struct Fp4Table {
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
      : eight(_mm256_set1_epi8(8)),
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
    const __m256i pa = Body::template pairs<kSrc, kStats>(src, j, g.off[b], t, counts);
    const __m256i pb =
        Body::template pairs<kSrc, kStats>(src, j + kMxBlock, g.off[b + 1], t, counts);
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
  __m256 peak = _mm256_setzero_ps();
  const auto move_counts = [&] {
    // Four 64-bit sums of bytes below 2^31: lane_sum's high halves are 0.
    st->run.saturated += lane_sum(_mm256_sad_epu8(counts.sat, _mm256_setzero_si256()));
    st->run.flushed += lane_sum(_mm256_sad_epu8(counts.flushed, _mm256_setzero_si256()));
    st->run.saturated += counts.sat_n;
    st->run.flushed += counts.flushed_n;
    counts.clear();
  };
  Fp4Group ahead[2];
  prepare_fp4<kSrc>(src, 0, scales, t, ahead[0]);
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t i = q * kGroup;
    const Fp4Group& g = ahead[q & 1];
    fetch_group_ahead<kSrc, kStream>(src, i);
    if (q + 1 < groups)
      prepare_fp4<kSrc>(src, i + kGroup, scales + (i + kGroup) / kMxBlock, t, ahead[(q + 1) & 1]);
    if (g.slow == 0) {
      fp4_group_blocks<Body, kSrc, kStats, kStream>(src, i, g, t, counts, codes);
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

}  // namespace
}  // namespace mantissa::kernels::mx::detail
