#pragma once
// An FP8 row group of eight blocks as the AVX2 and AVX-512 FP8 row bodies (mx_rows_fp8_avx2.cpp,
// mx_rows_fp8_avx512.cpp) cast it on the source's bits, with every per-block test taken in the
// group's preparation, a group ahead: the segment's constants (Fp8Table), and a group's scales,
// per-block constants and slow blocks (Fp8Group) from its blocks' amax and least |x| bits
// (finish_fp8_group). A file includes it after mx_blocks_avx2.h.

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
            static_cast<int32_t>(bits_of(element_limits(E).max) >> (23 - K::kFrac)))) {}
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

}  // namespace
}  // namespace mantissa::kernels::mx::detail
