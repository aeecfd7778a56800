#pragma once
// Internal: the AVX-512 body of the stochastic NVFP4 row cast for a group of 16 blocks whose first
// column is a multiple of 256 and whose factors are all finite (encode_sr_aligned16): every
// block's word and byte of the group's random words (philox.h's sr_byte) is known when compiled.
// Other groups take encode_prepared16. Included by nvfp4_cast_avx512.cpp only, after its
// FloatGroup16 and Nvfp4LaneStats, inside its `#pragma GCC target`.

namespace mantissa::kernels::mx::detail {
namespace {

// A 32-bit value in all 16 lanes, as data: SrAlignedConstants16 reads its splats by plain loads,
// where a set1 of a constant is made from a general register each group (a move and a broadcast,
// which takes a shift/shuffle pipe).
struct alignas(64) Splat16 {
  uint32_t v[16];
};
constexpr Splat16 splat16_of(uint32_t x) {
  Splat16 s{};
  for (uint32_t& e : s.v) e = x;
  return s;
}
inline constexpr Splat16 kSrAlignedSplats[] = {splat16_of(0x7FFF7FFF), splat16_of(0x7FFFFFFF),
                                               splat16_of(0xFF << 14), splat16_of(0xFF000000),
                                               splat16_of(0x08080808), splat16_of(0x10011001)};

// encode_sr_aligned16's constants, made once per group behind an empty asm (as
// StochasticCodeConstants16's).
struct SrAlignedConstants16 {
  __m512i magnitude;   // the sign bits cleared: of float32 lanes, or of bfloat16 pairs
  __m512i byte_field;  // 0xFF << 14: a random byte's place
  __m512i bias;        // 0xFF000000 (encode_sr_aligned16)
  __m512i widen[2];    // vpermw: bfloat16 i (of the first 16, of the second) to dword i's high half
  __m512i high_words;  // vpermt2w: the high halves of two vectors' dwords, in order
  __m512i order;       // two quads' packed code bytes in block order (encode_sr_aligned16)
  __m512i eight, pair;
  __m512 six, half;
  explicit SrAlignedConstants16(bool bf16)
      : six(_mm512_set1_ps(kE2m1Max)), half(_mm512_set1_ps(0.5f)) {
    // The table's address hidden, so that its splats are loaded as they lie.
    const Splat16* t = kSrAlignedSplats;
    asm("" : "+r"(t));
    magnitude = _mm512_load_si512(t[bf16 ? 0 : 1].v);
    byte_field = _mm512_load_si512(t[2].v);
    bias = _mm512_load_si512(t[3].v);
    eight = _mm512_load_si512(t[4].v);  // 8 in every byte
    pair = _mm512_load_si512(t[5].v);   // 0x1001 in every 16-bit unit
    alignas(64) int16_t w[2][32], h[32], o[32];
    alignas(64) int32_t d[16];
    for (int i = 0; i < 32; ++i) {
      w[0][i] = static_cast<int16_t>(i / 2);
      w[1][i] = static_cast<int16_t>(16 + i / 2);
      h[i] = static_cast<int16_t>(i < 16 ? 2 * i + 1 : 32 + 2 * (i - 16) + 1);
      // float32: output 16-bit unit i (pairs 2p, 2p + 1 of block k of quad Q; i = 16Q + 4k + p)
      // is packed unit 8p + 4Q + k.
      o[i] = static_cast<int16_t>(8 * (i % 4) + 4 * (i / 16) + (i % 16) / 4);
    }
    // bfloat16: packed 32-bit unit 4L + c holds pairs 4L..4L + 3 of block pair c % 2 of quad c / 2,
    // so output unit i is packed unit 4 (i % 4) + i / 4.
    for (int i = 0; i < 16; ++i) d[i] = 4 * (i % 4) + i / 4;
    widen[0] = _mm512_load_si512(w[0]);
    widen[1] = _mm512_load_si512(w[1]);
    high_words = _mm512_load_si512(h);
    order = _mm512_load_si512(bf16 ? static_cast<const void*>(d) : static_cast<const void*>(o));
    asm(""
        : "+v"(magnitude), "+v"(byte_field), "+v"(bias), "+v"(widen[0]), "+v"(widen[1]),
          "+v"(high_words), "+v"(order), "+v"(eight), "+v"(pair), "+v"(six), "+v"(half));
  }
};

// Stochastic rounding of a prepared group whose first column is a multiple of 256 and whose
// factors are all finite (g.to_scalar 0): its 16 blocks read one 256-column group's words
// (`words`, philox.h's sr_byte), block b byte b / 4 of word b % 4, so every word and rotation is
// known when compiled (no index arithmetic, immediate rotations). Each block is one vector of
// a = |x| * factor (a bfloat16 pair's magnitudes taken once in 16-bit lanes and widened by one
// vpermw per block); the code is e2m1_codes_stochastic's without the clamp to 6: with the bias
// 0xFF000000 in place of 0xC1000000, sum = bits(u) + byte * 2^14 + 0xFF000000 (mod 2^32) lies in
// [bits(0.125), 2^31) and sum >> 22 is 248 + the unclamped code (248 = 0x3E000000 >> 22), which
// grows with a, so that the unsigned saturation of the pack to bytes at 255 is the clamp (a code
// 7 from a > 6 as from a = 6). The sums' high halves of two blocks are taken in order by one
// vpermt2w and shifted by 6 in 16-bit lanes; a pack of two such pairs puts in each 128-bit lane
// 8 elements of a pair, then 8 of the other, as a signed pack of the sources' high halves does
// (the bfloat16 themselves, or a float32's high half), so its byte signs are the codes' signs.
// With kStats the saturated and flushed elements are counted from masks in general registers
// (popcount), off the vector pipes, and added to st once: flushed (code magnitude 0 from x != 0)
// as the codes of magnitude 0 less the elements x = 0 (whose codes are 0 whatever the byte), or
// of a bfloat16 source as the codes of magnitude 0 whose packed magnitudes are nonzero.
template <bool kStats, DType::Id kSrc>
[[gnu::always_inline]] inline void encode_sr_aligned16(const void* src, const FloatGroup16& g,
                                                       const __m512i (&words)[4], uint8_t* codes,
                                                       Nvfp4LaneStats* st) {
  constexpr bool kBf16 = kSrc == DType::Id::bf16;
  const SrAlignedConstants16 k(kBf16);
  unsigned saturated = 0, zero_codes = 0, zeros = 0;
  __m512i last_pairs;
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    __m512i high[2], signs[2], mags[2], sums[4];
    __m512 ys[4];
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      const int b0 = 4 * q + 2 * p;
      __m512 a[2];
      if constexpr (kBf16) {
        const __m512i raw = _mm512_loadu_si512(static_cast<const uint16_t*>(src) + 16 * b0);
        signs[p] = raw;
        const __m512i m = _mm512_and_si512(raw, k.magnitude);
        mags[p] = m;
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h)
          a[h] = _mm512_mul_ps(
              _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAA, k.widen[h], m)),
              _mm512_set1_ps(g.f[b0 + h]));
      } else {
        __m512 y[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m512 x = _mm512_loadu_ps(static_cast<const float*>(src) + 16 * (b0 + h));
          y[h] = _mm512_mul_ps(x, _mm512_set1_ps(g.f[b0 + h]));
          ys[2 * p + h] = y[h];
          a[h] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(y[h]), k.magnitude));
          if constexpr (kStats)
            zeros += std::popcount(
                static_cast<unsigned>(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ)));
        }
      }
      __m512i sum[2];
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int b = b0 + h;
        // random_bytes with the rotation of byte b / 4 as an immediate: (rotated & field) | bias
        const __m512i random = _mm512_ternarylogic_epi32(
            _mm512_rol_epi32(words[b % 4], (14 - 8 * (b / 4)) & 31), k.byte_field, k.bias, 0xEA);
        const __m512 u = _mm512_max_ps(
            a[h],
            _mm512_fmadd_round_ps(a[h], k.half, k.half, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
        sum[h] = _mm512_add_epi32(_mm512_castps_si512(u), random);
        sums[2 * p + h] = sum[h];
        if constexpr (kStats)
          saturated +=
              std::popcount(static_cast<unsigned>(_mm512_cmp_ps_mask(a[h], k.six, _CMP_GT_OQ)));
      }
      if constexpr (kBf16)
        high[p] = _mm512_srli_epi16(_mm512_permutex2var_epi16(sum[0], k.high_words, sum[1]), 6);
    }
    // 248 + the magnitude code, then the code: lane L holds elements 8L..8L + 7 of pair 0 (blocks
    // 4q, 4q + 1), then those of pair 1.
    __m512i magnitudes;
    __mmask64 negative;
    if constexpr (kBf16) {
      magnitudes = _mm512_add_epi8(_mm512_packus_epi16(high[0], high[1]), k.eight);
      negative = _mm512_movepi8_mask(_mm512_packs_epi16(signs[0], signs[1]));
    } else {
      magnitudes = _mm512_add_epi8(
          _mm512_packus_epi16(
              _mm512_packus_epi32(_mm512_srli_epi32(sums[0], 22), _mm512_srli_epi32(sums[1], 22)),
              _mm512_packus_epi32(_mm512_srli_epi32(sums[2], 22), _mm512_srli_epi32(sums[3], 22))),
          k.eight);
      negative = _mm512_movepi8_mask(_mm512_packs_epi16(
          _mm512_packs_epi32(_mm512_castps_si512(ys[0]), _mm512_castps_si512(ys[1])),
          _mm512_packs_epi32(_mm512_castps_si512(ys[2]), _mm512_castps_si512(ys[3]))));
    }
    if constexpr (kStats) {
      // Codes of magnitude 0: of a float32 source all (its elements x = 0 taken off at the end), of
      // a bfloat16 one those of x != 0 (the signed pack of the magnitudes keeps them nonzero).
      __mmask64 zero_code;
      if constexpr (kBf16) {
        const __m512i nonzero = _mm512_packs_epi16(mags[0], mags[1]);
        zero_code = _mm512_mask_testn_epi8_mask(_mm512_test_epi8_mask(nonzero, nonzero), magnitudes,
                                                magnitudes);
      } else {
        zero_code = _mm512_testn_epi8_mask(magnitudes, magnitudes);
      }
      zero_codes += static_cast<unsigned>(std::popcount(static_cast<uint64_t>(zero_code)));
    }
    // The sign into bit 3; then two codes to a byte (even + 16 * odd) in block order.
    const __m512i coded = _mm512_mask_add_epi8(magnitudes, negative, magnitudes, k.eight);
    const __m512i pairs = _mm512_maddubs_epi16(coded, k.pair);
    if (q % 2 == 0) {
      last_pairs = pairs;
    } else {
      // Two quads' pairs as bytes (lane L: quad q - 1's units 8L..8L + 7, then quad q's), put in
      // block order by runs of four (bfloat16) or two (float32) bytes.
      const __m512i bytes = _mm512_packus_epi16(last_pairs, pairs);
      _mm512_storeu_si512(codes + 32 * (q - 1), kBf16 ? _mm512_permutexvar_epi32(k.order, bytes)
                                                      : _mm512_permutexvar_epi16(k.order, bytes));
    }
  }
  if constexpr (kStats) {
    st->saturated = _mm512_add_epi32(
        st->saturated, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(saturated))));
    st->flushed = _mm512_add_epi32(
        st->flushed,
        _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(zero_codes - zeros))));
    const __m512 own = _mm512_castsi512_ps(g.own);
    st->best = _mm512_max_ps(own, st->best);
    st->peak = _mm512_max_ps(_mm512_mul_ps(own, g.factor), st->peak);
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail
