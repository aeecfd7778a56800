// AVX2 (+FMA, F16C) bodies of the NVFP4 casts and of MXFP4 with stochastic rounding, 8 lanes at
// a time: one NVFP4 block is two vectors. The per-tensor amax pass; the 1x16 cast (8 blocks'
// amax, E4M3 scales and factors as one vector, then each block's codes, rounded to nearest or
// stochastically, with the statistics counted from the vectors when asked; a bfloat16 source
// rounded to nearest by 16-bit compares against per-scale thresholds); Philox4x32-10 on 8
// lanes; the cast of the Hadamard transform's columns from the registers that transform them.
// Blocks whose factor is NaN or infinite, and a row's short last block, run the scalar body
// (mx_cast.cpp).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "kernels/cpu/mx/hadamard_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"
#include "kernels/cpu/mx/philox.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// scalar::nvfp4_block_scale for 8 blocks at once: their E4M3 codes, and their factors.
inline __m256i nvfp4_scale_codes(__m256 amax, float tensor_scale) {
  __m256 s =
      _mm256_div_ps(_mm256_div_ps(amax, _mm256_set1_ps(kE2m1Max)), _mm256_set1_ps(tensor_scale));
  s = _mm256_min_ps(_mm256_set1_ps(kE4m3Max), _mm256_max_ps(_mm256_set1_ps(0x1p-6f), s));
  return fp8_codes<3, 7>(s);
}
inline __m256 nvfp4_block_scales(__m256 amax, float tensor_scale, __m256i& code) {
  code = nvfp4_scale_codes(amax, tensor_scale);
  return _mm256_div_ps(_mm256_set1_ps(1.0f / tensor_scale), e4m3_values(code));
}
inline void nvfp4_block_scales(const float* amax, float tensor_scale, uint8_t* code,
                               float* factor) {
  __m256i c;
  _mm256_storeu_ps(factor, nvfp4_block_scales(_mm256_loadu_ps(amax), tensor_scale, c));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(code), bytes_of(c));
}

// Philox4x32-10 on 8 lanes (kernels/cpu/mx/philox.h).
inline void mulhilo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  lo = _mm256_mullo_epi32(a, m);
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, m), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(even, odd, 0xAA);
}

// The ten rounds' keys of `seed`, each word in every lane and as a scalar (one stream's keys,
// made once).
struct PhiloxKeys8 {
  __m256i k[10][2];
  uint32_t s[10][2];
  explicit PhiloxKeys8(uint64_t seed) {
    PhiloxKey key = sr_key(seed);
    for (int round = 0; round < 10; ++round) {
      s[round][0] = key[0];
      s[round][1] = key[1];
      k[round][0] = _mm256_set1_epi32(static_cast<int>(key[0]));
      k[round][1] = _mm256_set1_epi32(static_cast<int>(key[1]));
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
  }
};

constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;

// c[k] holds word k of 8 counters, one a lane, after kFirst rounds; on return, word k of what
// Philox makes of them. The rounds are unrolled on local copies, so the four words stay in
// registers (through memory, each round would load and store them).
template <int kFirst>
inline void philox8(const PhiloxKeys8& keys, __m256i* c) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kPhiloxMul0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(kPhiloxMul1));
  __m256i w0 = c[0], w1 = c[1], w2 = c[2], w3 = c[3];
#pragma GCC unroll 10
  for (int round = kFirst; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulhilo(w0, m0, hi0, lo0);
    mulhilo(w2, m1, hi1, lo1);
    w0 = _mm256_xor_si256(_mm256_xor_si256(hi1, w1), keys.k[round][0]);
    w1 = lo1;
    w2 = _mm256_xor_si256(_mm256_xor_si256(hi0, w3), keys.k[round][1]);
    w3 = lo0;
  }
  c[0] = w0;
  c[1] = w1;
  c[2] = w2;
  c[3] = w3;
}

inline __m256i splat(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }

// A round's product of a word the same in every lane, in scalar: {high, low} 32 bits.
inline std::pair<uint32_t, uint32_t> mulhilo(uint32_t a, uint32_t m) {
  const uint64_t p = static_cast<uint64_t>(m) * a;
  return {static_cast<uint32_t>(p >> 32), static_cast<uint32_t>(p)};
}

// philox8 of counters (c0 + lane, c1, c2, c3): words 1-3 the same in every lane, so round 0's
// product of word 2 and round 1's of word 0 are taken once, in scalar.
inline void philox8_lanes_in_word0(const PhiloxKeys8& keys, __m256i c0, uint32_t c1, uint32_t c2,
                                   uint32_t c3, __m256i* out) {
  const __m256i m0 = splat(kPhiloxMul0), m1 = splat(kPhiloxMul1);
  __m256i hi, lo;
  // Round 0: (hi(c2) ^ c1 ^ k, lo(c2), hi(c0) ^ c3 ^ k, lo(c0)), the first two uniform.
  const auto [h2, l2] = mulhilo(c2, kPhiloxMul1);
  mulhilo(c0, m0, hi, lo);
  const uint32_t u0 = h2 ^ c1 ^ keys.s[0][0], u1 = l2;
  const __m256i v2 = _mm256_xor_si256(hi, splat(c3 ^ keys.s[0][1])), v3 = lo;
  // Round 1: word 0's product uniform.
  const auto [h0, l0] = mulhilo(u0, kPhiloxMul0);
  mulhilo(v2, m1, hi, lo);
  out[0] = _mm256_xor_si256(hi, splat(u1 ^ keys.s[1][0]));
  out[1] = lo;
  out[2] = _mm256_xor_si256(splat(h0 ^ keys.s[1][1]), v3);
  out[3] = splat(l0);
  philox8<2>(keys, out);
}

// philox8 of counters (c0, c1 + lane, c2, c3): round 0 is uniform, and so are round 1's product
// of word 2 and round 2's of word 0, all taken once, in scalar.
inline void philox8_lanes_in_word1(const PhiloxKeys8& keys, uint32_t c0, __m256i c1, uint32_t c2,
                                   uint32_t c3, __m256i* out) {
  const __m256i m0 = splat(kPhiloxMul0), m1 = splat(kPhiloxMul1);
  __m256i hi, lo;
  // Round 0: only word 0 of the result varies (by c1).
  const auto [h0, l0] = mulhilo(c0, kPhiloxMul0);
  const auto [h2, l2] = mulhilo(c2, kPhiloxMul1);
  const __m256i v0 = _mm256_xor_si256(splat(h2 ^ keys.s[0][0]), c1);
  const uint32_t u1 = l2, u2 = h0 ^ c3 ^ keys.s[0][1], u3 = l0;
  // Round 1: words 0 and 1 of the result uniform.
  mulhilo(v0, m0, hi, lo);
  const auto [g2, k2] = mulhilo(u2, kPhiloxMul1);
  const uint32_t w0 = g2 ^ u1 ^ keys.s[1][0], w1 = k2;
  const __m256i x2 = _mm256_xor_si256(hi, splat(u3 ^ keys.s[1][1])), x3 = lo;
  // Round 2: word 0's product uniform.
  const auto [g0, k0] = mulhilo(w0, kPhiloxMul0);
  mulhilo(x2, m1, hi, lo);
  out[0] = _mm256_xor_si256(hi, splat(w1 ^ keys.s[2][0]));
  out[1] = lo;
  out[2] = _mm256_xor_si256(splat(g0 ^ keys.s[2][1]), x3);
  out[3] = splat(k0);
  philox8<3>(keys, out);
}

// The 16 counter blocks first_block.. of `row` (philox.h, sr_counter): out[h][k] holds word k of
// blocks first_block + 8h + lane.
inline void philox16(const PhiloxKeys8& keys, uint64_t offset, uint64_t row, uint64_t first_block,
                     __m256i (&out)[2][4]) {
  const PhiloxCounter base = sr_counter(first_block, row, offset);
  for (int h = 0; h < 2; ++h)
    philox8_lanes_in_word0(
        keys, _mm256_add_epi32(splat(base[0] + 8 * h), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
        base[1], base[2], base[3], out[h]);
}

// scalar::e2m1_code_stochastic on 8 lanes, in integers on the bits of a = min(|v|, 6) where the
// grid allows. From 1 up the grid's step is the unit of a's mantissa bit 22: lo is a with the
// 22 bits below cleared, its code (a >> 22) - 252, and frac * 2^24 those 22 bits times 4. In
// [0.5, 1) lo is 0.5 (code 1) and frac * 2^24 is a's 23-bit mantissa times 2. Both are
// (a << 10 or 9) >> 8, whole numbers, so `random >> 8 < frac * 2^24` is an integer compare.
// Below 0.5, lo is 0 and frac * 2^24 = a * 2^25 (exact), compared in float as the scalar code
// does. Rounding up adds one to the code. NaN lanes take e2m1_codes' answer.
inline __m256i e2m1_codes_stochastic(__m256 v, __m256i random) {
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256i sign =
      _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 28), _mm256_set1_epi32(8));
  const __m256 af = _mm256_min_ps(abs8(v), _mm256_set1_ps(kE2m1Max));
  const __m256i a = _mm256_castps_si256(af);
  const __m256i u = _mm256_srli_epi32(random, 8);
  const __m256i from1 = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x3F7FFFFF));
  const __m256i below_half = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3F000000), a);
  const __m256i frac24 =
      _mm256_srli_epi32(_mm256_sllv_epi32(a, _mm256_sub_epi32(_mm256_set1_epi32(9), from1)), 8);
  const __m256i up_grid = _mm256_cmpgt_epi32(frac24, u);
  const __m256i up_small = _mm256_castps_si256(
      _mm256_cmp_ps(_mm256_cvtepi32_ps(u), _mm256_mul_ps(af, _mm256_set1_ps(0x1p25f)), _CMP_LT_OQ));
  const __m256i up = _mm256_blendv_epi8(up_grid, up_small, below_half);  // -1 where rounding up
  const __m256i lo_code = _mm256_andnot_si256(
      below_half, _mm256_blendv_epi8(
                      _mm256_set1_epi32(1),
                      _mm256_sub_epi32(_mm256_srli_epi32(a, 22), _mm256_set1_epi32(252)), from1));
  const __m256i code = _mm256_or_si256(_mm256_sub_epi32(lo_code, up), sign);
  if (_mm256_movemask_ps(nan) == 0) return code;
  return _mm256_blendv_epi8(code, e2m1_codes(v), _mm256_castps_si256(nan));
}

// scalar::e2m1_code's magnitude bits (0-7) on 8 lanes y >= 0 that hold no NaN, by the FPU's
// rounding: with a = min(y, 6) and e = max(exponent(a), 0) (0, 1 or 2), a * 2^(1 - e) rounded to
// the nearest integer, ties to even, is n in 0..4 (e = 0: the grid 0, 0.5, .. 2 in halves) or 2..4
// (e = 1: 2, 3, 4) or 2..3 (e = 2: 4, 6 in twos), and the code n + 2e. A tie between two codes goes
// to the even integer, which is the even code, as E2M1's round to nearest even does.
inline __m256i e2m1_magnitude_codes(__m256 y) {
  const __m256 a = _mm256_min_ps(y, _mm256_set1_ps(kE2m1Max));
  // max(field - 127, 0) by a saturating 16-bit subtract (the field is at most 129).
  const __m256i e =
      _mm256_subs_epu16(_mm256_srli_epi32(_mm256_castps_si256(a), 23), _mm256_set1_epi32(127));
  const __m256 scale = _mm256_castsi256_ps(
      _mm256_sub_epi32(_mm256_set1_epi32(128 << 23), _mm256_slli_epi32(e, 23)));  // 2^(1 - e)
  return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(a, scale)), _mm256_add_epi32(e, e));
}

// scalar::e2m1_code on 8 lanes that hold no NaN: the magnitude's code with y's sign bit.
inline __m256i e2m1_codes_of_numbers(__m256 y) {
  return _mm256_or_si256(
      e2m1_magnitude_codes(abs8(y)),
      _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(y), 28), _mm256_set1_epi32(8)));
}

// Round to nearest of a bfloat16 source by compares of the magnitude bits. The factor of an
// E4M3 scale code c is f = (1 / tensor scale) / value(c), so under one tensor scale a block's
// codes are a function of c and of |x|'s 15 bits: e2m1_code(|x| * f) (the float32 product, as the
// scalar body rounds it) never falls as |x| grows, so the code is the number of thresholds
// T1 <= .. <= T7 that |x|'s bits reach, T_i the least bits whose code is i or more, and
// |x * f| > 6 (the saturated count) holds from a threshold T8 on. Each row holds T_i - 1 in 16
// lanes, the right side of a signed 16-bit compare (T_i is 1 to 0x7F80: 0 gives code 0, infinity
// code 7). The rows are made per thread as the cast meets the codes, for one tensor scale at a
// time; a code whose factor is 0, infinite or NaN gets no row (its group takes the float path).
struct Bf16Thresholds {
  alignas(32) int16_t row[128][8][16];
  float factor[128];
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
    factor[c] = f;
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
    return true;
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
    return true;
  }
};

// This thread's rows, for tensor_scale.
inline Bf16Thresholds& bf16_thresholds(float tensor_scale) {
  thread_local std::unique_ptr<Bf16Thresholds> table;
  if (!table) table = std::make_unique<Bf16Thresholds>();
  if (table->tensor_scale_bits != bits_of(tensor_scale) || table->lo > table->hi) {
    table->tensor_scale_bits = bits_of(tensor_scale);
    table->lo = 1;
    table->hi = 0;
  }
  return *table;
}

// One block's 16 codes in 16-bit lanes in element order, from its row: the thresholds its
// magnitudes reach (each compare is -1 where reached), and x's sign bit. With kStats it counts
// the saturated elements and the flushed ones (nonzero magnitudes under T1) in 16-bit lanes
// (negative: the sums of -1 masks).
template <bool kStats>
inline __m256i bf16_threshold_codes(const uint16_t* p, const int16_t (*row)[16], __m256i& saturated,
                                    __m256i& flushed) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i m = _mm256_and_si256(v, _mm256_set1_epi16(0x7FFF));
  __m256i r[8];
#pragma GCC unroll 8
  for (int i = 0; i < (kStats ? 8 : 7); ++i)
    r[i] = _mm256_cmpgt_epi16(m, _mm256_load_si256(reinterpret_cast<const __m256i*>(row[i])));
  const __m256i sum =
      _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(r[0], r[1]), _mm256_add_epi16(r[2], r[3])),
                       _mm256_add_epi16(_mm256_add_epi16(r[4], r[5]), r[6]));
  if constexpr (kStats) {
    saturated = _mm256_add_epi16(saturated, r[7]);
    flushed = _mm256_add_epi16(
        flushed, _mm256_sub_epi16(_mm256_cmpgt_epi16(m, _mm256_setzero_si256()), r[0]));
  }
  return _mm256_sub_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 12), _mm256_set1_epi16(8)), sum);
}

// Four blocks' codes in 16-bit lanes in element order as 32 bytes, the even element in the low
// nibble.
inline void store_e2m1_blocks4_16(uint8_t* dst, __m256i a, __m256i b, __m256i c, __m256i d) {
  // Per 128-bit half h: 16-bit units even + 16 * odd of a's pairs 4h..4h+3, then b's (c's, d's).
  const __m256i ab = _mm256_maddubs_epi16(_mm256_packus_epi16(a, b), _mm256_set1_epi16(0x1001));
  const __m256i cd = _mm256_maddubs_epi16(_mm256_packus_epi16(c, d), _mm256_set1_epi16(0x1001));
  // Dwords: a's pairs 0-3, b's, c's, d's, then a's pairs 4-7, b's, c's, d's.
  const __m256i p = _mm256_packus_epi16(ab, cd);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// The codes of two blocks (c0, c1: the first's elements 0-7 and 8-15; c2, c3: the second's),
// each at most 15, as 16 bytes, the even element in the low nibble.
inline void store_e2m1_blocks2(uint8_t* dst, __m256i c0, __m256i c1, __m256i c2, __m256i c3) {
  // Per 128-bit half h: bytes c0[4h..4h+3], c1[4h..], c2[4h..], c3[4h..].
  const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
  // even + 16 * odd: per half, the pairs (2h, 2h + 1) of c0, c1, c2, c3 as 16-bit units.
  const __m256i pairs = _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x1001));
  const __m256i p = _mm256_packus_epi16(pairs, pairs);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm_unpacklo_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
}

// A segment's statistics from its vector blocks: saturated and flushed elements counted in
// lanes (a compare mask is -1 where true, so subtracting it counts), and the largest block amax
// and amax * factor as lane maxima.
struct Nvfp4LaneStats8 {
  __m256i saturated;
  __m256i flushed;
  __m256 best;
  __m256 peak;

  static Nvfp4LaneStats8 zero() {
    return {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_set1_ps(-1.0f),
            _mm256_setzero_ps()};
  }
};

// 8 blocks' amax: block_amax_in's where the caller has them, else their own maxima of the magnitude
// bits (own), a NaN's bits (above infinity's) made the quiet NaN.
__attribute__((always_inline)) inline __m256 group_amax(__m256i own, const float* block_amax_in) {
  if (block_amax_in) return _mm256_loadu_ps(block_amax_in);
  return _mm256_castsi256_ps(
      _mm256_blendv_epi8(own, _mm256_set1_epi32(static_cast<int>(kQuietNan)),
                         _mm256_cmpgt_epi32(own, _mm256_set1_epi32(0x7F800000))));
}

// A group of 8 blocks' own amax bits, factors and the blocks the scalar body casts (factor NaN
// or infinite, where x = 0 makes x * factor NaN), taken before their codes (prepare_group8), so
// that a loop can take the next group's while it codes one.
struct FloatGroup {
  __m256i own;  // a NaN's bits above infinity's
  __m256 factor;
  __m256 scalar_lanes;
  unsigned to_scalar;
  alignas(32) float f[8];
};

// encode_group8's first half: the 8 blocks' amax (block_amax_in's 8, or their own by integer
// maxima of the magnitude bits), their scales (written) and factors.
template <DType::Id kSrc>
[[gnu::always_inline]] inline void prepare_group8(const void* src, const float* block_amax_in,
                                                  float tensor_scale, uint8_t* scales,
                                                  FloatGroup& g) {
  __m256i m[8];
  if constexpr (kSrc == DType::Id::bf16) {
    const auto* p = static_cast<const uint16_t*>(src);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      m[k] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                              _mm256_set1_epi16(0x7FFF));
    g.own = transposed_max8_16(m);
  } else {
    const auto* p = static_cast<const float*>(src);
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      m[k] = _mm256_max_epi32(
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                           magnitude),
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k + 8)),
                           magnitude));
    g.own = transposed_max8(m);
  }
  const __m256 amax = group_amax(g.own, block_amax_in);
  __m256i scale_codes;
  g.factor = nvfp4_block_scales(amax, tensor_scale, scale_codes);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(scales), bytes_of(scale_codes));
  // A factor that is NaN or infinite (where x = 0 makes x * factor NaN) is the scalar body's.
  g.scalar_lanes =
      _mm256_cmp_ps(g.factor, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_NLT_UQ);
  g.to_scalar = static_cast<unsigned>(_mm256_movemask_ps(g.scalar_lanes));
  _mm256_store_ps(g.f, g.factor);
}

// encode_group8's second half, from its prepared group g.
template <bool kSr, bool kStats, DType::Id kSrc>
[[gnu::always_inline]] inline unsigned encode_prepared8(const void* src, const FloatGroup& g,
                                                        const PhiloxKeys8* keys, uint64_t offset,
                                                        uint64_t row, int64_t col, uint8_t* codes,
                                                        Nvfp4LaneStats8* st) {
  const DType dtype{kSrc};
  // Block k reads word (d + k) % 4 of 64-column group (d + k) / 4 from col's, lanes 0-7 and
  // 8-15 of its 16 counter blocks: a third group where col is not a multiple of 64.
  const int d = static_cast<int>((col >> 4) & 3);
  __m256i words[3][2][4];
  if constexpr (kSr) {
    for (int g = 0; g < (d ? 3 : 2); ++g)
      philox16(*keys, offset, row, 16 * static_cast<uint64_t>((col >> 6) + g), words[g]);
  }
  const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(kE2m1Max);
#pragma GCC unroll 4
  for (int k = 0; k < 8; k += 2) {
    __m256i c[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int blk = k + j / 2, h = j % 2;
      const __m256 x = load8(src, dtype, 16 * blk + 8 * h);
      const __m256 y = _mm256_mul_ps(x, _mm256_set1_ps(g.f[blk]));
      if constexpr (kSr) {
        c[j] = e2m1_codes_stochastic(y, words[(d + blk) >> 2][h][(d + blk) & 3]);
      } else {
        c[j] = e2m1_codes_of_numbers(y);
      }
      if constexpr (kStats) {
        if (!((g.to_scalar >> blk) & 1)) {
          st->saturated = _mm256_sub_epi32(
              st->saturated, _mm256_castps_si256(_mm256_cmp_ps(abs8(y), six, _CMP_GT_OQ)));
          const __m256i zero_code = _mm256_cmpeq_epi32(_mm256_and_si256(c[j], _mm256_set1_epi32(7)),
                                                       _mm256_setzero_si256());
          const __m256 nonzero = _mm256_cmp_ps(x, zero, _CMP_NEQ_OQ);
          st->flushed = _mm256_sub_epi32(st->flushed,
                                         _mm256_and_si256(zero_code, _mm256_castps_si256(nonzero)));
        }
      }
    }
    store_e2m1_blocks2(codes + 8 * k, c[0], c[1], c[2], c[3]);
  }
  if constexpr (kStats) {
    // The blocks' own amax with NaN passed over is a number where the factor is finite (a
    // block holding a NaN has a NaN factor); the other lanes count 0.
    const __m256 own_f = _mm256_andnot_ps(g.scalar_lanes, _mm256_castsi256_ps(g.own));
    st->best = _mm256_max_ps(own_f, st->best);
    st->peak =
        _mm256_max_ps(_mm256_mul_ps(own_f, _mm256_andnot_ps(g.scalar_lanes, g.factor)), st->peak);
  }
  return g.to_scalar;
}

// 8 blocks of 16 elements from src (128 elements, all inside the segment): their amax
// (block_amax_in's 8, or their own by integer maxima of the magnitude bits), scales and factors
// as vectors, then each block's codes, rounded to nearest or (kSr) stochastically with the
// words of the 64-column groups from column `col` (a multiple of 16; philox.h's sr_word), two
// blocks' codes stored at once. Returns the blocks whose factor is NaN or infinite (their codes
// and scales are left for the scalar body, and they are not counted).
template <bool kSr, bool kStats, DType::Id kSrc>
inline unsigned encode_group8(const void* src, const float* block_amax_in, float tensor_scale,
                              const PhiloxKeys8* keys, uint64_t offset, uint64_t row, int64_t col,
                              uint8_t* codes, uint8_t* scales, Nvfp4LaneStats8* st) {
  FloatGroup g;
  prepare_group8<kSrc>(src, block_amax_in, tensor_scale, scales, g);
  return encode_prepared8<kSr, kStats, kSrc>(src, g, keys, offset, row, col, codes, st);
}

// A group of 8 bfloat16 blocks made ready for encode_group8_bf16 (prepare_group8_bf16): their
// own amax bits, E4M3 scale codes and the byte offsets of their rows in Bf16Thresholds::row (a
// row is 256 bytes); ok is false where a block's scale code has no row (a factor that is 0,
// infinite or NaN).
struct Bf16Group {
  __m256i own;
  __m256i code;
  alignas(32) int32_t offset[8];
  bool ok;
};

// encode_group8's amax and scale codes of 8 bfloat16 blocks from p, their scales written and
// their rows in t made where missing; nothing is written where g.ok comes back false.
__attribute__((always_inline)) inline void prepare_group8_bf16(const uint16_t* p,
                                                               const float* block_amax_in,
                                                               float tensor_scale,
                                                               Bf16Thresholds& t, uint8_t* scales,
                                                               Bf16Group& g) {
  __m256i m[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    m[k] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                            _mm256_set1_epi16(0x7FFF));
  g.own = transposed_max8_16(m);
  const __m256 amax = group_amax(g.own, block_amax_in);
  g.code = nvfp4_scale_codes(amax, tensor_scale);
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

// encode_group8 of a bfloat16 source rounded to nearest, from its prepared group g (g.ok): each
// block's codes by compares against its row of t, and with kStats its counts and records.
template <bool kStats>
__attribute__((always_inline)) inline void encode_group8_bf16(const uint16_t* p, const Bf16Group& g,
                                                              const Bf16Thresholds& t,
                                                              uint8_t* codes, Nvfp4LaneStats8* st) {
  const char* rows = reinterpret_cast<const char*>(t.row);
  __m256i saturated = _mm256_setzero_si256(), flushed = saturated, c[4];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    c[k % 4] = bf16_threshold_codes<kStats>(
        p + 16 * k, reinterpret_cast<const int16_t(*)[16]>(rows + g.offset[k]), saturated, flushed);
    if (k % 4 == 3) store_e2m1_blocks4_16(codes + 8 * (k - 3), c[0], c[1], c[2], c[3]);
  }
  if constexpr (kStats) {
    const __m256i ones = _mm256_set1_epi16(1);
    st->saturated = _mm256_sub_epi32(st->saturated, _mm256_madd_epi16(saturated, ones));
    st->flushed = _mm256_sub_epi32(st->flushed, _mm256_madd_epi16(flushed, ones));
    const __m256 own_f = _mm256_castsi256_ps(g.own);
    st->best = _mm256_max_ps(own_f, st->best);
    st->peak =
        _mm256_max_ps(_mm256_mul_ps(own_f, _mm256_i32gather_ps(t.factor, g.code, 4)), st->peak);
  }
}

// The NVFP4 cast of a segment, 8 blocks at a time (encode_group8); the segment's last blocks
// that make no group of 8 are cast from a zero-padded copy and their bytes copied out. With
// kStats it returns nvfp4_run_stats's counts of the segment, taken from the vectors the cast
// holds: a block's amax with NaN passed over, |x * factor| > 6, and codes whose magnitude bits
// are 0 from x != 0 (not NaN). Blocks whose factor is NaN or infinite, and a row's short last
// block, run the scalar body and are counted by nvfp4_run_stats. A bfloat16 source rounded to
// nearest takes encode_group8_bf16 where its rows allow.
template <bool kSr, bool kStats, DType::Id kSrc>
MxStatsRun nvfp4_encode_as(const void* src, int64_t n, float tensor_scale,
                           const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                           int64_t first_col, uint8_t* codes, uint8_t* scales) {
  const DType dtype{kSrc};
  const int64_t blocks = n / kNvfp4Block, full = blocks * kNvfp4Block;
  std::optional<PhiloxKeys8> keys;
  if constexpr (kSr) keys.emplace(seed);
  Nvfp4LaneStats8 st = Nvfp4LaneStats8::zero();
  MxStatsRun run;
  auto scalar_block = [&](int64_t b, int64_t len) {
    const int64_t i = b * kNvfp4Block;
    const float* in = block_amax_in ? block_amax_in + b : nullptr;
    if constexpr (kSr) {
      kScalarKernels.nvfp4_encode_sr(at(src, dtype, i), dtype, len, tensor_scale, in, seed, offset,
                                     row, first_col + i, codes + i / 2, scales + b);
    } else {
      kScalarKernels.nvfp4_encode(at(src, dtype, i), dtype, len, tensor_scale, in, codes + i / 2,
                                  scales + b);
    }
    if constexpr (kStats)
      run.append(
          nvfp4_run_stats(at(src, dtype, i), dtype, len, tensor_scale, codes + i / 2, scales + b));
  };
  auto group = [&](const void* x, const float* amax_in, int64_t b, uint8_t* c, uint8_t* s) {
    return encode_group8<kSr, kStats, kSrc>(x, amax_in, tensor_scale, keys ? &*keys : nullptr,
                                            offset, static_cast<uint64_t>(row),
                                            first_col + b * kNvfp4Block, c, s, &st);
  };
  // A bfloat16 source rounded to nearest: each group by the thresholds' rows where they serve,
  // its amax and scale codes taken a group ahead, so that their latency (a reduction, two
  // divisions, the E4M3 encode) hides behind the blocks before.
  constexpr bool kThresholds = kSrc == DType::Id::bf16 && !kSr;
  Bf16Thresholds* thresholds = kThresholds ? &bf16_thresholds(tensor_scale) : nullptr;
  const auto* p = static_cast<const uint16_t*>(src);
  auto prepare = [&](int64_t b, Bf16Group & g) __attribute__((always_inline)) {
    if constexpr (kThresholds)
      prepare_group8_bf16(p + b * kNvfp4Block, block_amax_in ? block_amax_in + b : nullptr,
                          tensor_scale, *thresholds, scales + b, g);
  };
  // A float32 source rounded to nearest: each group's amax and factors taken a group ahead too.
  constexpr bool kFloatAhead = kSrc == DType::Id::f32 && !kSr;
  auto prepare_float = [&](int64_t b, FloatGroup & g) __attribute__((always_inline)) {
    prepare_group8<kSrc>(at(src, dtype, b * kNvfp4Block),
                         block_amax_in ? block_amax_in + b : nullptr, tensor_scale, scales + b, g);
  };
  int64_t b = 0;
  const int64_t groups = blocks / 8;
  Bf16Group ahead[2];
  FloatGroup float_ahead[2];
  if (kThresholds && groups > 0) prepare(0, ahead[0]);
  if (kFloatAhead && groups > 0) prepare_float(0, float_ahead[0]);
  for (; b + 8 <= blocks; b += 8) {
    const void* x = at(src, dtype, b * kNvfp4Block);
    const float* amax_in = block_amax_in ? block_amax_in + b : nullptr;
    uint8_t *c = codes + b * kNvfp4Block / 2, *s = scales + b;
    const int64_t q = b / 8;
    if constexpr (kThresholds) {
      if (q + 1 < groups) prepare(b + 8, ahead[(q + 1) & 1]);
      if (ahead[q & 1].ok) {
        encode_group8_bf16<kStats>(p + b * kNvfp4Block, ahead[q & 1], *thresholds, c, &st);
        continue;
      }
    }
    unsigned nan;
    if constexpr (kFloatAhead) {
      if (q + 1 < groups) prepare_float(b + 8, float_ahead[(q + 1) & 1]);
      nan = encode_prepared8<kSr, kStats, kSrc>(x, float_ahead[q & 1], nullptr, 0, 0, 0, c, &st);
    } else {
      nan = group(x, amax_in, b, c, s);
    }
    for (; nan; nan &= nan - 1) scalar_block(b + std::countr_zero(nan), kNvfp4Block);
  }
  if (b < blocks) {
    // The last 1-7 whole blocks, zero-padded to 8 (the padding's codes are dropped).
    const int count = static_cast<int>(blocks - b);
    alignas(32) unsigned char x[8 * kNvfp4Block * sizeof(float)] = {};
    alignas(32) float amax_in[8] = {};
    std::memcpy(x, at(src, dtype, b * kNvfp4Block), count * kNvfp4Block * dtype.itemsize());
    if (block_amax_in) std::copy(block_amax_in + b, block_amax_in + blocks, amax_in);
    uint8_t c[8 * kNvfp4Block / 2], s[8];
    const float* in = block_amax_in ? amax_in : nullptr;
    unsigned nan = 0;
    if constexpr (kThresholds) {
      const auto* xp = reinterpret_cast<const uint16_t*>(x);
      prepare_group8_bf16(xp, in, tensor_scale, *thresholds, s, ahead[0]);
      if (ahead[0].ok)
        encode_group8_bf16<kStats>(xp, ahead[0], *thresholds, c, &st);
      else
        nan = group(x, in, b, c, s);
    } else {
      nan = group(x, in, b, c, s);
    }
    std::memcpy(codes + b * kNvfp4Block / 2, c, count * kNvfp4Block / 2);
    std::memcpy(scales + b, s, count);
    for (nan &= (1u << count) - 1; nan; nan &= nan - 1)
      scalar_block(b + std::countr_zero(nan), kNvfp4Block);
  }
  if (full < n) scalar_block(blocks, n - full);
  if constexpr (kStats) {
    if (blocks > 0) {
      run.best = std::max(run.best, hmax(st.best));
      // max of amax * factor / 6 over the blocks is their max over 6 (division is monotonic).
      run.peak = std::max(run.peak, static_cast<double>(hmax(st.peak)) / kE2m1Max);
    }
    alignas(32) int32_t lanes[2][8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[0]), st.saturated);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[1]), st.flushed);
    for (int k = 0; k < 8; ++k) {
      run.saturated += lanes[0][k];
      run.flushed += lanes[1][k];
    }
  }
  return run;
}

template <bool kSr, bool kStats>
MxStatsRun nvfp4_encode_body(const void* src, DType dtype, int64_t n, float tensor_scale,
                             const float* block_amax_in, uint64_t seed, uint64_t offset,
                             int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  if (dtype == kFloat32)
    return nvfp4_encode_as<kSr, kStats, DType::Id::f32>(src, n, tensor_scale, block_amax_in, seed,
                                                        offset, row, first_col, codes, scales);
  return nvfp4_encode_as<kSr, kStats, DType::Id::bf16>(src, n, tensor_scale, block_amax_in, seed,
                                                       offset, row, first_col, codes, scales);
}

// The codes of 8 blocks held across registers (lane k of y[i]: element i of block k) as each
// block's 8 bytes, the even element in the low nibble: block k's at dst[k * stride].
inline void store_e2m1_columns(const __m256i* c, uint8_t* dst, int64_t stride) {
  __m256i p[8];
  for (int j = 0; j < 8; ++j) p[j] = _mm256_or_si256(c[2 * j], _mm256_slli_epi32(c[2 * j + 1], 4));
  // Per 128-bit half h: byte 4j + k' is pair j of block 4h + k' (pairs 0-3, then 4-7).
  const __m256i lo =
      _mm256_packus_epi16(_mm256_packus_epi32(p[0], p[1]), _mm256_packus_epi32(p[2], p[3]));
  const __m256i hi =
      _mm256_packus_epi16(_mm256_packus_epi32(p[4], p[5]), _mm256_packus_epi32(p[6], p[7]));
  // 4x4 byte transposes: dword k' becomes block 4h + k''s four pairs.
  const __m256i order = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4,
                                         8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i a = _mm256_shuffle_epi8(lo, order), b = _mm256_shuffle_epi8(hi, order);
  const __m256i q01 = _mm256_unpacklo_epi32(a, b);  // per half: blocks 4h, 4h + 1
  const __m256i q23 = _mm256_unpackhi_epi32(a, b);  // per half: blocks 4h + 2, 4h + 3
  const __m128i r[4] = {_mm256_castsi256_si128(q01), _mm256_castsi256_si128(q23),
                        _mm256_extracti128_si256(q01, 1), _mm256_extracti128_si256(q23, 1)};
  for (int t = 0; t < 4; ++t) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * t) * stride), r[t]);
    _mm_storeh_pd(reinterpret_cast<double*>(dst + (2 * t + 1) * stride), _mm_castsi128_pd(r[t]));
  }
}

}  // namespace

namespace avx2 {

// mxfp4_sr.h's cast on 8 lanes: each 1x32 block's E8M0 floor scale, then the stochastic rounding
// of x * 2^-e * 3/4 with the column's Philox word (n and first_col multiples of 32 and 64).
void mxfp4_encode_sr(const void* src, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                     int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  const PhiloxKeys8 keys(seed);
  const __m256 prescale = _mm256_set1_ps(kMxfp4SrPrescale), zero = _mm256_setzero_ps();
  __m256i words[2][4];  // lanes 0-7 and 8-15 of the column group's 16 counter blocks
  for (int64_t i = 0; i < n; i += kMxBlock) {
    const int64_t col = first_col + i;
    if ((col & 63) == 0)
      philox16(keys, offset, static_cast<uint64_t>(row), 16 * static_cast<uint64_t>(col >> 6),
               words);
    __m256 x[4], m = zero;
    bool nan = false;
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      x[q] = load8(src, dtype, i + 8 * q);
      nan |= any_nan(x[q]);
      m = _mm256_max_ps(abs8(x[q]), m);
    }
    const uint8_t s = nan ? kE8m0Nan : e8m0_floor(hmax(m), element_limits(Element::kE2m1).max_pow2);
    scales[i / kMxBlock] = s;
    const __m256 r = _mm256_set1_ps(floor_reciprocal(s));
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const int64_t c = col + 8 * q;  // column 64 g + 16 k + l: word k of lane l's counter
      store_e2m1(codes + i / 2 + 4 * q,
                 e2m1_codes_stochastic(_mm256_mul_ps(_mm256_mul_ps(x[q], r), prescale),
                                       words[(c >> 3) & 1][(c >> 4) & 3]));
    }
  }
}

void nvfp4_encode(const void* src, DType dtype, int64_t n, float tensor_scale,
                  const float* block_amax_in, uint8_t* codes, uint8_t* scales) {
  nvfp4_encode_body<false, false>(src, dtype, n, tensor_scale, block_amax_in, 0, 0, 0, 0, codes,
                                  scales);
}

void nvfp4_encode_sr(const void* src, DType dtype, int64_t n, float tensor_scale,
                     const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                     int64_t first_col, uint8_t* codes, uint8_t* scales) {
  nvfp4_encode_body<true, false>(src, dtype, n, tensor_scale, block_amax_in, seed, offset, row,
                                 first_col, codes, scales);
}

MxStatsRun nvfp4_encode_stats(const void* src, DType dtype, int64_t n, float tensor_scale,
                              const float* block_amax_in, bool stochastic, uint64_t seed,
                              uint64_t offset, int64_t row, int64_t first_col, uint8_t* codes,
                              uint8_t* scales) {
  if (stochastic)
    return nvfp4_encode_body<true, true>(src, dtype, n, tensor_scale, block_amax_in, seed, offset,
                                         row, first_col, codes, scales);
  return nvfp4_encode_body<false, true>(src, dtype, n, tensor_scale, block_amax_in, 0, 0, 0, 0,
                                        codes, scales);
}

void nvfp4_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, float tensor_scale,
                  float* out) {
  const int64_t full = n / kNvfp4Block * kNvfp4Block;
  for (int64_t i = 0; i < full; i += kNvfp4Block) {
    const __m256 s = _mm256_set1_ps(tensor_scale * e4m3_value(scales[i / kNvfp4Block]));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(e2m1_values(codes + i / 2), s));
    _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(e2m1_values(codes + i / 2 + 4), s));
  }
  if (full < n)
    kScalarKernels.nvfp4_decode(codes + full / 2, scales + full / kNvfp4Block, n - full,
                                tensor_scale, out + full);
}

// max |x| by integer maxima of the magnitude bits, 16 bfloat16 or 8 float32 lanes a vector (a
// NaN's bits lie above infinity's).
float amax(const void* src, DType dtype, int64_t n) {
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  int64_t full;
  uint32_t bits;
  if (dtype == kBFloat16) {
    const auto* p = static_cast<const uint16_t*>(src);
    const __m256i magnitude = _mm256_set1_epi16(0x7FFF);
    full = n / 32 * 32;
    for (int64_t i = 0; i < full; i += 32) {
      m0 = _mm256_max_epu16(
          m0,
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), magnitude));
      m1 = _mm256_max_epu16(
          m1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 16)),
                               magnitude));
    }
    const __m256i h = _mm256_max_epu16(m0, m1);
    __m128i q = _mm_max_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    // The largest of 8 16-bit lanes: the smallest of their complements.
    q = _mm_minpos_epu16(_mm_xor_si128(q, _mm_set1_epi16(-1)));
    bits = static_cast<uint32_t>(~_mm_extract_epi16(q, 0) & 0xFFFF) << 16;
  } else {
    const auto* p = static_cast<const float*>(src);
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
    full = n / 16 * 16;
    for (int64_t i = 0; i < full; i += 16) {
      m0 = _mm256_max_epu32(
          m0,
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), magnitude));
      m1 = _mm256_max_epu32(
          m1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)),
                               magnitude));
    }
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_max_epu32(m0, m1));
    bits = *std::max_element(lanes, lanes + 8);
  }
  if (bits > 0x7F800000u) return float_of(kQuietNan);
  const float vec = float_of(bits);
  const float tail = kScalarKernels.amax(at(src, dtype, full), dtype, n - full);
  return tail != tail ? tail : (tail > vec ? tail : vec);
}

}  // namespace avx2

void nvfp4_rht_columns_avx2(const void* src, DType dtype, int64_t cols, int64_t c0, int64_t m_begin,
                            int64_t m_end, const Nvfp4Encoding& e, uint8_t* codes, int64_t code_row,
                            uint8_t* scales, int64_t scale_row) {
  const bool sr = e.rounding == Fp4Rounding::kStochastic;
  const float ts = e.tensor_scale;
  std::optional<PhiloxKeys8> keys;
  if (sr) keys.emplace(e.seed);
  const PhiloxCounter base = sr_counter(0, static_cast<uint64_t>(c0), e.offset);
  const __m256i rows_of_lanes = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base[1])),
                                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i words[kRhtSize][4];  // element i's word q of the 64-column group, lane: the row
  int64_t group = -1;
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  for (int64_t m0 = m_begin; m0 < m_end; m0 += kRhtSize) {
    __m256 v[kRhtSize];
    rht_avx2::butterflies8(src, dtype, cols, m0, c0, v);
    __m256i bits = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int64_t i = 0; i < kRhtSize; ++i) {
      v[i] = _mm256_mul_ps(v[i], _mm256_set1_ps(0.25f));
      bits = _mm256_max_epu32(bits, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
    }
    const __m256i nan = _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(0x7F800000));
    const __m256 amax = _mm256_castsi256_ps(
        _mm256_blendv_epi8(bits, _mm256_set1_epi32(static_cast<int>(kQuietNan)), nan));
    __m256i scale_codes;
    const __m256 factor = nvfp4_block_scales(amax, ts, scale_codes);
    uint8_t* cp = codes + c0 * code_row + m0 / 2;
    uint8_t* sp = scales + c0 * scale_row + m0 / kNvfp4Block;
    if (_mm256_movemask_ps(_mm256_cmp_ps(
            factor, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_NLT_UQ)) != 0) {
      // A NaN or infinite factor (x = 0 makes x * factor NaN): the blocks from the transform's
      // rows, by the scalar body.
      rht_avx2::transpose8(v);
      rht_avx2::transpose8(v + 8);
      alignas(32) float rows[8][kRhtSize];
      for (int k = 0; k < 8; ++k) {
        _mm256_store_ps(rows[k], v[k]);
        _mm256_store_ps(rows[k] + 8, v[8 + k]);
        if (sr) {
          kScalarKernels.nvfp4_encode_sr(rows[k], kFloat32, kRhtSize, ts, nullptr, e.seed, e.offset,
                                         c0 + k, m0, cp + k * code_row, sp + k * scale_row);
        } else {
          kScalarKernels.nvfp4_encode(rows[k], kFloat32, kRhtSize, ts, nullptr, cp + k * code_row,
                                      sp + k * scale_row);
        }
      }
      continue;
    }
    alignas(16) uint8_t sb[16];
    _mm_storel_epi64(reinterpret_cast<__m128i*>(sb), bytes_of(scale_codes));
    for (int k = 0; k < 8; ++k) sp[k * scale_row] = sb[k];
    __m256i c[kRhtSize];
    if (sr) {
      if (m0 >> 6 != group) {
        // Element i of every block of the group reads counter block 16 * group + i.
        group = m0 >> 6;
        for (int64_t i = 0; i < kRhtSize; ++i)
          philox8_lanes_in_word1(*keys, static_cast<uint32_t>(16 * group + i), rows_of_lanes,
                                 base[2], base[3], words[i]);
      }
      const int q = static_cast<int>((m0 >> 4) & 3);
#pragma GCC unroll 16
      for (int64_t i = 0; i < kRhtSize; ++i)
        c[i] = e2m1_codes_stochastic(_mm256_mul_ps(v[i], factor), words[i][q]);
    } else {
#pragma GCC unroll 16
      for (int64_t i = 0; i < kRhtSize; ++i)
        c[i] = e2m1_codes_of_numbers(_mm256_mul_ps(v[i], factor));
    }
    store_e2m1_columns(c, cp, code_row);
  }
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
