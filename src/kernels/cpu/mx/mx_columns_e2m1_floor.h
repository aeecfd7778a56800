#pragma once
// The MX column casts to E2M1 under the floor scale by a table of the E2M1 steps
// (mx_columns_e2m1_avx2.cpp, and with VBMI mx_columns_e2m1_avx512.cpp), and the columns' amax
// they and the rceil body share. A level's Lookup gives the index's rounding, its pack to bytes
// and the table (below). Without statistics a bfloat16 chunk takes each 16 columns' scales and
// offsets straight from their amax in 16-bit lanes (floor_columns16). A file includes it after
// mx_columns_avx2.h, inside its `#pragma GCC target`.

namespace mantissa::kernels::mx::detail {
namespace {

// 16 columns' bfloat16 amax bits m as float32 bits, 8 columns a vector: to[0], to[1].
[[gnu::always_inline]] inline void widen16(__m256i m, __m256i* to) {
  to[1] = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(m, 1)), 16);
  to[0] = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(m)), 16);
}

// The maxima of kB vectors of magnitude bits from p down n rows (ld elements apart), in registers,
// to amax[0..kB - 1]: 16-bit lanes for bfloat16, 32-bit for float32.
template <DType::Id kSrc, int kB, class T>
[[gnu::always_inline]] inline void amax_of(const T* p, int64_t ld, int n, __m256i* amax) {
  constexpr bool kBf16 = kSrc == DType::Id::bf16;
  constexpr int kLanes = 32 / sizeof(T);
  const __m256i mag = kBf16 ? _mm256_set1_epi16(0x7FFF) : _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m[kB];
#pragma GCC unroll 8
  for (int j = 0; j < kB; ++j) m[j] = _mm256_setzero_si256();
  for (int k = 0; k < n; ++k) {
#pragma GCC unroll 8
    for (int j = 0; j < kB; ++j) {
      const __m256i a = _mm256_and_si256(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + k * ld + kLanes * j)), mag);
      m[j] = kBf16 ? _mm256_max_epi16(m[j], a) : _mm256_max_epi32(m[j], a);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < kB; ++j) amax[j] = m[j];
}

// The amax bits (float32 bits, NaN above 0x7F800000) of a chunk's columns c0 + 8g..c0 + 8g + 7
// in amax[g], over its n rows, eight vectors of columns at a time (four at the end) in
// registers: each row's four lines read at once keep more of the chunk's loads in flight;
// bfloat16 as maxima of 16 columns' magnitude bits in 16-bit lanes (groups a multiple of 8),
// widened once (kWiden; else columns c0 + 16h..c0 + 16h + 15 stay in amax[h] as bfloat16 bits).
template <DType::Id kSrc, bool kWiden = true>
[[gnu::always_inline]] inline void column_amax(const void* src, int64_t ld, int n, int64_t c0,
                                               int64_t groups, __m256i* amax) {
  constexpr bool kBf16 = kSrc == DType::Id::bf16;
  using T = std::conditional_t<kBf16, uint16_t, float>;
  constexpr int kLanes = 32 / sizeof(T);
  const T* p = static_cast<const T*>(src) + c0;
  const int64_t vectors = kBf16 ? groups / 2 : groups;
  int64_t v0 = 0;
  for (; v0 + 8 <= vectors; v0 += 8) amax_of<kSrc, 8>(p + kLanes * v0, ld, n, amax + v0);
  for (; v0 < vectors; v0 += 4) amax_of<kSrc, 4>(p + kLanes * v0, ld, n, amax + v0);
  if constexpr (kBf16 && kWiden)
    for (int64_t h = vectors - 1; h >= 0; --h) widen16(amax[h], amax + 2 * h);
}

// --- E2M1 under the floor scale, by a table (mx_rows_e2m1_avx2.cpp's, a column a lane) ------
//
// A column's multiplier is 2^e with e = 129 - E for its amax's biased exponent E; for E in
// [5, 254] (or a zero amax) y = |x| * 2^e has |x|'s bits plus e << kFrac wherever y >= 2^-2, and
// the code is a table's at the index b = ceil((v + bit6) / kStep) of v = bits(y) - bits(0.25)
// (kStep = 2^(kFrac - 2), bit6 the bit of v worth 2 kSteps): e2m1_code's steps on the grid lie on
// multiples of kStep, the non-strict ones with that bit set. `off` folds bits(0.25), e << kFrac,
// the ceiling's kStep - 1 and the lookup's index q = b - 16 + Lookup::kSteps into one addend a
// column. Columns of other E (tiny, infinite or NaN amax) go to the scalar body.
//
// A Lookup, with the constants every level shares (Fp4ColumnConsts) as a base, has:
//   kSteps: steps added to b in the index q (0: q = b - 16; 16: q = b, the counts not taken),
//   round16(t, a) / round32(t, a): t plus bit 6 (bit 22) of |x|'s bits a,
//   pack16(v0, v1): the indices of 16-bit lanes as bytes, in packs' order,
//   codes(q): the magnitude codes of the indices q,
//   order<kBf16>(p0, p1): 64 columns' code bytes in column order from the nibble pairs (16-bit
//     lanes) of their two halves, each half's columns a in the lanes as the packs leave them:
//     bfloat16 [a 0-7, a 16-23 | a 8-15, a 24-31], float32 [a 0-3, a 8-11, a 16-19, a 24-27 |
//     a 4-7, a 12-15, a 20-23, a 28-31].
struct Fp4ColumnConsts {
  __m256i eight, first_flushed, sat16, sat32, pair;
  Fp4ColumnConsts()
      : eight(_mm256_set1_epi8(8)),
        first_flushed(_mm256_set1_epi8(-15)),
        sat16(_mm256_set1_epi8((3 << 5) - 1)),
        sat32(_mm256_set1_epi32((3 << 21) - 1)),
        pair(_mm256_set1_epi16(0x1001)) {}
};

// The sum of v's bytes.
inline int64_t byte_sum(__m256i v) { return lane_sum(_mm256_sad_epu8(v, _mm256_setzero_si256())); }

// A column's offset (above) from its amax's biased exponent E: ((1 + kSteps - 4 max(E, 5)) <<
// kShift) - 1, as (((1 + kSteps) << kShift) - 1) - (max(E, 5) << (kShift + 2)).
template <class Lookup, int kShift>
constexpr int kOffsetBase = ((1 + Lookup::kSteps) << kShift) - 1;

// Without statistics, the scales and offsets of 16 bfloat16 columns (column j in 16-bit lane j)
// straight from their amax bits a in the source's lanes, the general step's values (E8M0 floor:
// max(E - 2, 0)): true where the table casts every column (E in [5, 254], or a zero amax), else
// false and nothing written.
template <class Lookup>
[[gnu::always_inline]] inline bool floor_columns16(__m256i a, uint8_t* scale, __m256i& off) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i e = _mm256_srli_epi16(a, 7);
  const __m256i ok =
      _mm256_or_si256(_mm256_and_si256(_mm256_cmpgt_epi16(e, _mm256_set1_epi16(4)),
                                       _mm256_cmpgt_epi16(_mm256_set1_epi16(255), e)),
                      _mm256_cmpeq_epi16(a, zero));
  if (_mm256_movemask_epi8(ok) != -1) return false;
  const __m256i code = _mm256_max_epi16(_mm256_sub_epi16(e, _mm256_set1_epi16(2)), zero);
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(code, code), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scale), _mm256_castsi256_si128(bytes));
  off = _mm256_sub_epi16(_mm256_set1_epi16(kOffsetBase<Lookup, 5>),
                         _mm256_slli_epi16(_mm256_max_epi16(e, _mm256_set1_epi16(5)), 7));
  return true;
}

