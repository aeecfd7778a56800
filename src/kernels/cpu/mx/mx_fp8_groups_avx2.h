#pragma once
// An FP8 row group of eight blocks as the AVX2 and AVX-512 FP8 row bodies (mx_rows_fp8_avx2.cpp,
// mx_rows_fp8_avx512.cpp) cast it on the source's bits, with every per-block test taken in the
// group's preparation, a group ahead: the segment's constants (Fp8Table), and a group's scales,
// per-block constants and slow blocks (Fp8Group) from its blocks' amax and least |x| bits
// (finish_fp8_group; under rceil rceil_group). A file includes it after mx_blocks_avx2.h.

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// --- FP8 rows on the source's bits, a group's checks taken ahead --------------------------
//
// The casts on the source's bits of RowConstants' comment (mx_blocks_avx2.h), with every
// per-block test moved into the group's preparation, which reads the group a group
// ahead: besides the amax, each block's smallest nonzero |x| (the least |x| bits less 1, a zero
// wrapping to the largest) against the least bits with a normal code, so a block's cast has no
// branch, and a group whose eight blocks all pass takes no per-block test either. The constants
// are made once a segment and read from memory.

template <Element E, DType::Id kSrc>
struct Fp8Table {
  using K = RowConstants<E, kSrc>;
  __m256i one16, magnitude16, one32, magnitude32, max_code8, sign8, dword_order;
  // The groups' (32-bit lanes): 127, 128 + kMaxE, a power of 2's zero bits (0x807FFFFF),
  // infinity's bits, the rounding bias less the rebias, 128 - kBias, the element max's bits and
  // infinity's less them (in the source's units).
  __m256i c127, field_end, pow2_zero, inf, bias, from_base, max_bits, above_max;
  // rceil_group's (32-bit lanes): the element max's fraction bits and its power of 2, kBias and
  // kBias - 1, (127 << kFrac) + the rounding bias less the rebias, ((1 - kBias) << kFrac) - 1,
  // 1 (the scale code up to which block_scales8 leaves a block), 254, 1.0f's bits.
  __m256i max_frac, max_pow2, c_bias, c_bias_less_1, add_base, from_off, one_code, c254, one_f;
  Fp8Table()
      : one16(_mm256_set1_epi16(1)),
        magnitude16(_mm256_set1_epi16(0x7FFF)),
        one32(_mm256_set1_epi32(1)),
        magnitude32(_mm256_set1_epi32(0x7FFFFFFF)),
        max_code8(_mm256_set1_epi8(K::kMaxCode)),
        sign8(_mm256_set1_epi8(static_cast<char>(0x80))),
        dword_order(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)),
        c127(_mm256_set1_epi32(127)),
        field_end(_mm256_set1_epi32(128 + K::kMaxE)),
        pow2_zero(_mm256_set1_epi32(static_cast<int32_t>(0x807FFFFFu))),
        inf(_mm256_set1_epi32(0x7F800000)),
        bias(_mm256_set1_epi32((1 << (K::kDrop - 1)) - 1 - ((127 - K::kBias) << K::kFrac))),
        from_base(_mm256_set1_epi32(128 - K::kBias)),
        max_bits(_mm256_set1_epi32(
            static_cast<int32_t>(bits_of(element_limits(E).max) >> (23 - K::kFrac)))),
        above_max(_mm256_set1_epi32(
            (0x7F800000 >> (23 - K::kFrac)) -
            static_cast<int32_t>(bits_of(element_limits(E).max) >> (23 - K::kFrac)))),
        max_frac(
            _mm256_set1_epi32(static_cast<int32_t>(bits_of(element_limits(E).max) & 0x7FFFFF))),
        max_pow2(_mm256_set1_epi32(element_limits(E).max_pow2)),
        c_bias(_mm256_set1_epi32(K::kBias)),
        c_bias_less_1(_mm256_set1_epi32(K::kBias - 1)),
        add_base(_mm256_set1_epi32((127 << K::kFrac) + (1 << (K::kDrop - 1)) - 1 -
                                   ((127 - K::kBias) << K::kFrac))),
        from_off(_mm256_set1_epi32(((1 - K::kBias) << K::kFrac) - 1)),
        one_code(_mm256_set1_epi32(1)),
        c254(_mm256_set1_epi32(254)),
        one_f(_mm256_castps_si256(_mm256_set1_ps(1.0f))) {}
};

// Eight blocks ready to cast: amax bits, multipliers, RowConstants' add and sat_above, and the
// blocks the bits do not take (bit b).
struct Fp8Group {
  __m256i amax;
  alignas(32) float mul[8];
  alignas(32) int32_t add[8], sat_above[8];
  unsigned slow;
};

