#pragma once
// Internal: Philox4x32-10 (kernels/cpu/mx/philox.h) on AVX2 for the stochastic NVFP4 and
// MXFP4-SR casts: the words of 16 counters that differ in word 0 (a row's 256-column group) and
// of 8 that differ in word 1 (8 rows of the Hadamard transform's columns). Each function carries
// its target and is always inlined, so only the AVX2 files that call it compile it.
//
// The counters lie in 64-bit lanes, each word in a lane's low 32 bits: a chain of 4 counters a
// vector, the even counters of 8 in one chain and the odd ones in another. vpmuludq takes the
// low halves and gives the whole product, whose low half is the product's low word in place and
// whose high word one shift brings down, so a round is, per product, one multiply, one shift and
// two XORs. The upper halves carry whatever is left there (vpmuludq reads no upper half, and no
// XOR or shift carries an upper half into a low one); only the last round packs the two chains'
// low halves into 8 lanes. Against 32-bit lanes (a vpmulld for the low words and two vpmuludq
// and a blend for the high ones) this takes two multiplies of three, no blend, and its four
// chains of 16 counters hide the multiplies' latency; Zen 4 issues multiplies and shifts on
// two pipes each.
#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "kernels/cpu/mx/philox.h"

#define PHILOX_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace mantissa::kernels::mx::philox_avx2 {

// The ten rounds' keys of `seed`, each word in every lane and as a scalar (one stream's keys,
// made once).
struct PhiloxKeys8 {
  __m256i k[10][2];
  uint32_t s[10][2];
  __attribute__((target("avx2,fma,f16c"))) explicit PhiloxKeys8(uint64_t seed) {
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

inline constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;

PHILOX_AVX2 __m256i splat(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }

// A round's product of a word the same in every counter, in scalar: {high, low} 32 bits.
PHILOX_AVX2 std::pair<uint32_t, uint32_t> mulhilo(uint32_t a, uint32_t m) {
  const uint64_t p = static_cast<uint64_t>(m) * a;
  return {static_cast<uint32_t>(p >> 32), static_cast<uint32_t>(p)};
}

// 8 lanes from two chains: lane 2j the low half of even's 64-bit lane j, lane 2j + 1 odd's
// (pack_low), or their high halves (pack_high).
PHILOX_AVX2 __m256i pack_low(__m256i even, __m256i odd) {
  return _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}
PHILOX_AVX2 __m256i pack_high(__m256i even, __m256i odd) {
  return _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Rounds kFirst..9 of kChains chains (pairs of even and odd counters) whose words after round
// kFirst - 1 are w[k][chain]; out[p][k] gets word k of chain pair p's 8 counters in lane order.
template <int kFirst, int kChains>
PHILOX_AVX2 void rounds(const PhiloxKeys8& keys, __m256i (&w)[4][kChains], __m256i (*out)[4]) {
  const __m256i m0 = splat(kPhiloxMul0), m1 = splat(kPhiloxMul1);
#pragma GCC unroll 8
  for (int round = kFirst; round < 9; ++round) {
#pragma GCC unroll 4
    for (int q = 0; q < kChains; ++q) {
      const __m256i p0 = _mm256_mul_epu32(w[0][q], m0), p1 = _mm256_mul_epu32(w[2][q], m1);
      w[0][q] =
          _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), w[1][q]), keys.k[round][0]);
      w[1][q] = p1;
      w[2][q] =
          _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), w[3][q]), keys.k[round][1]);
      w[3][q] = p0;
    }
  }
  // Round 9, its words packed as they are made.
#pragma GCC unroll 2
  for (int e = 0; e < kChains; e += 2) {
    const int o = e + 1;
    const __m256i p0e = _mm256_mul_epu32(w[0][e], m0), p1e = _mm256_mul_epu32(w[2][e], m1);
    const __m256i p0o = _mm256_mul_epu32(w[0][o], m0), p1o = _mm256_mul_epu32(w[2][o], m1);
    __m256i* r = out[e / 2];
    r[0] = _mm256_xor_si256(_mm256_xor_si256(pack_high(p1e, p1o), pack_low(w[1][e], w[1][o])),
                            keys.k[9][0]);
    r[1] = pack_low(p1e, p1o);
    r[2] = _mm256_xor_si256(_mm256_xor_si256(pack_high(p0e, p0o), pack_low(w[3][e], w[3][o])),
                            keys.k[9][1]);
    r[3] = pack_low(p0e, p0o);
  }
}

