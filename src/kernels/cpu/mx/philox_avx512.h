#pragma once
// Internal: Philox4x32-10 (kernels/cpu/mx/philox.h) on AVX-512 (F, BW, VL) for the stochastic
// NVFP4 and MXFP4-SR casts: the words of 16 counters that differ in word 0 (a row's 256-column
// group, philox.h's sr_byte). Each function carries its target and is always inlined, so only the
// AVX-512 files that call it compile it.
//
// As in philox_avx2.h, the counters lie in 64-bit lanes, each word in a lane's low 32 bits, the
// 8 even counters in one chain and the 8 odd ones in another: a round is, per product, one
// vpmuludq (both words of the product), one shift (its high word down) and one ternary-logic
// XOR of three, with no shuffle; the upper halves carry whatever is left there, which nothing
// reads. The last round's words are packed into 16 lanes by one masked shuffle each (its high
// words by one masked shuffle too, in place of two shifts). Two chains hide the multiplies'
// latency.
#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "kernels/cpu/mx/philox.h"

#define PHILOX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline

namespace mantissa::kernels::mx::philox_avx512 {

// The ten rounds' keys of one stream.
struct PhiloxKeys16 {
  uint32_t k[10][2];
  explicit PhiloxKeys16(uint64_t seed) {
    PhiloxKey key = sr_key(seed);
    for (int round = 0; round < 10; ++round) {
      k[round][0] = key[0];
      k[round][1] = key[1];
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
  }
};

inline constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;

PHILOX_AVX512 __m512i splat16(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }

// A round's product of a word the same in every counter, in scalar: {high, low} 32 bits.
PHILOX_AVX512 std::pair<uint32_t, uint32_t> mulhilo(uint32_t a, uint32_t m) {
  const uint64_t p = static_cast<uint64_t>(m) * a;
  return {static_cast<uint32_t>(p >> 32), static_cast<uint32_t>(p)};
}

// 16 lanes from two chains: lane 2j the low half of even's 64-bit lane j, lane 2j + 1 odd's
// (pack_low), or their high halves (pack_high).
PHILOX_AVX512 __m512i pack_low(__m512i even, __m512i odd) {
  return _mm512_mask_shuffle_epi32(even, 0xAAAA, odd, _MM_PERM_CCAA);
}
PHILOX_AVX512 __m512i pack_high(__m512i even, __m512i odd) {
  return _mm512_mask_shuffle_epi32(odd, 0x5555, even, _MM_PERM_DDBB);
}

// Counter blocks first_block + lane of `row` (philox.h, sr_counter): out[k] holds word k of
// every lane. Only word 0 of the counters differs between lanes, so round 0's product of word
// 2 and round 1's of word 0 are taken once, in scalar.
PHILOX_AVX512 void philox16(const PhiloxKeys16& keys, uint64_t offset, uint64_t row,
                            uint64_t first_block, __m512i* out) {
  const PhiloxCounter c = sr_counter(first_block, row, offset);
  const __m512i m0 = splat16(kPhiloxMul0), m1 = splat16(kPhiloxMul1);
  const auto [h2, l2] = mulhilo(c[2], kPhiloxMul1);
  const uint32_t u0 = h2 ^ c[1] ^ keys.k[0][0], u1 = l2;
  const auto [h0, l0] = mulhilo(u0, kPhiloxMul0);
  __m512i w[4][2];
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q) {
    // Chain q: blocks first_block + q + 2j (word 0 wraps as a 32-bit word).
    const __m512i c0 = _mm512_add_epi32(
        splat16(c[0]), _mm512_setr_epi64(q, q + 2, q + 4, q + 6, q + 8, q + 10, q + 12, q + 14));
    // Round 0: (hi(c2) ^ c1 ^ k, lo(c2), hi(c0) ^ c3 ^ k, lo(c0)), the first two uniform.
    const __m512i p0 = _mm512_mul_epu32(c0, m0);
    const __m512i v2 = _mm512_xor_si512(_mm512_srli_epi64(p0, 32), splat16(c[3] ^ keys.k[0][1]));
    // Round 1: word 0's product uniform.
    const __m512i p1 = _mm512_mul_epu32(v2, m1);
    w[0][q] = _mm512_xor_si512(_mm512_srli_epi64(p1, 32), splat16(u1 ^ keys.k[1][0]));
    w[1][q] = p1;
    w[2][q] = _mm512_xor_si512(p0, splat16(h0 ^ keys.k[1][1]));
    w[3][q] = splat16(l0);
  }
#pragma GCC unroll 7
  for (int round = 2; round < 9; ++round) {
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      const __m512i p0 = _mm512_mul_epu32(w[0][q], m0), p1 = _mm512_mul_epu32(w[2][q], m1);
      w[0][q] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p1, 32), w[1][q],
                                          splat16(keys.k[round][0]), 0x96);  // a ^ b ^ c
      w[1][q] = p1;
      w[2][q] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p0, 32), w[3][q],
                                          splat16(keys.k[round][1]), 0x96);
      w[3][q] = p0;
    }
  }
  // Round 9, its words packed as they are made.
  const __m512i p0e = _mm512_mul_epu32(w[0][0], m0), p1e = _mm512_mul_epu32(w[2][0], m1);
  const __m512i p0o = _mm512_mul_epu32(w[0][1], m0), p1o = _mm512_mul_epu32(w[2][1], m1);
  out[0] = _mm512_ternarylogic_epi32(pack_high(p1e, p1o), pack_low(w[1][0], w[1][1]),
                                     splat16(keys.k[9][0]), 0x96);
  out[1] = pack_low(p1e, p1o);
  out[2] = _mm512_ternarylogic_epi32(pack_high(p0e, p0o), pack_low(w[3][0], w[3][1]),
                                     splat16(keys.k[9][1]), 0x96);
  out[3] = pack_low(p0e, p0o);
}

// The random words of a row's stochastic rounding (philox.h, sr_byte): the 16 counter blocks
// of two 256-column groups, an even one and an odd one, each made again only when a column of
// another group of its parity is needed. A run of up to 256 columns lies in at most two groups,
// one of each parity: need(offset, row, first, last) makes both before the run (a holder serves one
// row and offset), and words(col) gives
// col's group's, w[k] word k of blocks lane.
struct SrWords16 {
  PhiloxKeys16 keys;
  int64_t group[2] = {-1, -1};
  __m512i w[2][4];
  explicit SrWords16(uint64_t seed) : keys(seed) {}
  PHILOX_AVX512 void need(uint64_t offset, uint64_t row, int64_t first_col, int64_t last_col) {
    if (group[(first_col >> 8) & 1] != first_col >> 8) make(offset, row, first_col >> 8);
    if (group[(last_col >> 8) & 1] != last_col >> 8) make(offset, row, last_col >> 8);
  }
  PHILOX_AVX512 const __m512i (&words(int64_t col) const)[4] { return w[(col >> 8) & 1]; }
  __attribute__((target("avx512f,avx512bw,avx512vl"), noinline)) void make(uint64_t offset,
                                                                           uint64_t row,
                                                                           int64_t g) {
    group[g & 1] = g;
    philox16(keys, offset, row, sr_group_block(static_cast<uint64_t>(g) << 8), w[g & 1]);
  }
};

}  // namespace mantissa::kernels::mx::philox_avx512

#undef PHILOX_AVX512