// The rest of an Fp8Group from its blocks' amax bits (float32's) and least |x| bits less 1 (in
// the source's units, a zero's wrapped to the largest, zero-extended to 32 bits): the scales
// into s and multipliers (all_block_scales8), RowConstants::set's lanes, and its slow blocks with
// those holding a nonzero |x| below the normal codes. Without kLow (low unused) the slow blocks
// leave those out, and `from` (8 lanes, 32-byte aligned) gets the least |x| bits with a normal
// code less 1, which the caller checks each block's |x| bits against.
template <Element E, E8m0Rounding R, DType::Id kSrc, bool kSat, bool kLow = true>
[[gnu::always_inline]] inline void finish_fp8_group(__m256i amax, __m256i low, uint8_t* s,
                                                    const Fp8Table<E, kSrc>& t, Fp8Group& g,
                                                    int32_t* from_out = nullptr) {
  using K = RowConstants<E, kSrc>;
  g.amax = amax;
  all_block_scales8<E, R>(g.amax, s, g.mul);
  const __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(g.mul));
  const __m256i zero = _mm256_setzero_si256();
  const __m256i field = _mm256_srli_epi32(m, 23);
  const __m256i e = _mm256_sub_epi32(field, t.c127);
  const __m256i pow2 = _mm256_cmpeq_epi32(_mm256_and_si256(m, t.pow2_zero), zero);
  const __m256i in_range =
      _mm256_and_si256(_mm256_cmpgt_epi32(field, zero), _mm256_cmpgt_epi32(t.field_end, field));
  const __m256i finite = _mm256_cmpgt_epi32(t.inf, g.amax);
  const __m256i shifted = _mm256_slli_epi32(e, K::kFrac);
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.add), _mm256_add_epi32(shifted, t.bias));
  // The least |x| bits with a normal code, less 1 (positive where e <= kMaxE).
  const __m256i from =
      _mm256_sub_epi32(_mm256_slli_epi32(_mm256_sub_epi32(t.from_base, e), K::kFrac), t.one32);
  __m256i normal = pow2;
  if constexpr (!kLow)
    _mm256_store_si256(reinterpret_cast<__m256i*>(from_out), from);
  else if constexpr (kSrc == DType::Id::bf16)
    normal = _mm256_andnot_si256(_mm256_cmpgt_epi32(from, low), pow2);
  else
    normal = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(low, from), low), pow2);
  const __m256i ok = _mm256_and_si256(_mm256_and_si256(normal, in_range), finite);
  g.slow = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok))) & 0xFFu;
  if constexpr (kSat)
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(g.sat_above),
        _mm256_add_epi32(t.max_bits,
                         _mm256_min_epi32(_mm256_sub_epi32(zero, shifted), t.above_max)));
}

// finish_fp8_group under rceil in fewer steps, its constants read from the table: the scale
// code c from amax's bits as block_scales8 takes it, the multiplier 2^(127 - c) (1 for a zero
// block), and the rest from c alone: a block the bits take has c >= kBias (e = 127 - c at most
// kMaxE), add = ((127 - c) << kFrac) + bias and from = ((c + 1 - kBias) << kFrac) - 1. A zero
// block takes c = kBias there (its codes 0 under any e up to kMaxE, its least bits the largest).
// The lanes block_scales8 leaves (NaN, infinite, c below 2) are taken from mx_scalar.h as
// all_block_scales8 takes them, and are slow, as are blocks with c below kBias and (kLow) those
// whose least bits (low) lie at or below from; without kLow, from_out gets from. The same
// scales, multipliers, adds and slow blocks as finish_fp8_group's.
template <Element E, DType::Id kSrc, bool kLow = true>
[[gnu::always_inline]] inline void rceil_group(__m256i amax, __m256i low, uint8_t* s,
                                               const Fp8Table<E, kSrc>& t, Fp8Group& g,
                                               int32_t* from_out = nullptr) {
  using K = RowConstants<E, kSrc>;
  const __m256i zero = _mm256_setzero_si256();
  g.amax = amax;
  const __m256i above = _mm256_cmpgt_epi32(_mm256_and_si256(amax, t.pow2_zero), t.max_frac);
  // field - max_pow2 + 1 where amax's fraction exceeds the max's (above is -1 there).
  const __m256i c_raw =
      _mm256_sub_epi32(_mm256_sub_epi32(_mm256_srli_epi32(amax, 23), t.max_pow2), above);
  const __m256i c = _mm256_max_epi32(c_raw, zero);
  const __m256i is_zero = _mm256_cmpeq_epi32(amax, zero);
  const __m256i finite = _mm256_cmpgt_epi32(t.inf, amax);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(s), bytes_of(c));
  _mm256_store_si256(
      reinterpret_cast<__m256i*>(g.mul),
      _mm256_blendv_epi8(_mm256_slli_epi32(_mm256_sub_epi32(t.c254, c), 23), t.one_f, is_zero));
  const __m256i decided =
      _mm256_or_si256(is_zero, _mm256_and_si256(_mm256_cmpgt_epi32(c_raw, t.one_code), finite));
  const unsigned special =
      ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(decided))) & 0xFFu;
  if (special) [[unlikely]] {
    constexpr ElementLimits lim = element_limits(E);
    alignas(32) uint32_t bits[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax);
    for (unsigned m = special; m; m &= m - 1) {
      const int b = __builtin_ctz(m);
      const float a = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
      s[b] = e8m0_rceil(a, lim.max);
      g.mul[b] = rceil_multiplier(s[b], a, lim.max);
    }
  }
  const __m256i cc = _mm256_slli_epi32(_mm256_max_epi32(c_raw, t.c_bias), K::kFrac);
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.add), _mm256_sub_epi32(t.add_base, cc));
  const __m256i from = _mm256_add_epi32(cc, t.from_off);
  __m256i ok = _mm256_or_si256(
      is_zero, _mm256_and_si256(_mm256_cmpgt_epi32(c_raw, t.c_bias_less_1), finite));
  if constexpr (!kLow)
    _mm256_store_si256(reinterpret_cast<__m256i*>(from_out), from);
  else if constexpr (kSrc == DType::Id::bf16)
    ok = _mm256_andnot_si256(_mm256_cmpgt_epi32(from, low), ok);
  else
    ok = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_max_epu32(low, from), low), ok);
  g.slow = ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok))) & 0xFFu;
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail
