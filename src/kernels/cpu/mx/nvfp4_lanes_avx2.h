#pragma once
// Internal: the 8-lane helpers that the AVX2 NVFP4 casts share, the row casts
// (nvfp4_rows_avx2.cpp) and the cast of the Hadamard transform's columns
// (nvfp4_rht_columns_avx2.cpp): 8 blocks' E4M3 scale codes and factors, Philox4x32-10 on 8 lanes,
// and E2M1 codes of float32 lanes rounded to nearest or stochastically. Each carries its target
// and is always inlined, so only the AVX2 files that call it compile it.
#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "kernels/cpu/mx/philox.h"

#define NVFP4_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace mantissa::kernels::mx::nvfp4_avx2 {

using namespace scalar;
using namespace avx2_lanes;

// scalar::nvfp4_block_scale for 8 blocks at once: their E4M3 codes, and their factors.
NVFP4_AVX2 __m256i nvfp4_scale_codes(__m256 amax, float tensor_scale) {
  __m256 s =
      _mm256_div_ps(_mm256_div_ps(amax, _mm256_set1_ps(kE2m1Max)), _mm256_set1_ps(tensor_scale));
  s = _mm256_min_ps(_mm256_set1_ps(kE4m3Max), _mm256_max_ps(_mm256_set1_ps(0x1p-6f), s));
  return fp8_codes<3, 7>(s);
}
NVFP4_AVX2 __m256 nvfp4_block_scales(__m256 amax, float tensor_scale, __m256i& code) {
  code = nvfp4_scale_codes(amax, tensor_scale);
  return _mm256_div_ps(_mm256_set1_ps(1.0f / tensor_scale), e4m3_values(code));
}
NVFP4_AVX2 void nvfp4_block_scales(const float* amax, float tensor_scale, uint8_t* code,
                                   float* factor) {
  __m256i c;
  _mm256_storeu_ps(factor, nvfp4_block_scales(_mm256_loadu_ps(amax), tensor_scale, c));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(code), bytes_of(c));
}

// Philox4x32-10 on 8 lanes (kernels/cpu/mx/philox.h).
NVFP4_AVX2 void mulhilo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
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

// c[k] holds word k of 8 counters, one a lane, after kFirst rounds; on return, word k of what
// Philox makes of them. The rounds are unrolled on local copies, so the four words stay in
// registers (through memory, each round would load and store them).
template <int kFirst>
NVFP4_AVX2 void philox8(const PhiloxKeys8& keys, __m256i* c) {
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

NVFP4_AVX2 __m256i splat(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }

// A round's product of a word the same in every lane, in scalar: {high, low} 32 bits.
NVFP4_AVX2 std::pair<uint32_t, uint32_t> mulhilo(uint32_t a, uint32_t m) {
  const uint64_t p = static_cast<uint64_t>(m) * a;
  return {static_cast<uint32_t>(p >> 32), static_cast<uint32_t>(p)};
}

// philox8 of counters (c0 + lane, c1, c2, c3): words 1-3 the same in every lane, so round 0's
// product of word 2 and round 1's of word 0 are taken once, in scalar.
NVFP4_AVX2 void philox8_lanes_in_word0(const PhiloxKeys8& keys, __m256i c0, uint32_t c1,
                                       uint32_t c2, uint32_t c3, __m256i* out) {
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
NVFP4_AVX2 void philox8_lanes_in_word1(const PhiloxKeys8& keys, uint32_t c0, __m256i c1,
                                       uint32_t c2, uint32_t c3, __m256i* out) {
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
NVFP4_AVX2 void philox16(const PhiloxKeys8& keys, uint64_t offset, uint64_t row,
                         uint64_t first_block, __m256i (&out)[2][4]) {
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
NVFP4_AVX2 __m256i e2m1_codes_stochastic(__m256 v, __m256i random) {
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
NVFP4_AVX2 __m256i e2m1_magnitude_codes(__m256 y) {
  const __m256 a = _mm256_min_ps(y, _mm256_set1_ps(kE2m1Max));
  // max(field - 127, 0) by a saturating 16-bit subtract (the field is at most 129).
  const __m256i e =
      _mm256_subs_epu16(_mm256_srli_epi32(_mm256_castps_si256(a), 23), _mm256_set1_epi32(127));
  const __m256 scale = _mm256_castsi256_ps(
      _mm256_sub_epi32(_mm256_set1_epi32(128 << 23), _mm256_slli_epi32(e, 23)));  // 2^(1 - e)
  return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(a, scale)), _mm256_add_epi32(e, e));
}

// scalar::e2m1_code on 8 lanes that hold no NaN: the magnitude's code with y's sign bit.
NVFP4_AVX2 __m256i e2m1_codes_of_numbers(__m256 y) {
  return _mm256_or_si256(
      e2m1_magnitude_codes(abs8(y)),
      _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(y), 28), _mm256_set1_epi32(8)));
}

}  // namespace mantissa::kernels::mx::nvfp4_avx2

#undef NVFP4_AVX2
