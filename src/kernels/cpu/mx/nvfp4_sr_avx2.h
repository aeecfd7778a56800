#pragma once
// Internal: the AVX2 body of the stochastic NVFP4 row cast for a group of 8 blocks that starts at
// column 0 or 128 of its 256-column group and whose factors are all finite: every block's word and
// byte of the group's random words (philox.h's sr_byte) is known when compiled, so the bytes come
// out by immediate shifts (byte 0 by a mask only, byte 3 by a shift only); the codes are clamped to
// 7 after the packs (e2m1_stochastic_sums); a bfloat16 block is widened from its magnitudes in
// 16-bit lanes, its signs and zeros taken from the packed bfloat16; the statistics are counted
// from compare masks by popcount in general registers, off the vector pipes. Other groups take
// encode_prepared8 (nvfp4_rows_avx2.h). Included by nvfp4_rows_avx2.cpp only.
#include <immintrin.h>

#include <bit>
#include <cstdint>

#include "kernels/cpu/mx/nvfp4_rows_avx2.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

// Byte `byte` (0-3) of each lane of `words` (0-255). The callers' loops are unrolled, so `byte` is
// a constant and the shift an immediate (byte 0 a mask only, byte 3 a shift only), where
// random_bytes (nvfp4_lanes_avx2.h) shifts by a register.
[[gnu::always_inline]] inline __m256i random_byte(__m256i words, int byte,
                                                  const StochasticCodeConstants8& k) {
  if (byte == 3) return _mm256_srli_epi32(words, 24);
  return _mm256_and_si256(byte == 0 ? words : _mm256_srli_epi32(words, 8 * byte), k.byte);
}

// e2m1_magnitude_codes_stochastic (nvfp4_lanes_avx2.h) before its shift and without its clamp to
// 6: t + random, with t = max(min(a, 2) * 512 truncated, (bits(a) - bits(0.5)) >> 14) of
// a = `magnitude` (no NaN, up to infinity: t at most 66048). For a <= 6 this is the clamped t;
// above, t exceeds 1792, so that (t + random) >> 8 is at least 7, the clamped code, and
// store_e2m1_sr_blocks2's min(.., 7) after the packs is the clamp.
[[gnu::always_inline]] inline __m256i e2m1_stochastic_sums(__m256 magnitude, __m256i random,
                                                           const StochasticCodeConstants8& k) {
  const __m256i below2 =
      _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_min_ps(magnitude, k.two), k.to_256ths));
  const __m256i from2 =
      _mm256_srai_epi32(_mm256_sub_epi32(_mm256_castps_si256(magnitude), k.half), 14);
  return _mm256_add_epi32(_mm256_max_epi32(below2, from2), random);
}

// Two blocks' codes (bytes, packed in 128-bit lanes) paired (even + 16 * odd) and packed to bytes
// in each lane (the low 8 bytes of each lane).
[[gnu::always_inline]] inline __m256i e2m1_sr_pair_bytes(__m256i coded) {
  const __m256i pairs = _mm256_maddubs_epi16(coded, _mm256_set1_epi16(0x1001));
  return _mm256_packus_epi16(pairs, pairs);
}

// store_e2m1_blocks2 (nvfp4_rows_avx2.h) of two blocks from their sums s0..s3
// (e2m1_stochastic_sums) and products y0..y3 (no NaN): the codes are the sums >> 8 clamped to 7,
// taken after the first pack (its unsigned saturation at 65535 keeps every code above 7 at 255
// or more) by one shift per two vectors and one min; the signs come from the products' bits
// packed as the codes are (a signed pack keeps a lane's sign), put in for the two blocks at once
// in place of a shift, a mask and an OR per vector. Returns the number of magnitude codes 0.
[[gnu::always_inline]] inline unsigned store_e2m1_sr_blocks2(uint8_t* dst, const __m256i (&s)[4],
                                                             const __m256 (&y)[4]) {
  const __m256i b =
      _mm256_min_epu8(_mm256_packus_epi16(_mm256_srli_epi16(_mm256_packus_epi32(s[0], s[1]), 8),
                                          _mm256_srli_epi16(_mm256_packus_epi32(s[2], s[3]), 8)),
                      _mm256_set1_epi8(7));
  const __m256i signs =
      _mm256_packs_epi16(_mm256_packs_epi32(_mm256_castps_si256(y[0]), _mm256_castps_si256(y[1])),
                         _mm256_packs_epi32(_mm256_castps_si256(y[2]), _mm256_castps_si256(y[3])));
  const __m256i zero = _mm256_setzero_si256();
  const __m256i coded =
      _mm256_or_si256(b, _mm256_and_si256(_mm256_cmpgt_epi8(zero, signs), _mm256_set1_epi8(8)));
  const __m256i p = e2m1_sr_pair_bytes(coded);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm_unpacklo_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
  return static_cast<unsigned>(
      std::popcount(static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, zero)))));
}

// store_e2m1_sr_blocks2 for two bfloat16 blocks whose vectors hold |x| * factor of elements 0-3
// and 8-11 (s[2i]) and 4-7 and 12-15 (s[2i + 1]) of block i (the unpacks of encode_sr_aligned8):
// the first pack puts each block's sums in order, so that the pack to bytes holds in each 128-bit
// lane 8 elements of block 0, then of block 1, as the signed packs of the bfloat16 (`raw`) and of
// their magnitudes (`m`) do; those give the signs and the elements x = 0, counted into `zeros`.
// Returns the number of magnitude codes 0.
[[gnu::always_inline]] inline unsigned store_e2m1_sr_bf16_blocks2(uint8_t* dst,
                                                                  const __m256i (&s)[4],
                                                                  const __m256i (&raw)[2],
                                                                  const __m256i (&m)[2],
                                                                  unsigned& zeros) {
  const __m256i b =
      _mm256_min_epu8(_mm256_packus_epi16(_mm256_srli_epi16(_mm256_packus_epi32(s[0], s[1]), 8),
                                          _mm256_srli_epi16(_mm256_packus_epi32(s[2], s[3]), 8)),
                      _mm256_set1_epi8(7));
  const __m256i zero = _mm256_setzero_si256();
  const __m256i negative = _mm256_cmpgt_epi8(zero, _mm256_packs_epi16(raw[0], raw[1]));
  zeros += static_cast<unsigned>(std::popcount(static_cast<uint32_t>(
      _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_packs_epi16(m[0], m[1]), zero)))));
  const __m256i coded = _mm256_or_si256(b, _mm256_and_si256(negative, _mm256_set1_epi8(8)));
  // 16-bit unit 8L + 4i + j: pair 4L + j of block i; the bytes' 32-bit runs put in block order.
  const __m256i p = e2m1_sr_pair_bytes(coded);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm_unpacklo_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
  return static_cast<unsigned>(
      std::popcount(static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(b, zero)))));
}

// The codes of a prepared group g (g.to_scalar 0) whose first block is block kFirst (0 or 8) of
// its 256-column group, whose words are `words` (SrWords8::words): block kFirst + b reads byte
// (kFirst + b) / 4 of word (kFirst + b) % 4, half h of the block from words[h]. With kStats:
// saturated |y| > 6 (compared as integer bits, which order the magnitudes), and flushed (code
// magnitude 0 from x != 0) as the codes of magnitude 0 less the elements x = 0 (whose codes are 0
// whatever the byte).
template <bool kStats, DType::Id kSrc, int kFirst>
[[gnu::always_inline]] inline void encode_sr_aligned8(const void* src, const FloatGroup& g,
                                                      const __m256i (&words)[2][4], uint8_t* codes,
                                                      Nvfp4LaneStats8* st) {
  const DType dtype{kSrc};
  const StochasticCodeConstants8 k;
  unsigned saturated = 0, zero_codes = 0, zeros = 0;
  if constexpr (kSrc == DType::Id::bf16) {
    // A block's magnitudes in 16-bit lanes (one AND), as float32 by two unpacks with zero: lanes
    // of elements 0-3 and 8-11, then 4-7 and 12-15; the group's words put in that order once.
    __m256i w[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      w[i][0] = _mm256_permute2x128_si256(words[0][i], words[1][i], 0x20);
      w[i][1] = _mm256_permute2x128_si256(words[0][i], words[1][i], 0x31);
    }
    const __m256i zero = _mm256_setzero_si256(), magnitude = _mm256_set1_epi16(0x7FFF);
#pragma GCC unroll 4
    for (int b0 = 0; b0 < 8; b0 += 2) {
      __m256i sum[4], raw[2], m[2];
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        const int b = b0 + i;
        raw[i] = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(src) + 16 * b));
        m[i] = _mm256_and_si256(raw[i], magnitude);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256 x = _mm256_castsi256_ps(h == 0 ? _mm256_unpacklo_epi16(zero, m[i])
                                                      : _mm256_unpackhi_epi16(zero, m[i]));
          const __m256 a = _mm256_mul_ps(x, _mm256_set1_ps(g.f[b]));
          sum[2 * i + h] =
              e2m1_stochastic_sums(a, random_byte(w[(kFirst + b) % 4][h], (kFirst + b) / 4, k), k);
          if constexpr (kStats)
            saturated += static_cast<unsigned>(
                std::popcount(static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(
                    _mm256_cmpgt_epi32(_mm256_castps_si256(a), _mm256_castps_si256(k.six)))))));
        }
      }
      zero_codes += store_e2m1_sr_bf16_blocks2(codes + 8 * b0, sum, raw, m, zeros);
    }
  } else {
#pragma GCC unroll 4
    for (int b0 = 0; b0 < 8; b0 += 2) {
      __m256i c[4];
      __m256 y4[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const int b = b0 + j / 2, h = j % 2;
        const __m256 x = load8(src, dtype, 16 * b + 8 * h);
        const __m256 y = _mm256_mul_ps(x, _mm256_set1_ps(g.f[b]));
        y4[j] = y;
        const __m256 ay = _mm256_and_ps(y, _mm256_castsi256_ps(k.magnitude));
        const __m256i word = words[h][(kFirst + b) % 4];
        const __m256i random = random_byte(word, (kFirst + b) / 4, k);
        c[j] = e2m1_stochastic_sums(ay, random, k);
        if constexpr (kStats) {
          saturated += static_cast<unsigned>(
              std::popcount(static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(
                  _mm256_cmpgt_epi32(_mm256_castps_si256(ay), _mm256_castps_si256(k.six)))))));
          zeros += static_cast<unsigned>(std::popcount(static_cast<uint32_t>(
              _mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ)))));
        }
      }
      zero_codes += store_e2m1_sr_blocks2(codes + 8 * b0, c, y4);
    }
  }
  if constexpr (kStats) {
    st->saturated = _mm256_add_epi32(
        st->saturated, _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(saturated))));
    st->flushed = _mm256_add_epi32(
        st->flushed,
        _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(zero_codes - zeros))));
    const __m256 own = _mm256_castsi256_ps(g.own);
    st->best = _mm256_max_ps(own, st->best);
    st->peak = _mm256_max_ps(_mm256_mul_ps(own, g.factor), st->peak);
  }
}

// The codes of a prepared group g (prepare_group8) with stochastic rounding: by
// encode_sr_aligned8 where the group starts at column 0 or 128 of a 256-column group and its
// factors are finite, else by encode_prepared8. Returns the blocks the scalar body casts.
template <bool kStats, DType::Id kSrc>
[[gnu::always_inline]] inline unsigned encode_sr_prepared8(const void* src, const FloatGroup& g,
                                                           SrWords8* sr, uint64_t offset,
                                                           uint64_t row, int64_t col,
                                                           uint8_t* codes, Nvfp4LaneStats8* st) {
  if ((col & 127) == 0 && g.to_scalar == 0) {
    sr->need(offset, row, col, col);
    if ((col & 255) == 0)
      encode_sr_aligned8<kStats, kSrc, 0>(src, g, sr->words(col), codes, st);
    else
      encode_sr_aligned8<kStats, kSrc, 8>(src, g, sr->words(col), codes, st);
    return 0;
  }
  return encode_prepared8<true, kStats, kSrc>(src, g, sr, offset, row, col, codes, st);
}

// encode_group8 with stochastic rounding: the group's amax, scales and factors, then its codes
// (encode_sr_prepared8). Returns the blocks the scalar body casts.
template <bool kStats, DType::Id kSrc>
inline unsigned encode_sr_group8(const void* src, const float* block_amax_in, float tensor_scale,
                                 const Nvfp4ScaleCodeThresholds& sc, SrWords8* sr, uint64_t offset,
                                 uint64_t row, int64_t col, uint8_t* codes, uint8_t* scales,
                                 Nvfp4LaneStats8* st) {
  FloatGroup g;
  prepare_group8<kSrc>(src, block_amax_in, tensor_scale, sc, scales, g);
  return encode_sr_prepared8<kStats, kSrc>(src, g, sr, offset, row, col, codes, st);
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
