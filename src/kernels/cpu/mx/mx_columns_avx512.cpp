// AVX-512 (F, BW, VL) bodies of the MX transposed cast's FP8 column copies (mx_quantize_transposed;
// the E2M1 columns run the AVX2 body, mx_columns_avx2.cpp): x walked one block row (32 rows) at
// a time in chunks of columns, the band's rows copied to a contiguous tile as the column amaxes
// are taken by integer maxima of the magnitude bits (rows a multiple of 4 KiB apart share L1
// sets), then a unit of columns a vector (32 bfloat16 columns in 16-bit lanes, 16 float32 ones in
// 32-bit lanes) coded from the tile: the units' E8M0 scales in the same lanes, each row's codes on
// x's bits under its lanes' power-of-2 multipliers, packed to bytes and transposed in registers to
// two columns' 32 code bytes a vector, whole 64-byte lines of codes written past the caches. A
// column whose block is not cast on its bits is encoded again from a copy of its block by the
// AVX2 row-wise body.
//
// On x's bits (as the AVX2 bodies and the row casts, mx_blocks_avx2.h): for a block whose
// multiplier is 2^e with e <= 127 - bias, whose amax is finite and whose nonzero elements all
// have normal codes, |x|'s bits a plus e << kFrac (kFrac: the source's mantissa bits) are those
// of |x| * 2^e, whose code drops kDrop = kFrac - kMant bits, rounded to nearest even by integer
// adds, and is rebiased; the rebias and e << kFrac fold into one per-column constant. An
// arithmetic shift leaves a zero's code negative, which the unsigned saturating packs make 0; a
// byte minimum caps the codes at the element's largest (the float32 path's clamp); the signs come
// from packing x's bits with signed saturation. A block of zeros is cast under e = 0 (its codes
// are its signs whatever the multiplier).
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cpu/common/byte_transpose_avx512.h"
#include "kernels/cpu/mx/mx_cast.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;

// An FP8 element format's constants in the source's lanes (kFrac mantissa bits: 7 for bfloat16,
// 23 for float32).
template <Element E, int kFrac>
struct Lanes {
  static constexpr int kMant = E == Element::kE4m3 ? 3 : 2;
  static constexpr int kBias = E == Element::kE4m3 ? 7 : 15;
  static constexpr int kMaxCode = E == Element::kE4m3 ? 0x7E : 0x7B;
  static constexpr int kDrop = kFrac - kMant;
  static constexpr int kShift = 23 - kFrac;  // float32 bits -> the source's
  static constexpr int kMaxPow2 = element_limits(E).max_pow2;
  // The element max's bits and mantissa bits (float32's low 16 bits of it are zero, so
  // bfloat16's compare the same).
  static constexpr int32_t kMaxBits =
      static_cast<int32_t>(std::bit_cast<uint32_t>(element_limits(E).max) >> kShift);
  static constexpr int32_t kMaxMant = kMaxBits & ((1 << kFrac) - 1);
  static_assert((std::bit_cast<uint32_t>(element_limits(E).max) & 0xFFFFu) == 0);
  // Added to |x|'s bits with e << kFrac: the rounding bias and the rebias.
  static constexpr int32_t kRound = (1 << (kDrop - 1)) - 1 - ((127 - kBias) << kFrac);
};

// The statistics of a chunk's columns (column j in element j of each), taken block row by block
// row as mx_run_stats takes them: the blocks cast on their bits recorded in vectors (record16:
// record_block of mx_blocks_avx2.h for a finite amax and a scale that is not NaN), the runs of
// the blocks encoded again appended in their place (merge). A block's amax * multiplier is exact
// (a power-of-2 multiplier, no overflow), so the largest of them divided by the element max once
// is the largest of their quotients (division by it is monotone).
struct ColumnStats {
  std::vector<float> best, scaled_best, scale, product;
  std::vector<double> peak;  // the merged runs'
  int64_t saturated = 0, flushed = 0;

  // n: the chunk's columns, rounded up to a whole unit.
  explicit ColumnStats(int64_t n)
      : best(static_cast<size_t>(n)),
        scaled_best(static_cast<size_t>(n)),
        scale(static_cast<size_t>(n)),
        product(static_cast<size_t>(n)),
        peak(static_cast<size_t>(n)) {}

  void reset() {
    std::fill(best.begin(), best.end(), -1.0f);
    std::fill(scaled_best.begin(), scaled_best.end(), -1.0f);
    std::fill(scale.begin(), scale.end(), 1.0f);
    std::fill(product.begin(), product.end(), 0.0f);
    std::fill(peak.begin(), peak.end(), 0.0);
  }

  // Columns j..j + 15 where `fast`: amax their amax, c their scale codes (below 254).
  template <E8m0Rounding R>
  [[gnu::always_inline]] void record16(int64_t j, __mmask16 fast, __m512 amax, __m512i c) {
    // floor_reciprocal / rceil_multiplier: 2^(127 - c), or for code 0 2^126 or 1.
    const __m512 mul = _mm512_mask_mov_ps(
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), c), 23)),
        _mm512_testn_epi32_mask(c, c), _mm512_set1_ps(R == E8m0Rounding::kFloor ? 0x1p126f : 1.0f));
    const __mmask16 raise =
        _mm512_mask_cmp_ps_mask(fast, amax, _mm512_loadu_ps(best.data() + j), _CMP_GT_OQ);
    _mm512_mask_storeu_ps(best.data() + j, raise, amax);
    _mm512_mask_storeu_ps(scaled_best.data() + j, raise, amax);
    _mm512_mask_storeu_ps(scale.data() + j, raise, mul);
    float* p = product.data() + j;
    const __m512 was = _mm512_loadu_ps(p);
    _mm512_storeu_ps(p, _mm512_mask_max_ps(was, fast, was, _mm512_mul_ps(amax, mul)));
  }

  // MxStatsRun::append of run to column j.
  void merge(int64_t j, const MxStatsRun& run) {
    if (run.scaled_best > best[j]) {
      scaled_best[j] = run.scaled_best;
      scale[j] = run.scale;
    }
    best[j] = std::max(best[j], run.best);
    peak[j] = std::max(peak[j], run.peak);
    saturated += run.saturated;
    flushed += run.flushed;
  }

  // Columns 0..n - 1 appended to runs[0..n - 1] (the counts to runs[0]).
  void finish(MxStatsRun* runs, int64_t n, float elem_max) {
    for (int64_t j = 0; j < n; ++j) {
      MxStatsRun run;
      run.best = best[j];
      run.scaled_best = scaled_best[j];
      run.scale = scale[j];
      run.peak = std::max(peak[j], static_cast<double>(product[j]) / elem_max);
      runs[j].append(run);
    }
    runs[0].saturated += saturated;
    runs[0].flushed += flushed;
    saturated = flushed = 0;
  }
};

// The codes (and with kStats the statistics, into *run) of a column's block again by the AVX2
// row-wise body, from a copy of it (32 elements, `stride` apart from p), its scale written at
// `scale`.
template <Element E, E8m0Rounding R, bool kStats, typename T>
inline __m256i redo_column(const T* p, int stride, uint8_t* scale, MxStatsRun* run) {
  constexpr DType kSrc = sizeof(T) == 2 ? kBFloat16 : kFloat32;
  alignas(64) T column[kMxBlock];
  for (int k = 0; k < kMxBlock; ++k) column[k] = p[k * stride];
  alignas(32) uint8_t bytes[kMxBlock];
  if constexpr (kStats) {
    if (kAvx2Kernels.encode_stats) {
      run->append(kAvx2Kernels.encode_stats(column, kSrc, kMxBlock, E, R, bytes, scale));
    } else {
      kAvx2Kernels.encode(column, kSrc, kMxBlock, E, R, bytes, scale);
      run->append(mx_run_stats(column, kSrc, kMxBlock, E, R, bytes, scale));
    }
  } else {
    kAvx2Kernels.encode(column, kSrc, kMxBlock, E, R, bytes, scale);
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(bytes));
}

// The codes of column j's block take the place of its half of the vector that holds it.
inline __m512i with_column(__m512i v, int half, __m256i codes) {
  return half ? _mm512_inserti64x4(v, codes, 1) : _mm512_inserti64x4(v, codes, 0);
}

// (A & B) | C of vpternlog.
constexpr int kAndOr = 0xEA;

// --- bfloat16: 32 columns a vector, in 16-bit lanes ------------------------------------------

// One block (32 rows of the tile t, 32 elements a row) of w (16 or 32) columns: their amax bits m
// (16-bit lanes, a NaN's above 0x7F80), their scales written from `scale` (scale_row bytes
// apart), their codes to sink(slot, v) for slot 0..w/2 - 1 (v: column (slot & 7) + 16 (slot >> 3)
// in the low 32 bytes and the column 8 above it in the high), with kStats their statistics
// taken into st from its column j0 (saturated elements counted in sat_total's lanes).
template <Element E, E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_unit16(const uint16_t* t, __m512i m, int w,
                                                 uint8_t* scale, int64_t scale_row, Sink sink,
                                                 ColumnStats* st, int64_t j0, __m512i& sat_total) {
  using L = Lanes<E, 7>;
  const __m512i one = _mm512_set1_epi16(1);
  // The scale codes: the floor's exponent less the element's, or the rceil's, one more where
  // amax's mantissa lies above the element max's (mx_blocks_avx2.h, block_scales8); 0 below.
  const __m512i field = _mm512_srli_epi16(m, 7);
  __m512i c;
  if constexpr (R == E8m0Rounding::kFloor) {
    c = _mm512_subs_epu16(field, _mm512_set1_epi16(L::kMaxPow2));
  } else {
    const __mmask32 above =
        _mm512_cmpgt_epu16_mask(_mm512_and_si512(m, _mm512_set1_epi16(0x7F)),
                                _mm512_set1_epi16(static_cast<int16_t>(L::kMaxMant)));
    c = _mm512_subs_epu16(_mm512_mask_add_epi16(field, above, field, one),
                          _mm512_set1_epi16(L::kMaxPow2));
  }
  // The columns cast here: a finite amax (an amax of 0 cast under e = 0, as code 127) and,
  // below, no nonzero |x| under the normal codes. That also leaves out the codes below kBias
  // (multipliers above 2^(127 - kBias), under which a zero's code would be above 0): their
  // `from` is 0 or below, and from - 1 wraps above every nonzero |x| - 1.
  const __mmask32 zero = _mm512_testn_epi16_mask(m, m);
  const __mmask32 width = w == 32 ? ~__mmask32{0} : __mmask32{0xFFFF};
  __mmask32 fast = _mm512_cmplt_epu16_mask(m, _mm512_set1_epi16(0x7F80)) & width;
  const __m512i ce = _mm512_mask_mov_epi16(c, zero, _mm512_set1_epi16(127));
  // e << 7 for the multiplier 2^e = 2^(127 - code); the smallest |x| bits with a normal code,
  // (128 - kBias - e) << 7, less 1; the largest |x| bits whose product does not exceed the
  // element max (at most 0x7FE0 for the codes of finite amaxes, e >= -120).
  const __m512i add = _mm512_slli_epi16(_mm512_sub_epi16(_mm512_set1_epi16(127), ce), 7);
  const __m512i round = _mm512_add_epi16(add, _mm512_set1_epi16(L::kRound));
  const __m512i from_less_1 = _mm512_sub_epi16(
      _mm512_slli_epi16(_mm512_sub_epi16(ce, _mm512_set1_epi16(L::kBias - 1)), 7), one);
  const __m512i sat_above = _mm512_sub_epi16(_mm512_set1_epi16(L::kMaxBits), add);
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
  __m512i lowest = _mm512_set1_epi16(-1), sat = _mm512_setzero_si512();
  // Each lane's code before the cap: (a + lsb + round) >> kDrop, lsb the bit kDrop of |x| (that
  // of |x| * 2^e); lowest gets the least |x| - 1 (unsigned: 0xFFFF for 0) so far.
  const auto code = [&](__m512i h) {
    const __m512i a = _mm512_and_si512(h, magnitude);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(h, L::kDrop), one);
    lowest = _mm512_min_epu16(lowest, _mm512_sub_epi16(a, one));
    if constexpr (kStats)
      sat = _mm512_mask_add_epi16(sat, _mm512_cmpgt_epi16_mask(a, sat_above), sat, one);
    return _mm512_srai_epi16(_mm512_add_epi16(_mm512_add_epi16(a, lsb), round), L::kDrop);
  };
  const __m512i max_code = _mm512_set1_epi8(L::kMaxCode), sign = _mm512_set1_epi8(-128);
  // x[k], per 128-bit lane q: row k's codes of columns 8q..8q + 7, then row k + 16's.
  __m512i x[16];
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) {
    const __m512i h0 = _mm512_load_si512(t + 32 * k), h1 = _mm512_load_si512(t + 32 * (k + 16));
    const __m512i codes = _mm512_min_epu8(_mm512_packus_epi16(code(h0), code(h1)), max_code);
    x[k] = _mm512_ternarylogic_epi32(_mm512_packs_epi16(h0, h1), sign, codes, kAndOr);
  }
  // A nonzero |x| below the normal codes: lowest < from - 1.
  fast &= _mm512_cmpge_epu16_mask(lowest, from_less_1);
  // In-lane 16 x 16 byte transpose: x[8h + i] lane q is column 8q + i's rows 16h..16h + 15.
  transpose16x16_bytes(x);
  // Column c's 32 bytes: x[c & 7] lane c >> 3, then x[8 + (c & 7)]'s; two columns a vector.
  const __m512i lanes_lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i lanes_hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  __m512i o[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    o[i] = _mm512_permutex2var_epi64(x[i], lanes_lo, x[8 + i]);
    o[8 + i] = _mm512_permutex2var_epi64(x[i], lanes_hi, x[8 + i]);
  }
  alignas(32) uint8_t s[32];
  _mm256_store_si256(reinterpret_cast<__m256i*>(s), _mm512_cvtepi16_epi8(c));
  for (int j = 0; j < w; ++j) scale[j * scale_row] = s[j];
  if constexpr (kStats) {
    sat_total = _mm512_add_epi32(
        sat_total, _mm512_madd_epi16(_mm512_maskz_mov_epi16(fast, sat), _mm512_set1_epi16(1)));
    st->template record16<R>(j0, static_cast<__mmask16>(fast),
                             _mm512_castsi512_ps(_mm512_slli_epi32(
                                 _mm512_cvtepu16_epi32(_mm512_castsi512_si256(m)), 16)),
                             _mm512_cvtepu16_epi32(_mm512_castsi512_si256(c)));
    st->template record16<R>(j0 + 16, static_cast<__mmask16>(fast >> 16),
                             _mm512_castsi512_ps(_mm512_slli_epi32(
                                 _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(m, 1)), 16)),
                             _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(c, 1)));
  }
  if (const uint32_t redo = ~fast & width; __builtin_expect(redo != 0, 0)) {
    for (uint32_t f = redo; f; f &= f - 1) {
      const int j = __builtin_ctz(f);
      const int slot = (j & 7) + 8 * (j >> 4);
      MxStatsRun run;
      o[slot] = with_column(o[slot], (j >> 3) & 1,
                            redo_column<E, R, kStats>(t + j, 32, scale + j * scale_row, &run));
      if constexpr (kStats) st->merge(j0 + j, run);
    }
  }
#pragma GCC unroll 16
  for (int slot = 0; slot < 16; ++slot)
    if (slot < w / 2) sink(slot, o[slot]);
}

// The largest magnitude bits of each of N units of 32 columns over 32 rows from p (ld elements
// apart), into amax[0..N-1], the rows copied into tile (unit g's row k at tile + 32 (32 g + k));
// `last` masks the columns of the last unit that lie in x.
template <int N>
[[gnu::always_inline]] inline void column_amax16(const uint16_t* p, int64_t ld, __m512i* amax,
                                                 uint16_t* tile, __mmask32 last) {
  __m512i m[N];
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
#pragma GCC unroll 4
  for (int g = 0; g < N; ++g) m[g] = _mm512_setzero_si512();
  for (int k = 0; k < kMxBlock; ++k) {
    const uint16_t* row = p + k * ld;
#pragma GCC unroll 4
    for (int g = 0; g < N; ++g) {
      const __m512i h = g == N - 1 ? _mm512_maskz_loadu_epi16(last, row + 32 * g)
                                   : _mm512_loadu_si512(row + 32 * g);
      _mm512_store_si512(tile + 32 * (kMxBlock * g + k), h);
      m[g] = _mm512_max_epu16(m[g], _mm512_and_si512(h, magnitude));
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < N; ++g) amax[g] = m[g];
}

// --- float32: 16 columns a vector, in 32-bit lanes -------------------------------------------

// encode_unit16 for 16 float32 columns (t: the tile's 32 rows of 16 elements; m: their amax bits,
// a NaN's above 0x7F800000), 32-bit lanes: sink(slot, v) for slot 0..7 gets column
// (slot & 3) + 8 (slot >> 2) in the low 32 bytes and the column 4 above it in the high.
template <Element E, E8m0Rounding R, bool kStats, typename Sink>
[[gnu::always_inline]] inline void encode_unit32(const float* t, __m512i m, uint8_t* scale,
                                                 int64_t scale_row, Sink sink, ColumnStats* st,
                                                 int64_t j0, __m512i& sat_total) {
  using L = Lanes<E, 23>;
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i field = _mm512_srli_epi32(m, 23);
  __m512i c = _mm512_sub_epi32(field, _mm512_set1_epi32(L::kMaxPow2));
  if constexpr (R == E8m0Rounding::kRceil) {
    const __mmask16 above = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(m, _mm512_set1_epi32(0x7FFFFF)), _mm512_set1_epi32(L::kMaxMant));
    c = _mm512_mask_add_epi32(c, above, c, one);
  }
  c = _mm512_max_epi32(c, _mm512_setzero_si512());
  // The columns cast here as in encode_unit16: a finite amax, no nonzero |x| under `from`.
  const __mmask16 zero = _mm512_testn_epi32_mask(m, m);
  __mmask16 fast = _mm512_cmplt_epu32_mask(m, _mm512_set1_epi32(0x7F800000));
  const __m512i ce = _mm512_mask_mov_epi32(c, zero, _mm512_set1_epi32(127));
  const __m512i add = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127), ce), 23);
  const __m512i round = _mm512_add_epi32(add, _mm512_set1_epi32(L::kRound));
  const __m512i from_less_1 = _mm512_sub_epi32(
      _mm512_slli_epi32(_mm512_sub_epi32(ce, _mm512_set1_epi32(L::kBias - 1)), 23), one);
  // Below 2^31 for the codes cast here (e >= -120).
  const __m512i sat_above = _mm512_sub_epi32(_mm512_set1_epi32(L::kMaxBits), add);
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i lowest = _mm512_set1_epi32(-1), sat = _mm512_setzero_si512();
  const auto code = [&](__m512i v) {
    const __m512i a = _mm512_and_si512(v, magnitude);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(v, L::kDrop), one);
    lowest = _mm512_min_epu32(lowest, _mm512_sub_epi32(a, one));
    if constexpr (kStats)
      sat = _mm512_mask_add_epi32(sat, _mm512_cmpgt_epi32_mask(a, sat_above), sat, one);
    return _mm512_srai_epi32(_mm512_add_epi32(_mm512_add_epi32(a, lsb), round), L::kDrop);
  };
  const __m512i max_code = _mm512_set1_epi8(L::kMaxCode), sign = _mm512_set1_epi8(-128);
  // Per 128-bit lane q, each dword r of x[k] holds row 4k + r's codes of columns 4q..4q + 3; the
  // byte shuffle makes dword i column 4q + i's codes of rows 4k..4k + 3.
  const __m512i by_column =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  __m512i x[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    __m512i v[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) v[r] = _mm512_load_si512(t + 16 * (4 * k + r));
    const __m512i codes =
        _mm512_min_epu8(_mm512_packus_epi16(_mm512_packus_epi32(code(v[0]), code(v[1])),
                                            _mm512_packus_epi32(code(v[2]), code(v[3]))),
                        max_code);
    const __m512i signs =
        _mm512_packs_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3]));
    x[k] = _mm512_shuffle_epi8(_mm512_ternarylogic_epi32(signs, sign, codes, kAndOr), by_column);
  }
  fast &= _mm512_cmpge_epu32_mask(lowest, from_less_1);
  // The 8 x 16 dwords transposed: column 4q + i's rows 16g..16g + 15 in lane q of y[4 g + i]...
  __m512i y[8];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    y[2 * p] = _mm512_unpacklo_epi32(x[2 * p], x[2 * p + 1]);
    y[2 * p + 1] = _mm512_unpackhi_epi32(x[2 * p], x[2 * p + 1]);
  }
#pragma GCC unroll 2
  for (int g = 0; g < 2; ++g) {
    x[4 * g] = _mm512_unpacklo_epi64(y[4 * g], y[4 * g + 2]);
    x[4 * g + 1] = _mm512_unpackhi_epi64(y[4 * g], y[4 * g + 2]);
    x[4 * g + 2] = _mm512_unpacklo_epi64(y[4 * g + 1], y[4 * g + 3]);
    x[4 * g + 3] = _mm512_unpackhi_epi64(y[4 * g + 1], y[4 * g + 3]);
  }
  // ...so column c's 32 bytes are x[c & 3] lane c >> 2, then x[4 + (c & 3)]'s.
  const __m512i lanes_lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i lanes_hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  __m512i o[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    o[i] = _mm512_permutex2var_epi64(x[i], lanes_lo, x[4 + i]);
    o[4 + i] = _mm512_permutex2var_epi64(x[i], lanes_hi, x[4 + i]);
  }
  alignas(16) uint8_t s[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(s), _mm512_cvtepi32_epi8(c));
  for (int j = 0; j < 16; ++j) scale[j * scale_row] = s[j];
  if constexpr (kStats) {
    sat_total = _mm512_add_epi32(sat_total, _mm512_maskz_mov_epi32(fast, sat));
    st->template record16<R>(j0, fast, _mm512_castsi512_ps(m), c);
  }
  if (const uint32_t redo = ~static_cast<uint32_t>(fast) & 0xFFFFu;
      __builtin_expect(redo != 0, 0)) {
    for (uint32_t f = redo; f; f &= f - 1) {
      const int j = __builtin_ctz(f);
      const int slot = (j & 3) + 4 * (j >> 3);
      MxStatsRun run;
      o[slot] = with_column(o[slot], (j >> 2) & 1,
                            redo_column<E, R, kStats>(t + j, 16, scale + j * scale_row, &run));
      if constexpr (kStats) st->merge(j0 + j, run);
    }
  }
#pragma GCC unroll 8
  for (int slot = 0; slot < 8; ++slot) sink(slot, o[slot]);
}

// The largest magnitude bits (int32) of each of N units of 16 float32 columns over 32 rows from
// p, into amax[0..N-1], the rows copied into tile (unit g's row k at tile + 16 (32 g + k)).
template <int N>
[[gnu::always_inline]] inline void column_amax32(const float* p, int64_t ld, __m512i* amax,
                                                 float* tile) {
  __m512i m[N];
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
#pragma GCC unroll 4
  for (int g = 0; g < N; ++g) m[g] = _mm512_setzero_si512();
  for (int k = 0; k < kMxBlock; ++k) {
    const float* row = p + k * ld;
#pragma GCC unroll 4
    for (int g = 0; g < N; ++g) {
      const __m512i v = _mm512_loadu_si512(row + 16 * g);
      _mm512_store_si512(tile + 16 * (kMxBlock * g + k), v);
      m[g] = _mm512_max_epu32(m[g], _mm512_and_si512(v, magnitude));
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < N; ++g) amax[g] = m[g];
}

// --- the walk ------------------------------------------------------------------------------

// encode_columns_bf16 and encode_columns_f32 (mx_cast.h) for one FP8 element format and
// rounding, over chunks of up to 1024 columns, each block row by block row, a tile of units
// (4 units: 256 bytes of each row, 8 KiB) at a time: the tile's amax by integer maxima down its
// rows as they are copied out (column_amax16 / 32), then each unit encoded from the copy
// (encode_unit16 / 32) while the tile two on (past the chunk's last: the next block row's first)
// is fetched into L2, a few of its rows with each unit. Where a column's 64 code bytes of two
// block rows make a whole cache line, the codes of the first wait in `pending` (a vector of two
// columns' 32 bytes) and the second's write both columns' lines past the caches.
template <Element E, E8m0Rounding R, bool kStats, typename T>
void encode_columns_as(const T* src, int64_t ld, int64_t rows, int64_t c0, int64_t groups,
                       uint8_t* codes, int64_t code_row, uint8_t* scales, int64_t scale_row,
                       MxStatsRun* runs) {
  constexpr bool kBf16 = sizeof(T) == 2;
  constexpr int kUnit = kBf16 ? 32 : 16;  // columns a vector
  constexpr int kSlots = kUnit / 2;       // code vectors a unit
  constexpr int64_t kChunk = 1024;        // columns: 32 KiB of pending codes
  constexpr int kTile = 4;                // units
  constexpr int64_t kAhead = 2;           // tiles
  __m512i sat_total = _mm512_setzero_si512();
  alignas(64) T tile[kTile * kMxBlock * kUnit];
  struct alignas(64) Line {
    uint8_t b[64];
  };
  const int64_t cols = 16 * groups;
  std::vector<Line> pending(static_cast<size_t>((std::min(kChunk, cols) + kUnit - 1) / kUnit) *
                            kSlots);
  const bool lines = code_row % 64 == 0;
  ColumnStats st(kStats ? (std::min(kChunk, cols) + kUnit - 1) / kUnit * kUnit : 0);
  for (int64_t col0 = 0; col0 < cols; col0 += kChunk) {
    const int64_t cn = std::min(kChunk, cols - col0);
    const int64_t units = (cn + kUnit - 1) / kUnit;
    const int64_t tiles = (units + kTile - 1) / kTile;
    if constexpr (kStats) st.reset();
    for (int64_t r0 = 0; r0 < rows; r0 += kMxBlock) {
      const T* strip = src + r0 * ld + c0 + col0;
      // This block row's codes: the first half of lines (kept), the second (streamed with the
      // kept half), or neither (stored).
      const auto at = reinterpret_cast<uintptr_t>(codes) + static_cast<uintptr_t>(r0);
      const bool first = lines && at % 64 == 0 && r0 + kMxBlock < rows;
      const bool second = lines && at % 64 == 32 && r0 > 0;
      for (int64_t u0 = 0; u0 < units; u0 += kTile) {
        const int n = static_cast<int>(std::min<int64_t>(kTile, units - u0));
        // The tile kAhead on (past the chunk's last: the next block row's first): its rows
        // (none past x), its first line and lines a row.
        int64_t ahead = u0 / kTile + kAhead, ahead_r0 = r0;
        if (ahead >= tiles) ahead -= tiles, ahead_r0 += kMxBlock;
        const int64_t ahead_rows =
            ahead < tiles ? std::clamp<int64_t>(rows - ahead_r0, 0, kMxBlock) : 0;
        const uintptr_t ahead_first =
            reinterpret_cast<uintptr_t>(src) +
            sizeof(T) * static_cast<uintptr_t>(ahead_r0 * ld + c0 + col0 + kUnit * kTile * ahead);
        const uintptr_t line0 = ahead_first & ~uintptr_t{63};
        const int64_t ahead_per = (kMxBlock + n - 1) / n;  // rows with each unit
        const int64_t ahead_lines =
            ahead_rows > 0
                ? static_cast<int64_t>(
                      (ahead_first +
                       sizeof(T) * std::min<int64_t>(kUnit * kTile, cn - kUnit * kTile * ahead) -
                       line0 + 63) /
                      64)
                : 0;
        __m512i amax[kTile];
        const int last_w = static_cast<int>(std::min<int64_t>(kUnit, cn - kUnit * (u0 + n - 1)));
        if constexpr (kBf16) {
          const __mmask32 last = last_w == 32 ? ~__mmask32{0} : __mmask32{0xFFFF};
          if (n == kTile)
            column_amax16<kTile>(strip + kUnit * u0, ld, amax, tile, last);
          else
            for (int g = 0; g < n; ++g)
              column_amax16<1>(strip + kUnit * (u0 + g), ld, amax + g, tile + kMxBlock * kUnit * g,
                               g == n - 1 ? last : ~__mmask32{0});
        } else {
          if (n == kTile)
            column_amax32<kTile>(strip + kUnit * u0, ld, amax, tile);
          else
            for (int g = 0; g < n; ++g)
              column_amax32<1>(strip + kUnit * (u0 + g), ld, amax + g, tile + kMxBlock * kUnit * g);
        }
        for (int g = 0; g < n; ++g) {
          for (int64_t k = ahead_per * g; k < std::min(ahead_rows, ahead_per * (g + 1)); ++k)
            for (int64_t l = 0; l < ahead_lines; ++l)
              _mm_prefetch(reinterpret_cast<const char*>(line0 + k * ld * sizeof(T) + 64 * l),
                           _MM_HINT_T1);
          const int64_t c = col0 + kUnit * (u0 + g);  // from c0
          const int w = g == n - 1 ? last_w : kUnit;
          uint8_t* out = codes + (c0 + c) * code_row + r0;
          Line* kept = pending.data() + kSlots * (u0 + g);
          // Slot s's two columns, from c.
          const auto pair = [](int s) {
            const int j = kBf16 ? (s & 7) + 16 * (s >> 3) : (s & 3) + 8 * (s >> 2);
            return std::pair<int, int>{j, j + kUnit / 4};
          };
          const auto block = [&](auto sink) {
            uint8_t* scale = scales + (c0 + c) * scale_row + r0 / kMxBlock;
            if constexpr (kBf16)
              encode_unit16<E, R, kStats>(tile + kMxBlock * kUnit * g, amax[g], w, scale, scale_row,
                                          sink, &st, c - col0, sat_total);
            else
              encode_unit32<E, R, kStats>(tile + kMxBlock * kUnit * g, amax[g], scale, scale_row,
                                          sink, &st, c - col0, sat_total);
          };
          if (first) {
            block([&](int s, __m512i v) { _mm512_store_si512(kept + s, v); });
          } else if (second) {
            block([&](int s, __m512i v) {
              const auto [j0, j1] = pair(s);
              const __m512i k = _mm512_load_si512(kept + s);
              _mm512_stream_si512(reinterpret_cast<__m512i*>(out + j0 * code_row - kMxBlock),
                                  _mm512_shuffle_i64x2(k, v, 0x44));
              _mm512_stream_si512(reinterpret_cast<__m512i*>(out + j1 * code_row - kMxBlock),
                                  _mm512_shuffle_i64x2(k, v, 0xEE));
            });
          } else {
            block([&](int s, __m512i v) {
              const auto [j0, j1] = pair(s);
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j0 * code_row),
                                  _mm512_castsi512_si256(v));
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j1 * code_row),
                                  _mm512_extracti64x4_epi64(v, 1));
            });
          }
        }
      }
    }
    if constexpr (kStats) st.finish(runs + col0, cn, element_limits(E).max);
  }
  _mm_sfence();  // the streamed lines before any later load of them, on any thread
  if (kStats) runs[0].saturated += _mm512_reduce_add_epi32(sat_total);
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
  if (element == Element::kE4m3 && floor)
    run.template operator()<Element::kE4m3, E8m0Rounding::kFloor>();
  else if (element == Element::kE4m3)
    run.template operator()<Element::kE4m3, E8m0Rounding::kRceil>();
  else if (floor)
    run.template operator()<Element::kE5m2, E8m0Rounding::kFloor>();
  else
    run.template operator()<Element::kE5m2, E8m0Rounding::kRceil>();
}

}  // namespace

void mx_encode_columns_bf16_avx512(const uint16_t* src, int64_t ld, int64_t rows, int64_t c0,
                                   int64_t groups, Element element, E8m0Rounding rounding,
                                   uint8_t* codes, int64_t code_row, uint8_t* scales,
                                   int64_t scale_row, MxStatsRun* runs) {
  if (element == Element::kE2m1)
    mx_encode_columns_bf16_avx2(src, ld, rows, c0, groups, element, rounding, codes, code_row,
                                scales, scale_row, runs);
  else
    encode_columns(src, ld, rows, c0, groups, element, rounding, codes, code_row, scales, scale_row,
                   runs);
}

void mx_encode_columns_f32_avx512(const float* src, int64_t ld, int64_t rows, int64_t c0,
                                  int64_t groups, Element element, E8m0Rounding rounding,
                                  uint8_t* codes, int64_t code_row, uint8_t* scales,
                                  int64_t scale_row, MxStatsRun* runs) {
  if (element == Element::kE2m1)
    mx_encode_columns_f32_avx2(src, ld, rows, c0, groups, element, rounding, codes, code_row,
                               scales, scale_row, runs);
  else
    encode_columns(src, ld, rows, c0, groups, element, rounding, codes, code_row, scales, scale_row,
                   runs);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