// A band's E2M1 codes under the floor scale by the table: chunks of `width` columns (a multiple
// of 64) from column c0, a line of the next chunk fetched a 64 source bytes the second pass reads
// (in the first pass the fetches would come in a burst, and the second pass would leave the memory
// idle); the codes past the caches where kStream (whole 32-byte steps: a row's 64-column steps
// fill its lines), which spares memory the read of each code line before its write.
template <class Lookup, bool kStats, DType::Id kSrc, bool kStream>
void e2m1_floor_chunk(const void* src, int64_t ld, int n, int64_t c0, int64_t width, uint8_t* codes,
                      int64_t code_row, uint8_t* scale_row, MxStatsRun* runs, int64_t& saturated,
                      int64_t& flushed, Ahead ahead) {
  constexpr Element E = Element::kE2m1;
  constexpr bool kBf16 = kSrc == DType::Id::bf16;
  constexpr int kShift = kBf16 ? 5 : 21;
  constexpr int64_t kItem = kBf16 ? 2 : 4;
  constexpr int64_t kMax = kChunkBytes / (kMxBlock * kItem) / 8;
  const DType dtype{kSrc};
  static_assert(!kStats || Lookup::kSteps == 0, "the counts take the indices b - 16");
  static const Lookup t;
  // Per 8 columns: amax bits (32-bit lanes), the offsets, and `fast`, the table's columns.
  alignas(32) __m256i amax[kMax], off[kMax], fast[kMax];
  alignas(32) uint32_t fallback[kMax];
  const int64_t groups = width / 8;
  // The general step: 8 columns' scales, offsets, table columns and records from their amax
  // bits (32-bit lanes), any amax.
  const auto general8 = [&](int64_t g, __m256i bits8) {
    alignas(32) uint32_t bits[8];
    alignas(32) float mul[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), bits8);
    uint8_t* s = scale_row + c0 + 8 * g;
    scales8<E, E8m0Rounding::kFloor>(bits8, s, mul);
    const __m256i e = _mm256_srli_epi32(bits8, 23);
    const __m256i ok =
        _mm256_or_si256(_mm256_and_si256(_mm256_cmpgt_epi32(e, _mm256_set1_epi32(4)),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(255), e)),
                        _mm256_cmpeq_epi32(bits8, _mm256_setzero_si256()));
    fast[g] = ok;
    off[g] =
        _mm256_sub_epi32(_mm256_set1_epi32(kOffsetBase<Lookup, kShift>),
                         _mm256_slli_epi32(_mm256_max_epi32(e, _mm256_set1_epi32(5)), kShift + 2));
    const unsigned fb = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok))) & 0xFFu;
    fallback[g] = fb;
    if constexpr (kStats) record_columns<E, kSrc>(runs + c0 + 8 * g, bits, s, mul, 8, fb);
  };
  // bfloat16: the offsets and masks of 16 columns in 16-bit lanes, in group g (even).
  const auto pack16 = [&](int64_t g) {
    off[g] = _mm256_permute4x64_epi64(_mm256_packs_epi32(off[g], off[g + 1]), 0xD8);
    fast[g] = _mm256_permute4x64_epi64(_mm256_packs_epi32(fast[g], fast[g + 1]), 0xD8);
  };
  if constexpr (kBf16 && !kStats) {
    // Without statistics each 16 columns straight from their amax in the source's lanes
    // (floor_columns16; `fast` unused), the general step where a column is not the table's.
    column_amax<kSrc, false>(src, ld, n, c0, groups, amax);
    for (int64_t h = 0; h < groups / 2; ++h) {
      const int64_t g = 2 * h;
      if (floor_columns16<Lookup>(amax[h], scale_row + c0 + 8 * g, off[g])) {
        fallback[g] = fallback[g + 1] = 0;
        continue;
      }
      __m256i bits[2];
      widen16(amax[h], bits);
      general8(g, bits[0]);
      general8(g + 1, bits[1]);
      pack16(g);
    }
  } else {
    column_amax<kSrc>(src, ld, n, c0, groups, amax);
    for (int64_t g = 0; g < groups; ++g) general8(g, amax[g]);
    if constexpr (kBf16)
      for (int64_t g = 0; g < groups; g += 2) pack16(g);
  }
  for (int k = 0; k < n; ++k) {
    uint8_t* out = codes + k * code_row + c0 / 2;
    __m256i sat = _mm256_setzero_si256(), flush = _mm256_setzero_si256();
    for (int64_t g = 0; g < groups; g += 8) {  // 64 columns: 32 bytes
      ahead.next_lines<kItem>();               // 64 columns: 2 or 4 lines
      __m256i pairs[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int64_t gh = g + 4 * h;  // 32 columns
        __m256i q, signs, zero, keep;
        if constexpr (kBf16) {
          const auto* p = static_cast<const uint16_t*>(src) + k * ld + c0 + 8 * gh;
          const __m256i h0 = load16_bits(p), h1 = load16_bits(p + 16);
          const __m256i mag = _mm256_set1_epi16(0x7FFF);
          const __m256i a0 = _mm256_and_si256(h0, mag), a1 = _mm256_and_si256(h1, mag);
          const __m256i t0 = _mm256_add_epi16(a0, off[gh]);
          const __m256i t1 = _mm256_add_epi16(a1, off[gh + 2]);
          // t + bit6 as t minus a compare's -1: Zen 4 runs shifts on the two pipes of the packs
          // and shuffles, which bound this loop.
          const __m256i v0 = _mm256_srai_epi16(t.round16(t0, a0), kShift);
          const __m256i v1 = _mm256_srai_epi16(t.round16(t1, a1), kShift);
          q = t.pack16(v0, v1);
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
            idx[v] = _mm256_srai_epi32(t.round32(tv, a[v]), kShift);
            if constexpr (kStats)
              sat = _mm256_sub_epi32(
                  sat, _mm256_and_si256(fast[gh + v], _mm256_cmpgt_epi32(tv, t.sat32)));
          }
          q = t.pack16(_mm256_packs_epi32(idx[0], idx[1]), _mm256_packs_epi32(idx[2], idx[3]));
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
        const __m256i c = t.codes(q);
        pairs[h] =
            _mm256_maddubs_epi16(_mm256_blendv_epi8(c, _mm256_or_si256(c, t.eight), signs), t.pair);
      }
      const __m256i ordered = t.template order<kBf16>(pairs[0], pairs[1]);  // two a byte
      if constexpr (kStream)
        _mm256_stream_si256(reinterpret_cast<__m256i*>(out + 4 * g), ordered);
      else
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * g), ordered);
    }
    if constexpr (kStats) {
      saturated += kBf16 ? byte_sum(sat) : lane_sum(sat);
      flushed += byte_sum(flush);
    }
  }
  // The streamed codes reach memory before the scalar body's stores overwrite some of them.
  bool fenced = !kStream;
  for (int64_t g = 0; g < groups; ++g)
    for (unsigned f = fallback[g]; f; f &= f - 1) {
      if (!fenced) {
        _mm_sfence();
        fenced = true;
      }
      const int64_t c = c0 + 8 * g + __builtin_ctz(f);
      encode_column_block_scalar(src, dtype, ld, n, c, E, E8m0Rounding::kFloor, codes, code_row,
                                 scale_row + c, kStats ? runs + c : nullptr);
    }
}

// encode_column_band to E2M1 under the floor scale with a level's Lookup.
template <class Lookup>
void floor_columns(const void* src, DType dtype, int64_t rows, int64_t cols, uint8_t* codes,
                   uint8_t* scales, MxStatsRun* runs) {
  constexpr Element E = Element::kE2m1;
  constexpr E8m0Rounding R = E8m0Rounding::kFloor;
  for_stats_and_dtype(dtype, runs, [&]<bool kStats, DType::Id kSrc>() {
    // Whole steps of 64 columns: 32 code bytes. A Lookup with kSteps 16 takes no counts: its
    // caller gives it no statistics.
    if constexpr (!kStats || Lookup::kSteps == 0)
      walk_column_bands<E, R, kStats, kSrc>(
          src, rows, cols, codes, scales, runs, 64, [](const ColumnChunk& k) {
            if (k.stream)
              e2m1_floor_chunk<Lookup, kStats, kSrc, true>(k.band, k.ld, k.n, k.c0, k.width,
                                                           k.codes, k.code_row, k.scale_row, k.runs,
                                                           *k.saturated, *k.flushed, k.ahead);
            else
              e2m1_floor_chunk<Lookup, kStats, kSrc, false>(
                  k.band, k.ld, k.n, k.c0, k.width, k.codes, k.code_row, k.scale_row, k.runs,
                  *k.saturated, *k.flushed, k.ahead);
          });
  });
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail
