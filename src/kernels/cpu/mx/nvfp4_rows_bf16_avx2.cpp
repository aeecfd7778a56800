// AVX2 (+FMA, F16C) body of the NVFP4 row cast of a bfloat16 source rounded to nearest, which
// casts the 16x16 tiles' rows too from the tiles' amax (nvfp4_tiles.cpp): each block's codes by
// 16-bit compares of its magnitudes against its scale code's thresholds (in 16-block groups, the
// thresholds that double octave by octave by two saturating subtractions), 16 blocks' amax and
// scale codes at once in 16-bit lanes (by 16-bit compares of the amax's bits against the
// per-tensor-scale thresholds), or 8 at a time in 32-bit lanes; the statistics counted in bytes.
// Groups the thresholds do not serve (a NaN amax, a factor with no row) take the float32 lanes
// of nvfp4_rows_avx2.h, blocks whose factor is NaN or infinite and a row's short last block the
// scalar body (mx_cast.cpp). The AVX-512 level runs this body too, its 16-block groups' codes by
// one vpermt2w lookup a block (encode_group16_bf16_lookup, the only AVX-512 code here).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"
#include "kernels/cpu/mx/nvfp4_lanes_avx2.h"
#include "kernels/cpu/mx/nvfp4_rows_avx2.h"
#include "kernels/cpu/mx/nvfp4_scale_codes.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;
using namespace nvfp4_avx2;

// Round to nearest of a bfloat16 source by compares of the magnitude bits. The factor of an
// E4M3 scale code c is f = (1 / tensor scale) / value(c), so under one tensor scale a block's
// codes are a function of c and of |x|'s 15 bits: e2m1_code(|x| * f) (the float32 product, as the
// scalar body rounds it) never falls as |x| grows, so the code is the number of thresholds
// T1 <= .. <= T7 that |x|'s bits reach, T_i the least bits whose code is i or more, and
// |x * f| > 6 (the saturated count) holds from a threshold T8 on. Each row holds T_i - 1 in 16
// lanes, the right side of a signed 16-bit compare (T_i is 1 to 0x7F80: 0 gives code 0, infinity
// code 7). The rows are made per thread as the cast meets the codes, for one tensor scale at a
// time; a code whose factor is 0, infinite or NaN gets no row (its group takes the float path).
//
// Where AVX-512 BW/VL serve, a code's 7 thresholds are looked up too (look): with B = T1 - 1 and
// d = min(|x| bits -sat B, 1023), the code is the count of T_i - B <= d. A bucket of 32 d's
// (d >> 5) holds at most one threshold where they lie 33 or more bits apart (normal values: the
// thresholds' ratios of at least 1.4 put them 51 or more apart), so the code is count_j + (d >=
// r_j) (r_j the bucket's threshold, or its end), which is (d - (r_j - 1024 (count_j + 1))) >> 10.
// look[c] holds B, then those 32 entries; look_ok[c] whether they give every d's count (the
// thresholds within 1023 of B, one a bucket); groups with another code take the compares.
//
// Without the lookup, a code's thresholds from T3 on are counted two octaves at a time (octave).
// Doubling |x| doubles the float32 product exactly, and the steps y > 1.25, 2.5, 5 (T3, T5, T7)
// and y >= 1.75, 3.5 (T4, T6) are each double the one before, so where |x|'s bits are normal
// there T5 = T3 + 128, T7 = T3 + 256 and T6 = T4 + 128: the count of T3..T7 reached is
// (|x| bits -sat (T3 - 128)) >> 7 plus (|x| bits -sat (T4 - 128)) >> 7, as long as no element
// reaches T3 + 384 or T4 + 256 (y >= 7). None does under a scale code below 126: the code rounds
// amax / (6 x tensor scale) to nearest, within 1/16 of it, so y <= 6.375 for every element of
// the block (126 also takes every amax above, so it keeps the compares). octave[c] is row[c]
// with T3 - 128 and T4 - 128 in its rows 2 and 3; octave_ok[c] whether the relations hold.
struct Bf16Thresholds {
  alignas(32) int16_t row[128][8][16];
  alignas(32) int16_t look[128][4][16];
  alignas(32) int16_t octave[128][8][16];
  bool look_ok[128] = {};
  bool octave_ok[128] = {};
  int look_lo = 1, look_hi = 0;      // the longest run of look_ok codes within lo..hi
  int octave_lo = 1, octave_hi = 0;  // the longest run of octave_ok codes within lo..hi
  float inverse_scale = 1.0f;        // 1 / tensor scale, as nvfp4_block_scale rounds it
  uint32_t tensor_scale_bits = 0;
  int lo = 1, hi = 0;  // rows lo..hi are made (none when lo > hi)

  // The least m in [0, 0x7F80] for which reached(m) holds, from a guess near it.
  template <class Reached>
  static int least(Reached reached, float guess) {
    int m = static_cast<int>(std::min<uint32_t>(bits_of(guess) >> 16, 0x7F80u));
    while (m > 0 && reached(m - 1)) --m;
    while (!reached(m)) ++m;
    return m;
  }

  bool make(int c, float tensor_scale) {
    const float f = (1.0f / tensor_scale) / e4m3_value(static_cast<uint8_t>(c));
    if (!(f > 0.0f && f < std::numeric_limits<float>::infinity())) return false;
    // The code steps up at y = 0.25, 0.75, .., 5 (ties to even decide which side), and |y| > 6.
    static constexpr float kSteps[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
    for (int i = 0; i < 8; ++i) {
      const float guess = kSteps[i] / f;
      const int t =
          i < 7
              ? least(
                    [&](int m) {
                      const float y = float_of(static_cast<uint32_t>(m) << 16) * f;
                      return (e2m1_code(y) & 7) > i;
                    },
                    guess)
              : least(
                    [&](int m) { return float_of(static_cast<uint32_t>(m) << 16) * f > kE2m1Max; },
                    guess);
      for (int l = 0; l < 16; ++l) row[c][i][l] = static_cast<int16_t>(t - 1);
    }
    make_look(c);
    make_octave(c);
    return true;
  }

  // octave[c] and octave_ok[c] from row[c] (T_i = row[c][i - 1] + 1).
  void make_octave(int c) {
    const int t3 = row[c][2][0] + 1, t4 = row[c][3][0] + 1;
    octave_ok[c] = c < 126 && t3 >= 256 && t4 + 128 <= 0x7F80 && row[c][4][0] + 1 == t3 + 128 &&
                   row[c][6][0] + 1 == t3 + 256 && row[c][5][0] + 1 == t4 + 128;
    for (int i = 0; i < 8; ++i)
      for (int l = 0; l < 16; ++l)
        octave[c][i][l] = i == 2 ? static_cast<int16_t>(t3 - 128)
                                 : (i == 3 ? static_cast<int16_t>(t4 - 128) : row[c][i][l]);
  }

  // look[c] and look_ok[c] from row[c].
  void make_look(int c) {
    int r[7];
    const int base = row[c][0][0];  // T1 - 1
    for (int i = 0; i < 7; ++i) r[i] = row[c][i][0] + 1 - base;
    look_ok[c] = r[6] <= 1023;
    for (int j = 0; j < 32; ++j) {
      int count = 0, inside = 0, at = 32 * j + 32;
      for (int i = 0; i < 7; ++i) {
        count += r[i] <= 32 * j;
        if (r[i] > 32 * j && r[i] < 32 * j + 32) ++inside, at = r[i];
      }
      if (inside > 1) look_ok[c] = false;
      look[c][1 + j / 16][j % 16] = static_cast<int16_t>(at - 1024 * (count + 1));
    }
    for (int l = 0; l < 16; ++l) {
      look[c][0][l] = static_cast<int16_t>(base);
      look[c][3][l] = row[c][7][l];
    }
    // Every d's code against the count of thresholds it reaches. Both are step functions of d:
    // the count steps at each r_i, the lookup only where d enters a bucket and where d - entry
    // meets a multiple of 1024 (once a bucket at most). Between those points both stay constant,
    // so comparing them at each point compares them at every d in 0..1023.
    const auto agrees = [&](int d) {
      int count = 0;
      for (int i = 0; i < 7; ++i) count += r[i] <= d;
      return count == (d - look[c][1 + (d >> 9)][(d >> 5) & 15]) >> 10;
    };
    for (int j = 0; j < 32 && look_ok[c]; ++j) {
      const int step = 32 * j + ((look[c][1 + j / 16][j % 16] - 32 * j) % 1024 + 1024) % 1024;
      look_ok[c] = agrees(32 * j) && (step >= 32 * j + 32 || agrees(step));
    }
    for (int i = 0; i < 7 && look_ok[c]; ++i)
      if (r[i] >= 0 && r[i] < 1024) look_ok[c] = agrees(r[i]);
  }

  // first..last: the longest run of ok codes over lo..hi.
  void run_of(const bool* ok, int& first, int& last) const {
    first = 1, last = 0;
    for (int c = lo; c <= hi;) {
      if (!ok[c]) {
        ++c;
        continue;
      }
      int e = c;
      while (e + 1 <= hi && ok[e + 1]) ++e;
      if (e - c > last - first) first = c, last = e;
      c = e + 1;
    }
  }
  void runs() {
    run_of(look_ok, look_lo, look_hi);
    run_of(octave_ok, octave_lo, octave_hi);
  }

  // Whether rows a..b (codes 0-126) are made or could be made now (out of line: the cast's
  // loop calls it only when a group meets new codes).
  __attribute__((noinline)) bool cover(int a, int b, float tensor_scale) {
    if (a > b || a < 0 || b > 126) return false;
    if (lo > hi) {
      if (!make(a, tensor_scale)) return false;
      lo = hi = a;
    }
    for (; a < lo; --lo)
      if (!make(lo - 1, tensor_scale)) return false;
    for (; b > hi; ++hi)
      if (!make(hi + 1, tensor_scale)) return false;
    runs();
    return true;
  }
};

// This thread's rows, for tensor_scale.
inline Bf16Thresholds& bf16_thresholds(float tensor_scale) {
  thread_local std::unique_ptr<Bf16Thresholds> table;
  if (!table) table = std::make_unique<Bf16Thresholds>();
  if (table->tensor_scale_bits != bits_of(tensor_scale) || table->lo > table->hi) {
    table->tensor_scale_bits = bits_of(tensor_scale);
    table->inverse_scale = 1.0f / tensor_scale;
    table->lo = 1;
    table->hi = 0;
    table->look_lo = 1;
    table->look_hi = 0;
    table->octave_lo = 1;
    table->octave_hi = 0;
  }
  return *table;
}

// One block's 16 magnitude codes (0-7) in 16-bit lanes in element order, with its elements v,
// their magnitudes m and (kStats) the mask of those past T8 (saturated). bf16_threshold_codes
// gives the codes negated (the sum of its compares, each -1 where reached).
struct Bf16BlockCodes {
  __m256i code, v, m, over;
};

template <bool kStats>
inline Bf16BlockCodes bf16_threshold_codes(__m256i v, const int16_t (*row)[16]) {
  const __m256i m = _mm256_and_si256(v, _mm256_set1_epi16(0x7FFF));
  __m256i r[8];
#pragma GCC unroll 8
  for (int i = 0; i < (kStats ? 8 : 7); ++i)
    r[i] = _mm256_cmpgt_epi16(m, _mm256_load_si256(reinterpret_cast<const __m256i*>(row[i])));
  return {
      _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(r[0], r[1]), _mm256_add_epi16(r[2], r[3])),
                       _mm256_add_epi16(_mm256_add_epi16(r[4], r[5]), r[6])),
      v, m, kStats ? r[7] : m};
}

// The codes by octave[c] (oct; Bf16Thresholds::octave_ok), not negated: T1 and T2 by compares,
// T3..T7 by two saturating subtractions and shifts.
template <bool kStats>
inline Bf16BlockCodes bf16_octave_codes(__m256i v, const int16_t (*oct)[16]) {
  const __m256i m = _mm256_and_si256(v, _mm256_set1_epi16(0x7FFF));
  auto r = [&](int i) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(oct[i])); };
  const __m256i upper = _mm256_add_epi16(_mm256_srli_epi16(_mm256_subs_epu16(m, r(2)), 7),
                                         _mm256_srli_epi16(_mm256_subs_epu16(m, r(3)), 7));
  const __m256i lower = _mm256_add_epi16(_mm256_cmpgt_epi16(m, r(0)), _mm256_cmpgt_epi16(m, r(1)));
  return {_mm256_sub_epi16(upper, lower), v, m, kStats ? _mm256_cmpgt_epi16(m, r(7)) : m};
}

// The codes of two blocks as 32 bytes in the order of _mm256_packs_epi16(a, b): their magnitude
// codes (kNegated: negated in a and b), with bit 3 set where the element's sign bit is (the packs
// keep each element's sign in its byte's top bit, which the blend reads). With kStats it counts
// in bytes the saturated elements and the flushed ones: code 0 from a nonzero magnitude (the packs
// saturate magnitudes to 0..127, so they stay nonzero), _mm256_sign_epi8 keeping the zero code's
// mask only there.
template <bool kStats, bool kNegated = false>
inline __m256i bf16_code_bytes(const Bf16BlockCodes& a, const Bf16BlockCodes& b, __m256i& saturated,
                               __m256i& flushed) {
  __m256i code = _mm256_packs_epi16(a.code, b.code);
  if constexpr (kNegated) code = _mm256_sub_epi8(_mm256_setzero_si256(), code);
  if constexpr (kStats) {
    saturated = _mm256_sub_epi8(saturated, _mm256_packs_epi16(a.over, b.over));
    flushed =
        _mm256_sub_epi8(flushed, _mm256_sign_epi8(_mm256_cmpeq_epi8(code, _mm256_setzero_si256()),
                                                  _mm256_packs_epi16(a.m, b.m)));
  }
  return _mm256_blendv_epi8(code, _mm256_or_si256(code, _mm256_set1_epi8(8)),
                            _mm256_packs_epi16(a.v, b.v));
}

// A group's byte counts (at most 255 a byte) added to a segment's 32-bit lanes.
inline __m256i add_byte_counts(__m256i lanes, __m256i counts) {
  return _mm256_add_epi32(lanes, _mm256_sad_epu8(counts, _mm256_setzero_si256()));
}

// Four blocks' codes as bytes (bf16_code_bytes of a and b, of c and d) stored as 32 bytes, the
// even element in the low nibble.
inline void store_e2m1_blocks4_bytes(uint8_t* dst, __m256i ab, __m256i cd) {
  // Per 128-bit half h: 16-bit units even + 16 * odd of a's pairs 4h..4h+3, then b's (c's, d's).
  const __m256i pab = _mm256_maddubs_epi16(ab, _mm256_set1_epi16(0x1001));
  const __m256i pcd = _mm256_maddubs_epi16(cd, _mm256_set1_epi16(0x1001));
  // Dwords: a's pairs 0-3, b's, c's, d's, then a's pairs 4-7, b's, c's, d's.
  const __m256i p = _mm256_packus_epi16(pab, pcd);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// A group of 8 bfloat16 blocks made ready for encode_group8_bf16 (prepare_group8_bf16): their
// own amax bits, E4M3 scale codes and the byte offsets of their rows in Bf16Thresholds::row (a
// row is 256 bytes); ok is false where a block's scale code has no row (a factor that is 0,
// infinite or NaN).
struct Bf16Group {
  __m256i own;  // taken where the codes or the statistics need it
  __m256i code;
  alignas(32) int32_t offset[8];
  bool ok;
};

// encode_group8's amax and scale codes of 8 bfloat16 blocks from p, their scales written and
// their rows in t made where missing; nothing is written where g.ok comes back false. The
// blocks' own amax are taken where the codes or (kStats) the statistics need them.
template <bool kStats>
__attribute__((always_inline)) inline void prepare_group8_bf16(
    const uint16_t* p, const float* block_amax_in, float tensor_scale,
    const Nvfp4ScaleCodeThresholds& sc, Bf16Thresholds& t, uint8_t* scales, Bf16Group& g) {
  if (kStats || !block_amax_in) {
    __m256i m[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      m[k] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                              _mm256_set1_epi16(0x7FFF));
    g.own = transposed_max8_16(m);
  } else {
    g.own = _mm256_setzero_si256();
  }
  const __m256 amax = group_amax(g.own, block_amax_in);
  // By sc's compares where they serve, else by the divisions.
  const __m256i bits = _mm256_castps_si256(amax);
  g.code =
      scale_codes8_serve(sc, bits) ? scale_codes8(sc, bits) : nvfp4_scale_codes(amax, tensor_scale);
  g.ok = false;
  const __m256i outside = _mm256_or_si256(_mm256_cmpgt_epi32(g.code, _mm256_set1_epi32(t.hi)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(t.lo), g.code));
  if (!_mm256_testz_si256(outside, outside)) {
    alignas(32) int32_t c[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(c), g.code);
    if (!t.cover(*std::min_element(c, c + 8), *std::max_element(c, c + 8), tensor_scale)) return;
  }
  _mm_storel_epi64(reinterpret_cast<__m128i*>(scales), bytes_of(g.code));
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.offset), _mm256_slli_epi32(g.code, 8));
  g.ok = true;
}

// kBlocks blocks of 16 from p (a multiple of 4): each block's codes by compares against its row
// of t (offset[b] bytes into t.row), stored four blocks at a time at codes; with kStats their
// saturated and flushed counts added into those.
template <bool kStats, int kBlocks, typename Offset, bool kOctave = false>
[[gnu::always_inline]] inline void threshold_blocks_bf16(const uint16_t* p, const Offset* offset,
                                                         const Bf16Thresholds& t, uint8_t* codes,
                                                         __m256i& saturated, __m256i& flushed) {
  const char* rows = reinterpret_cast<const char*>(kOctave ? t.octave : t.row);
  __m256i bytes[2];
  Bf16BlockCodes c[2];
#pragma GCC unroll 16
  for (int b = 0; b < kBlocks; ++b) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * b));
    const auto* row = reinterpret_cast<const int16_t(*)[16]>(rows + offset[b]);
    c[b % 2] = kOctave ? bf16_octave_codes<kStats>(v, row) : bf16_threshold_codes<kStats>(v, row);
    if (b % 2 == 1)
      bytes[(b / 2) % 2] = bf16_code_bytes<kStats, !kOctave>(c[0], c[1], saturated, flushed);
    if (b % 4 == 3) store_e2m1_blocks4_bytes(codes + 8 * (b - 3), bytes[0], bytes[1]);
  }
}

// encode_group8 of a bfloat16 source rounded to nearest, from its prepared group g (g.ok): each
// block's codes by compares against its row of t, and with kStats its counts and records.
template <bool kStats>
__attribute__((always_inline)) inline void encode_group8_bf16(const uint16_t* p, const Bf16Group& g,
                                                              const Bf16Thresholds& t,
                                                              const Nvfp4ScaleCodeThresholds& sc,
                                                              uint8_t* codes, Nvfp4LaneStats8* st) {
  __m256i saturated = _mm256_setzero_si256(), flushed = saturated;
  threshold_blocks_bf16<kStats, 8>(p, g.offset, t, codes, saturated, flushed);
  if constexpr (kStats) {
    st->saturated = add_byte_counts(st->saturated, saturated);
    st->flushed = add_byte_counts(st->flushed, flushed);
    const __m256 own_f = _mm256_castsi256_ps(g.own);
    st->best = _mm256_max_ps(own_f, st->best);
    // The blocks' factors, as nvfp4_block_scale makes them.
    const __m256 factor = sc.factors_ok
                              ? scale_factors8(sc, g.code)
                              : _mm256_div_ps(_mm256_set1_ps(t.inverse_scale), e4m3_values(g.code));
    st->peak = _mm256_max_ps(_mm256_mul_ps(own_f, factor), st->peak);
  }
}

// --- 16 bfloat16 blocks at a time --------------------------------------------------------------
//
// A group of 16 blocks takes its amax and scale codes in 16-bit lanes, one block a lane: the
// amax as bfloat16 bits (the largest magnitude's, or the high half of the block's float32 amax
// given by the caller, which is a bfloat16 value there), its code by the thresholds' 16-bit form
// (Nvfp4ScaleCodeThresholds::base16, step16). Groups holding a NaN amax, a negative given amax,
// or a code with no row, go 8 blocks at a time as before.

// The constants of the 16-block groups, made once a segment and read from memory (GCC would
// otherwise rebuild each broadcast in registers every group).
struct Bf16Consts16 {
  __m256i magnitude;  // 0x7FFF
  __m256i base;       // B9
  __m256i step[7];    // B(10 + j) - B9 - 1
  __m256i low7;       // 127
  __m256i nine, eight, c126;
  __m256i nan_bits;                    // 0x7F80: amax bits above it are NaN
  __m256i below, above;                // the rows made are codes below + 1 .. above - 1
  __m256i look_below, look_above;      // the codes looked up are look_below + 1 .. look_above - 1
  __m256i octave_below, octave_above;  // the same of the codes by octave
  __m256i unusual;     // 32-bit lanes: float32 amax bits above infinity's, or negative
  __m256i factor_top;  // Nvfp4ScaleCodeThresholds::factor_top
  __m256i look_cap;    // 1023
  __m256 inverse_scale;

  Bf16Consts16(const Nvfp4ScaleCodeThresholds& sc, const Bf16Thresholds& t)
      : magnitude(_mm256_set1_epi16(0x7FFF)),
        base(_mm256_set1_epi16(sc.base16)),
        low7(_mm256_set1_epi16(127)),
        nine(_mm256_set1_epi16(9)),
        eight(_mm256_set1_epi16(8)),
        c126(_mm256_set1_epi16(126)),
        nan_bits(_mm256_set1_epi16(0x7F80)),
        unusual(_mm256_set1_epi32(0x7F800000)),
        factor_top(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc.factor_top))),
        look_cap(_mm256_set1_epi16(1023)),
        inverse_scale(_mm256_set1_ps(t.inverse_scale)) {
    for (int j = 0; j < 7; ++j) step[j] = _mm256_set1_epi16(sc.step16[j]);
    rows(t);
  }
  void rows(const Bf16Thresholds& t) {
    below = _mm256_set1_epi16(static_cast<int16_t>(t.lo - 1));
    above = _mm256_set1_epi16(static_cast<int16_t>(t.hi + 1));
    look_below = _mm256_set1_epi16(static_cast<int16_t>(t.look_lo - 1));
    look_above = _mm256_set1_epi16(static_cast<int16_t>(t.look_hi + 1));
    octave_below = _mm256_set1_epi16(static_cast<int16_t>(t.octave_lo - 1));
    octave_above = _mm256_set1_epi16(static_cast<int16_t>(t.octave_hi + 1));
  }
};

// 16 blocks made ready for encode_group16_bf16: their own amax bits and scale codes in 16-bit
// lanes, and their rows' byte offsets in Bf16Thresholds::row (with look, in Bf16Thresholds::look
// for encode_group16_bf16_lookup). ok is false where the group goes 8 blocks at a time (nothing
// is written then).
struct Bf16Group16 {
  __m256i own;  // taken where the codes or the statistics need it
  __m256i code;
  alignas(32) uint16_t offset[16];
  bool ok;
  bool look;     // (with kLookup) every code's look_ok: the codes by lookup
  bool octave;   // (without look) every code's octave_ok: the codes by octave
  bool bounded;  // every code below 126 and no element above the amax the codes come from
};

// The scale codes of 16 amax given as bfloat16 bits in 16-bit lanes (numbers >= 0), by the
// thresholds' 16-bit form: 9 + 8 octaves + the steps the low 7 bits reach, clamped to 8..126.
[[gnu::always_inline]] inline __m256i scale_codes16(const Bf16Consts16& k, __m256i bits) {
  const __m256i d = _mm256_sub_epi16(bits, k.base);
  __m256i c = _mm256_add_epi16(_mm256_slli_epi16(_mm256_srai_epi16(d, 7), 3), k.nine);
  const __m256i low = _mm256_and_si256(d, k.low7);
#pragma GCC unroll 7
  for (int j = 0; j < 7; ++j) c = _mm256_sub_epi16(c, _mm256_cmpgt_epi16(low, k.step[j]));
  return _mm256_min_epi16(_mm256_max_epi16(c, k.eight), k.c126);
}

// 16 blocks from p: their amax (block_amax_in's, or their own), scale codes, scales (written)
// and rows (made where missing). Returns false, writing nothing, where the group goes 8 blocks at
// a time. The blocks' own amax are taken where the codes or (kStats, without kTileRecords) the
// statistics need them: given the tiles' amax, a cast reads the source once, in
// encode_group16_bf16, unless its records need each block's own amax. With kTileRecords (the
// tiles' own amax, MxKernels::nvfp4_encode_stats) g.own is the given amax, for the records.
template <bool kStats, bool kTileRecords, bool kLookup>
[[gnu::always_inline]] inline void prepare_group16_bf16(const uint16_t* p,
                                                        const float* block_amax_in,
                                                        float tensor_scale, Bf16Consts16& k,
                                                        Bf16Thresholds& t, uint8_t* scales,
                                                        Bf16Group16& g) {
  if ((kStats && !kTileRecords) || !block_amax_in) {
    __m256i m[16];
#pragma GCC unroll 16
    for (int b = 0; b < 16; ++b)
      m[b] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * b)),
                              k.magnitude);
    g.own = transposed_max16<16>(m);
  } else {
    g.own = _mm256_setzero_si256();
  }
  __m256i amax = g.own, unusual;
  if (block_amax_in) {
    // The given amax of a bfloat16 source are bfloat16 values: their high 16 bits, in order.
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_amax_in));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_amax_in + 8));
    amax = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_srli_epi32(a0, 16), _mm256_srli_epi32(a1, 16)), 0xD8);
    // NaN or negative amax, or any that is not a bfloat16 value, go 8 at a time.
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    unusual = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpgt_epi32(a0, k.unusual), _mm256_cmpgt_epi32(a1, k.unusual)),
        _mm256_and_si256(_mm256_or_si256(a0, a1), low16));
    unusual = _mm256_or_si256(unusual, _mm256_srai_epi32(_mm256_or_si256(a0, a1), 31));
    // Numbers all (else the group goes 8 blocks at a time, which takes their own amax).
    if constexpr (kTileRecords) g.own = amax;
  } else {
    unusual = _mm256_cmpgt_epi16(amax, k.nan_bits);
  }
  g.code = scale_codes16(k, amax);
  g.ok = false;
  if (!_mm256_testz_si256(unusual, unusual)) return;
  const __m256i inside =
      _mm256_and_si256(_mm256_cmpgt_epi16(g.code, k.below), _mm256_cmpgt_epi16(k.above, g.code));
  if (_mm256_movemask_epi8(inside) != -1) {
    alignas(32) int16_t c[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(c), g.code);
    if (!t.cover(*std::min_element(c, c + 16), *std::max_element(c, c + 16), tensor_scale)) return;
    k.rows(t);
  }
  _mm_storeu_si128(
      reinterpret_cast<__m128i*>(scales),
      _mm_packus_epi16(_mm256_castsi256_si128(g.code), _mm256_extracti128_si256(g.code, 1)));
  g.ok = true;
  g.look = kLookup &&
           _mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpgt_epi16(g.code, k.look_below),
                                                 _mm256_cmpgt_epi16(k.look_above, g.code))) == -1;
  // Bounded where no element lies above the amax the codes come from (the blocks' own, the
  // source's own given, kTileRecords, or given ones that the own do not pass) and every code is
  // below 126: the octave codes and the uncapped lookup need it.
  bool bounded = !block_amax_in || kTileRecords;
  if constexpr (kStats && !kTileRecords) {
    if (!bounded) {
      const __m256i above = _mm256_cmpgt_epi16(g.own, amax);
      bounded = _mm256_testz_si256(above, above);
    }
  }
  g.bounded = bounded && _mm256_movemask_epi8(_mm256_cmpgt_epi16(k.c126, g.code)) == -1;
  g.octave =
      !g.look && g.bounded &&
      _mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpgt_epi16(g.code, k.octave_below),
                                            _mm256_cmpgt_epi16(k.octave_above, g.code))) == -1;
  // A row is 256 bytes, a lookup 128.
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.offset),
                     g.look ? _mm256_slli_epi16(g.code, 7) : _mm256_slli_epi16(g.code, 8));
}

// A prepared group's counts and, where `records`, its records (kStats), from its blocks' byte
// counts. The records come from g.own alone, so rows that share a group's amax (a tile row's) take
// them once.
template <bool kStats>
[[gnu::always_inline]] inline void group16_records(const Bf16Group16& g,
                                                   const Nvfp4ScaleCodeThresholds& sc,
                                                   const Bf16Consts16& k, __m256i saturated,
                                                   __m256i flushed, Nvfp4LaneStats8* st,
                                                   bool records) {
  if constexpr (kStats) {
    st->saturated = add_byte_counts(st->saturated, saturated);
    st->flushed = add_byte_counts(st->flushed, flushed);
    if (!records) return;
    // The blocks' own amax as float32 and their codes in 32-bit lanes, in the same order.
    const __m256i zero = _mm256_setzero_si256();
    const __m256 own[2] = {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, g.own)),
                           _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, g.own))};
    const __m256i code[2] = {_mm256_unpacklo_epi16(g.code, zero),
                             _mm256_unpackhi_epi16(g.code, zero)};
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      st->best = _mm256_max_ps(own[h], st->best);
      // The blocks' factors, as nvfp4_block_scale makes them.
      const __m256 factor = sc.factors_ok
                                ? _mm256_castsi256_ps(_mm256_sub_epi32(
                                      _mm256_permutevar8x32_epi32(k.factor_top, code[h]),
                                      _mm256_slli_epi32(_mm256_srli_epi32(code[h], 3), 23)))
                                : _mm256_div_ps(k.inverse_scale, e4m3_values(code[h]));
      st->peak = _mm256_max_ps(_mm256_mul_ps(own[h], factor), st->peak);
    }
  }
}

// The 16 blocks of a prepared group (g.ok): each block's codes by compares against its row of t
// (kOctave: by octave, g.octave), and with kStats their counts and records.
template <bool kStats, bool kOctave>
[[gnu::always_inline]] inline void encode_group16_bf16(const uint16_t* p, const Bf16Group16& g,
                                                       const Bf16Thresholds& t,
                                                       const Nvfp4ScaleCodeThresholds& sc,
                                                       const Bf16Consts16& k, uint8_t* codes,
                                                       Nvfp4LaneStats8* st, bool records) {
  __m256i saturated = _mm256_setzero_si256(), flushed = saturated;
  threshold_blocks_bf16<kStats, 16, uint16_t, kOctave>(p, g.offset, t, codes, saturated, flushed);
  group16_records<kStats>(g, sc, k, saturated, flushed, st, records);
}

// One block's codes by lookup (Bf16Thresholds::look; look is its look[c]), not negated. This and
// encode_group16_bf16_lookup alone carry AVX-512 BW/VL (vpermt2w): the rest of the file stays AVX2.
// Without kCap d is not capped at 1023: a bounded group's elements have y <= 6.375 (Bf16Thresholds,
// octave), below B + 1024 (y = 64).
template <bool kStats, bool kCap>
[[gnu::target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"), gnu::always_inline]] inline Bf16BlockCodes
bf16_lookup_codes(__m256i v, const int16_t (*look)[16], const Bf16Consts16& k) {
  const __m256i m = _mm256_and_si256(v, k.magnitude);
  __m256i d = _mm256_subs_epu16(m, _mm256_load_si256(reinterpret_cast<const __m256i*>(look[0])));
  if constexpr (kCap) d = _mm256_min_epu16(d, k.look_cap);
  const __m256i e = _mm256_permutex2var_epi16(
      _mm256_load_si256(reinterpret_cast<const __m256i*>(look[1])), _mm256_srli_epi16(d, 5),
      _mm256_load_si256(reinterpret_cast<const __m256i*>(look[2])));
  return {_mm256_srli_epi16(_mm256_sub_epi16(d, e), 10), v, m,
          kStats
              ? _mm256_cmpgt_epi16(m, _mm256_load_si256(reinterpret_cast<const __m256i*>(look[3])))
              : m};
}

// encode_group16_bf16 of a group whose codes all have lookups (g.look): the codes by
// bf16_lookup_codes, capped where the group is not bounded. Out of line, as the AVX2 loop cannot
// take it inline.
template <bool kStats, bool kCap>
[[gnu::target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"), gnu::noinline]] void
encode_group16_bf16_lookup(const uint16_t* p, const Bf16Group16& g, const Bf16Thresholds& t,
                           const Nvfp4ScaleCodeThresholds& sc, const Bf16Consts16& k,
                           uint8_t* codes, Nvfp4LaneStats8* st, bool records) {
  const char* looks = reinterpret_cast<const char*>(t.look);
  __m256i saturated = _mm256_setzero_si256(), flushed = saturated, bytes[2];
  Bf16BlockCodes c[2];
#pragma GCC unroll 16
  for (int b = 0; b < 16; ++b) {
    c[b % 2] = bf16_lookup_codes<kStats, kCap>(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * b)),
        reinterpret_cast<const int16_t(*)[16]>(looks + g.offset[b]), k);
    if (b % 2 == 1) bytes[(b / 2) % 2] = bf16_code_bytes<kStats>(c[0], c[1], saturated, flushed);
    if (b % 4 == 3) store_e2m1_blocks4_bytes(codes + 8 * (b - 3), bytes[0], bytes[1]);
  }
  group16_records<kStats>(g, sc, k, saturated, flushed, st, records);
}

// A row's groups of 16 blocks prepared once for every row that shares their amax (a 16x16 tile
// row's rows: prepare_shared_groups16), and the first row's scales, which the preparation wrote.
struct Bf16SharedGroups {
  static constexpr int64_t kMaxGroups = 32;  // rows of up to 8192 elements
  Bf16Group16 group[kMaxGroups];
  int64_t groups = 0;
  const uint8_t* scales = nullptr;
};

// The cast of a segment of n bfloat16 elements rounded to nearest: whole groups of 16 blocks
// (encode_group16_bf16) where the scale codes' thresholds serve, each prepared a group ahead so
// that its amax and scale codes' latency hides behind the blocks before; then groups of 8
// (encode_group8_bf16, prepared a group ahead too), a group whose codes have no rows by the
// float32 lanes (encode_group8); the last 1-7 whole blocks from a zero-padded copy. With kStats
// it returns nvfp4_run_stats's counts of the segment, taken from the vectors the cast holds.
// Given `shared` (the groups of 16 prepared from block_amax_in, no own amax needed), the groups
// of 16 take them in place of their own preparation, row 0's scales copied, and their records
// only in the row whose scales they wrote.
template <bool kStats, bool kTileRecords = false, bool kLookup = false>
MxStatsRun encode_bf16(const uint16_t* p, int64_t n, float tensor_scale, const float* block_amax_in,
                       uint8_t* codes, uint8_t* scales, const Bf16SharedGroups* shared = nullptr) {
  constexpr DType::Id kSrc = DType::Id::bf16;
  const DType dtype{kSrc};
  const int64_t blocks = n / kNvfp4Block, full = blocks * kNvfp4Block;
  Nvfp4LaneStats8 st = Nvfp4LaneStats8::zero();
  MxStatsRun run;
  auto scalar_block = [&](int64_t b, int64_t len) {
    nvfp4_scalar_block<false, kStats>(p, dtype, tensor_scale, block_amax_in, 0, 0, 0, 0, codes,
                                      scales, b, len, run);
  };
  const Nvfp4ScaleCodeThresholds& sc = nvfp4_scale_code_thresholds(tensor_scale);
  // 8 blocks through the float32 lanes; returns the blocks the scalar body casts.
  auto group = [&](const void* x, const float* amax_in, uint8_t* c, uint8_t* s) {
    return encode_group8<false, kStats, kSrc>(x, amax_in, tensor_scale, sc, nullptr, 0, 0, 0, c, s,
                                              &st);
  };
  Bf16Thresholds* thresholds = &bf16_thresholds(tensor_scale);
  auto prepare = [&](int64_t b, Bf16Group & g) __attribute__((always_inline)) {
    prepare_group8_bf16<kStats>(p + b * kNvfp4Block, block_amax_in ? block_amax_in + b : nullptr,
                                tensor_scale, sc, *thresholds, scales + b, g);
  };
  // 8 blocks from block b8, not prepared ahead.
  auto eight = [&](int64_t b8) {
    const float* amax_in = block_amax_in ? block_amax_in + b8 : nullptr;
    uint8_t *c = codes + b8 * kNvfp4Block / 2, *s = scales + b8;
    Bf16Group g8;
    prepare_group8_bf16<kStats>(p + b8 * kNvfp4Block, amax_in, tensor_scale, sc, *thresholds, s,
                                g8);
    if (g8.ok) return encode_group8_bf16<kStats>(p + b8 * kNvfp4Block, g8, *thresholds, sc, c, &st);
    for (unsigned nan = group(p + b8 * kNvfp4Block, amax_in, c, s); nan; nan &= nan - 1)
      scalar_block(b8 + std::countr_zero(nan), kNvfp4Block);
  };
  int64_t b = 0;
  // Whole groups of 16 blocks where the thresholds serve, each prepared a group ahead; a group
  // that goes 8 blocks at a time runs the loop below on its two halves.
  if (sc.ok && blocks >= 16) {
    Bf16Consts16 k(sc, *thresholds);
    Bf16Group16 ahead16[2];
    const int64_t groups16 = blocks / 16;
    auto prepare16 = [&](int64_t g, Bf16Group16 & a) __attribute__((always_inline)) {
      prepare_group16_bf16<kStats, kTileRecords, kLookup>(
          p + 16 * g * kNvfp4Block, block_amax_in ? block_amax_in + 16 * g : nullptr, tensor_scale,
          k, *thresholds, scales + 16 * g, a);
    };
    const bool records = !shared || shared->scales == scales;
    if (!shared) prepare16(0, ahead16[0]);
    for (int64_t g = 0; g < groups16; ++g) {
      // The 8 lines of the group 4 KiB on (kernels/cpu/common/fetch_ahead.h): the
      // preparation a group ahead reads 512 bytes on, and none where the amax are given.
      fetch_group_lines_ahead(p + 16 * g * kNvfp4Block);
      if (!shared && g + 1 < groups16) prepare16(g + 1, ahead16[(g + 1) & 1]);
      const Bf16Group16& a = shared ? shared->group[g] : ahead16[g & 1];
      if (!records && a.ok) std::memcpy(scales + 16 * g, shared->scales + 16 * g, 16);
      if (kLookup && a.ok && a.look) {
        if (a.bounded)
          encode_group16_bf16_lookup<kStats, false>(p + 16 * g * kNvfp4Block, a, *thresholds, sc, k,
                                                    codes + 8 * g * kNvfp4Block, &st, records);
        else
          encode_group16_bf16_lookup<kStats, true>(p + 16 * g * kNvfp4Block, a, *thresholds, sc, k,
                                                   codes + 8 * g * kNvfp4Block, &st, records);
      } else if (a.ok && a.octave) {
        encode_group16_bf16<kStats, true>(p + 16 * g * kNvfp4Block, a, *thresholds, sc, k,
                                          codes + 8 * g * kNvfp4Block, &st, records);
      } else if (a.ok) {
        encode_group16_bf16<kStats, false>(p + 16 * g * kNvfp4Block, a, *thresholds, sc, k,
                                           codes + 8 * g * kNvfp4Block, &st, records);
      } else {
        for (int h = 0; h < 2; ++h) eight(16 * g + 8 * h);
        k.rows(*thresholds);
      }
    }
    b = groups16 * 16;
  }
  const int64_t groups = (blocks - b) / 8, first = b;
  Bf16Group ahead[2];
  if (groups > 0) prepare(b, ahead[0]);
  for (; b + 8 <= blocks; b += 8) {
    const float* amax_in = block_amax_in ? block_amax_in + b : nullptr;
    uint8_t *c = codes + b * kNvfp4Block / 2, *s = scales + b;
    const int64_t q = (b - first) / 8;
    if (q + 1 < groups) prepare(b + 8, ahead[(q + 1) & 1]);
    if (ahead[q & 1].ok) {
      encode_group8_bf16<kStats>(p + b * kNvfp4Block, ahead[q & 1], *thresholds, sc, c, &st);
      continue;
    }
    for (unsigned nan = group(p + b * kNvfp4Block, amax_in, c, s); nan; nan &= nan - 1)
      scalar_block(b + std::countr_zero(nan), kNvfp4Block);
  }
  if (b < blocks) {
    nvfp4_last_blocks(
        p, dtype, block_amax_in, b, blocks, codes, scales,
        [&](const unsigned char* x, const float* in, uint8_t* c, uint8_t* s) {
          const auto* xp = reinterpret_cast<const uint16_t*>(x);
          prepare_group8_bf16<kStats>(xp, in, tensor_scale, sc, *thresholds, s, ahead[0]);
          if (!ahead[0].ok) return group(x, in, c, s);
          encode_group8_bf16<kStats>(xp, ahead[0], *thresholds, sc, c, &st);
          return 0u;
        },
        [&](int64_t blk) { scalar_block(blk, kNvfp4Block); });
  }
  if (full < n) scalar_block(blocks, n - full);
  if constexpr (kStats) nvfp4_add_lane_stats(st, blocks, run);
  return run;
}

// The groups of 16 blocks of a row of n elements (n <= 8192) taking block_amax_in, prepared into
// out for encode_bf16's rows that share them; scales (the first row's) written.
template <bool kStats, bool kTileRecords, bool kLookup>
void prepare_shared_groups16(const uint16_t* p, int64_t n, float tensor_scale,
                             const float* block_amax_in, uint8_t* scales, Bf16SharedGroups& out) {
  const Nvfp4ScaleCodeThresholds& sc = nvfp4_scale_code_thresholds(tensor_scale);
  out.groups = sc.ok ? n / kNvfp4Block / 16 : 0;
  out.scales = scales;
  Bf16Thresholds& t = bf16_thresholds(tensor_scale);
  Bf16Consts16 k(sc, t);
  for (int64_t g = 0; g < out.groups; ++g)
    prepare_group16_bf16<kStats, kTileRecords, kLookup>(p + 16 * g * kNvfp4Block,
                                                        block_amax_in + 16 * g, tensor_scale, k, t,
                                                        scales + 16 * g, out.group[g]);
}

// nvfp4_encode_bf16_tile_rows at one level and statistics setting.
template <bool kStats, bool kTileRecords, bool kLookup>
MxStatsRun encode_bf16_tile_rows(const uint16_t* src, int64_t rows, int64_t n, int64_t ld,
                                 float tensor_scale, const float* tile_amax, uint8_t* codes,
                                 int64_t code_ld, uint8_t* scales, int64_t scale_ld) {
  // Rows whose statistics need their blocks' own amax, or longer than the groups hold, go one at
  // a time.
  auto row = [&](int64_t r, const Bf16SharedGroups* shared) {
    return encode_bf16<kStats, kTileRecords, kLookup>(src + r * ld, n, tensor_scale, tile_amax,
                                                      codes + r * code_ld, scales + r * scale_ld,
                                                      shared);
  };
  return nvfp4_tile_rows<Bf16SharedGroups>(
      rows, (!kStats || kTileRecords) && n <= 16 * kNvfp4Block * Bf16SharedGroups::kMaxGroups,
      [&](int64_t r) { return row(r, nullptr); },
      [&](Bf16SharedGroups& shared) {
        prepare_shared_groups16<kStats, kTileRecords, kLookup>(src, n, tensor_scale, tile_amax,
                                                               scales, shared);
      },
      [&](int64_t r, const Bf16SharedGroups& shared) { return row(r, &shared); });
}

}  // namespace

namespace avx2 {

template <bool kLookup>
MxStatsRun encode_bf16_as(const uint16_t* src, int64_t n, float tensor_scale,
                          const float* block_amax_in, bool stats, bool tile_records, uint8_t* codes,
                          uint8_t* scales) {
  if (stats && tile_records && block_amax_in)
    return encode_bf16<true, true, kLookup>(src, n, tensor_scale, block_amax_in, codes, scales);
  if (stats)
    return encode_bf16<true, false, kLookup>(src, n, tensor_scale, block_amax_in, codes, scales);
  return encode_bf16<false, false, kLookup>(src, n, tensor_scale, block_amax_in, codes, scales);
}

MxStatsRun nvfp4_encode_bf16(const uint16_t* src, int64_t n, float tensor_scale,
                             const float* block_amax_in, bool stats, bool tile_records, bool lookup,
                             uint8_t* codes, uint8_t* scales) {
  return lookup ? encode_bf16_as<true>(src, n, tensor_scale, block_amax_in, stats, tile_records,
                                       codes, scales)
                : encode_bf16_as<false>(src, n, tensor_scale, block_amax_in, stats, tile_records,
                                        codes, scales);
}

MxStatsRun nvfp4_encode_bf16_tile_rows(const uint16_t* src, int64_t rows, int64_t n, int64_t ld,
                                       float tensor_scale, const float* tile_amax, bool stats,
                                       bool tile_records, bool lookup, uint8_t* codes,
                                       int64_t code_ld, uint8_t* scales, int64_t scale_ld) {
  auto as = [&](auto kLookup) {
    return nvfp4_with_stats(stats, tile_records, [&]<bool kStats, bool kTileRecords>() {
      return encode_bf16_tile_rows<kStats, kTileRecords, kLookup()>(
          src, rows, n, ld, tensor_scale, tile_amax, codes, code_ld, scales, scale_ld);
    });
  };
  return lookup ? as(std::true_type{}) : as(std::false_type{});
}

}  // namespace avx2

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