// The 16 counter blocks first_block.. of `row` (philox.h, sr_counter): out[h][k] holds word k of
// blocks first_block + 8h + lane. Only word 0 differs between them, so round 0's product of
// word 2 and round 1's of word 0 are taken once, in scalar.
PHILOX_AVX2 void philox16(const PhiloxKeys8& keys, uint64_t offset, uint64_t row,
                          uint64_t first_block, __m256i (&out)[2][4]) {
  const PhiloxCounter c = sr_counter(first_block, row, offset);
  const auto [h2, l2] = mulhilo(c[2], kPhiloxMul1);
  const uint32_t u0 = h2 ^ c[1] ^ keys.s[0][0], u1 = l2;
  const auto [h0, l0] = mulhilo(u0, kPhiloxMul0);
  const __m256i m0 = splat(kPhiloxMul0), m1 = splat(kPhiloxMul1);
  __m256i w[4][4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    // Chain q: blocks first_block + f + 2j, j = 0..3 (word 0 wraps as a 32-bit word).
    const int f = 8 * (q >> 1) + (q & 1);
    const __m256i c0 =
        _mm256_add_epi32(splat(c[0]), _mm256_setr_epi32(f, 0, f + 2, 0, f + 4, 0, f + 6, 0));
    // Round 0: (hi(c2) ^ c1 ^ k, lo(c2), hi(c0) ^ c3 ^ k, lo(c0)), the first two uniform.
    const __m256i p0 = _mm256_mul_epu32(c0, m0);
    const __m256i v2 = _mm256_xor_si256(_mm256_srli_epi64(p0, 32), splat(c[3] ^ keys.s[0][1]));
    // Round 1: word 0's product uniform.
    const __m256i p1 = _mm256_mul_epu32(v2, m1);
    w[0][q] = _mm256_xor_si256(_mm256_srli_epi64(p1, 32), splat(u1 ^ keys.s[1][0]));
    w[1][q] = p1;
    w[2][q] = _mm256_xor_si256(p0, splat(h0 ^ keys.s[1][1]));
    w[3][q] = splat(l0);
  }
  rounds<2>(keys, w, out);
}

// Philox of counters (c0, c1 + lane, c2, c3) for 8 lanes (c1: the lanes' word 1): out[k] holds
// word k. Round 0 is uniform, and so are round 1's product of word 2 and round 2's of word 0,
// all taken once, in scalar.
PHILOX_AVX2 void philox8_lanes_in_word1(const PhiloxKeys8& keys, uint32_t c0, __m256i c1,
                                        uint32_t c2, uint32_t c3, __m256i (&out)[4]) {
  const __m256i m0 = splat(kPhiloxMul0), m1 = splat(kPhiloxMul1);
  // Round 0: only word 0 of the result varies (by c1).
  const auto [h0, l0] = mulhilo(c0, kPhiloxMul0);
  const auto [h2, l2] = mulhilo(c2, kPhiloxMul1);
  const uint32_t u1 = l2, u2 = h0 ^ c3 ^ keys.s[0][1], u3 = l0;
  // Round 1: words 0 and 1 of the result uniform.
  const auto [g2, k2] = mulhilo(u2, kPhiloxMul1);
  const uint32_t w0 = g2 ^ u1 ^ keys.s[1][0], w1 = k2;
  // Round 2: word 0's product uniform.
  const auto [g0, k0] = mulhilo(w0, kPhiloxMul0);
  __m256i w[4][2];
  // Chain 0: the even lanes (c1's even words, in the low halves already); chain 1: the odd ones.
  const __m256i v0s[2] = {c1, _mm256_srli_epi64(c1, 32)};
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q) {
    const __m256i v0 = _mm256_xor_si256(splat(h2 ^ keys.s[0][0]), v0s[q]);
    const __m256i p0 = _mm256_mul_epu32(v0, m0);
    const __m256i x2 = _mm256_xor_si256(_mm256_srli_epi64(p0, 32), splat(u3 ^ keys.s[1][1]));
    const __m256i p1 = _mm256_mul_epu32(x2, m1);
    w[0][q] = _mm256_xor_si256(_mm256_srli_epi64(p1, 32), splat(w1 ^ keys.s[2][0]));
    w[1][q] = p1;
    w[2][q] = _mm256_xor_si256(p0, splat(g0 ^ keys.s[2][1]));
    w[3][q] = splat(k0);
  }
  __m256i(*packed)[4] = &out;
  rounds<3>(keys, w, packed);
}

// The random words of a row's stochastic rounding (philox.h, sr_byte): the 16 counter blocks
// of two 256-column groups, an even one and an odd one, each made again only when a column of
// another group of its parity is needed. A run of up to 256 columns lies in at most two groups,
// one of each parity: need(offset, row, first, last) makes both before the run (a holder serves one
// row and offset), and words(col) gives
// col's group's, w[h][k] word k of blocks 8h + lane.
struct SrWords8 {
  PhiloxKeys8 keys;
  int64_t group[2] = {-1, -1};
  __m256i w[2][2][4];
  __attribute__((target("avx2,fma,f16c"))) explicit SrWords8(uint64_t seed) : keys(seed) {}
  PHILOX_AVX2 void need(uint64_t offset, uint64_t row, int64_t first_col, int64_t last_col) {
    if (group[(first_col >> 8) & 1] != first_col >> 8) make(offset, row, first_col >> 8);
    if (group[(last_col >> 8) & 1] != last_col >> 8) make(offset, row, last_col >> 8);
  }
  PHILOX_AVX2 const __m256i (&words(int64_t col) const)[2][4] { return w[(col >> 8) & 1]; }
  __attribute__((target("avx2,fma,f16c"), noinline)) void make(uint64_t offset, uint64_t row,
                                                               int64_t g) {
    group[g & 1] = g;
    philox16(keys, offset, row, sr_group_block(static_cast<uint64_t>(g) << 8), w[g & 1]);
  }
};

}  // namespace mantissa::kernels::mx::philox_avx2

#undef PHILOX_AVX2
