// AVX-512 (F, BW, VL, VBMI) body of the MX row casts to E2M1 under the floor scale, in 256-bit
// vectors: the AVX2 body's table (mx_rows_e2m1_table.h) with fewer instructions a block. The
// index's bit of |x| worth two steps is a test into a mask and a masked subtract (in place of an
// and, a compare and a subtract), the codes a max and one vpermb of the index's low 5 bits (in
// place of an add, a pshufb and two adds), and a float32 source's sticky high halves two vpermt2w
// (the high and the low halves of 16 elements, in element order) and an unsigned minimum (in place
// of three ops a vector and a pack, and of the permute that put the codes in order), two blocks'
// nibble pairs stored in order by one vpermt2b (in place of a pack and a permute); a bfloat16
// source's statistics are counted from compare masks by popcnt. 512-bit vectors would take as many
// pipe cycles on Zen 4, which splits them in two (a body of one block a 512-bit vector in 16-bit
// lanes, half the instructions, measured 10-15 % slower in the caches). Under rceil, and without
// VBMI, the AVX-512 level runs the AVX2 body (mx_rows_e2m1_avx2.cpp).
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "mantissa/core/cpu_features.h"

#include "kernels/cpu/common/fetch_ahead.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mx_rows_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it; with FMA and
// F16C, which the AVX2 level's helpers this file shares take.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vbmi,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"
#include "kernels/cpu/mx/mx_row_groups_avx2.h"
#include "kernels/cpu/mx/mx_rows_e2m1_table.h"

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// The lookup's constants: vpermb's table (the code of index b - 16 at its low 5 bits: b = 16..20
// at 0..4, b = 0..15 at 16..31), 1 in 16-bit lanes, and vpermt2w's indexes of 16 float32
// elements' high and low halves.
struct Fp4Avx512Table : Fp4Table {
  __m256i codes, one16, high_halves, low_halves;
  __m256i floor16;     // -16: the lowest index b - 16 vpermb reads
  __m256i pair_order;  // vpermt2b's: the low bytes of two blocks' pairs in element order
  Fp4Avx512Table()
      : codes(_mm256_setr_epi8(6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 1, 1, 1, 1, 1, 1,
                               2, 2, 2, 3, 3, 4, 4, 5, 5)),
        one16(_mm256_set1_epi16(1)),
        high_halves(_mm256_setr_epi16(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)),
        low_halves(_mm256_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)),
        floor16(_mm256_set1_epi8(-16)),
        pair_order(_mm256_setr_epi8(0, 2, 4, 6, 16, 18, 20, 22, 8, 10, 12, 14, 24, 26, 28, 30, 32,
                                    34, 36, 38, 48, 50, 52, 54, 40, 42, 44, 46, 56, 58, 60, 62)) {}
};

// 16 elements' bfloat16 bits from element j: a float32 source's high halves with bit 0 or'd
// with (low half != 0), in element order.
template <DType::Id kSrc>
[[gnu::always_inline]] inline __m256i bf16_bits16(const void* src, int64_t j,
                                                  const Fp4Avx512Table& t) {
  if constexpr (kSrc == DType::Id::bf16) {
    return load16_bits(static_cast<const uint16_t*>(src) + j);
  } else {
    const auto* p = reinterpret_cast<const __m256i*>(static_cast<const float*>(src) + j);
    const __m256i x0 = _mm256_loadu_si256(p), x1 = _mm256_loadu_si256(p + 1);
    return _mm256_or_si256(
        _mm256_permutex2var_epi16(x0, t.high_halves, x1),
        _mm256_min_epu16(_mm256_permutex2var_epi16(x0, t.low_halves, x1), t.one16));
  }
}

// fp4_pairs (mx_rows_e2m1_avx2.cpp) of 32 elements from j in the bfloat16 order of both sources.
template <DType::Id kSrc, bool kStats>
[[gnu::always_inline]] inline __m256i fp4_pairs512(const void* src, int64_t j, int32_t off_bits,
                                                   const Fp4Avx512Table& t, Fp4Counts& n) {
  using L = Fp4Lanes;
  const __m256i h0 = bf16_bits16<kSrc>(src, j, t), h1 = bf16_bits16<kSrc>(src, j + 16, t);
  const __m256i off = _mm256_set1_epi16(static_cast<int16_t>(off_bits));
  const __m256i mag = t.magnitude16;
  const __m256i a0 = _mm256_and_si256(h0, mag), a1 = _mm256_and_si256(h1, mag);
  // u = t + bit 6 of |x|: 1 added under the bit's mask; the index u >> kShift.
  __m256i u0 = _mm256_add_epi16(a0, off), u1 = _mm256_add_epi16(a1, off);
  u0 = _mm256_mask_add_epi16(u0, _mm256_test_epi16_mask(h0, t.bit6_16), u0, t.one16);
  u1 = _mm256_mask_add_epi16(u1, _mm256_test_epi16_mask(h1, t.bit6_16), u1, t.one16);
  const __m256i q =
      _mm256_packs_epi16(_mm256_srai_epi16(u0, L::kShift), _mm256_srai_epi16(u1, L::kShift));
  const __m256i signs = _mm256_packs_epi16(h0, h1);
  // y > 6: v > 18 steps, t above 3 steps less 1. Every v from 18 steps (576) up to y's bound 8
  // (640) has bit 6 set, so there u = t + 1: u above 3 steps (96; u saturated to a byte keeps
  // it), and below 576 u <= t + 1 <= 95. Testing u, not t, keeps only u live. Flushed: index 0
  // (b - 16 below -15) and x nonzero (|x|'s byte, saturated, nonzero).
  if constexpr (kStats && kSrc == DType::Id::bf16) {
    // Counted from compare masks by popcnt, off the vector pipes: in the caches 8 % faster than
    // the lanes' counts; float32 sources measured 20 % slower so.
    const __m256i bytes = _mm256_packs_epi16(a0, a1);
    n.sat_n += __builtin_popcount(_mm256_cmpgt_epi8_mask(_mm256_packs_epi16(u0, u1), t.sat16));
    n.flushed_n += __builtin_popcount(
        _mm256_mask_test_epi8_mask(_mm256_cmpgt_epi8_mask(t.first_flushed, q), bytes, bytes));
  }
  __m256i sat, zero;
  if constexpr (kStats && kSrc == DType::Id::f32) {
    sat = _mm256_cmpgt_epi8(_mm256_packs_epi16(u0, u1), t.sat16);
    zero = _mm256_packs_epi16(a0, a1);
  }
  const __m256i codes = _mm256_permutexvar_epi8(_mm256_max_epi8(q, t.floor16), t.codes);
  if constexpr (kStats && kSrc == DType::Id::f32) {
    // The index's mask, 0 where |x|'s byte is.
    n.flushed =
        _mm256_sub_epi8(n.flushed, _mm256_sign_epi8(_mm256_cmpgt_epi8(t.first_flushed, q), zero));
    n.sat = _mm256_sub_epi8(n.sat, sat);
    // Counted here, in registers: GCC otherwise sinks the counts below the group's other
    // blocks, spilling each block's lanes until then.
    asm("" : "+v"(n.sat), "+v"(n.flushed));
  }
  const __m256i nibbles = _mm256_blendv_epi8(codes, _mm256_or_si256(codes, t.eight), signs);
  return _mm256_maddubs_epi16(nibbles, t.pair);
}

// The level's pairs and their store for encode_fp4_groups (fp4_group_blocks): both sources'
// pairs come as dwords (16-bit lanes [a 0-7, a 16-23 | a 8-15, a 24-31] of a block's nibble
// pairs), two blocks' low bytes put in element order by one vpermt2b, in place of
// store_fp4_pairs' pack and permute (in the caches 1-3 % faster).
struct Fp4Avx512Body {
  using Table = Fp4Avx512Table;
  template <DType::Id kSrc, bool kStats>
  [[gnu::always_inline]] static __m256i pairs(const void* src, int64_t j, int32_t off_bits,
                                              const Table& t, Fp4Counts& counts) {
    return fp4_pairs512<kSrc, kStats>(src, j, off_bits, t, counts);
  }
  template <DType::Id kSrc, bool kStream>
  [[gnu::always_inline]] static void store(uint8_t* out, __m256i a, __m256i b, const Table& t) {
    const __m256i ordered = _mm256_permutex2var_epi8(a, t.pair_order, b);
    if constexpr (kStream)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out), ordered);
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
  }
};

// encode_fp4_groups with this body; under rceil no groups (avx512::mx_rows_e2m1 hands those
// casts to the AVX2 body).
template <Element E, E8m0Rounding R, DType::Id kSrc, bool kStream>
struct Fp4Groups512 {
  static int64_t run(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                     SegmentStats* st) {
    if constexpr (R == E8m0Rounding::kFloor)
      return st ? encode_fp4_groups<Fp4Avx512Body, kSrc, true, kStream>(src, n, codes, scales, st)
                : encode_fp4_groups<Fp4Avx512Body, kSrc, false, kStream>(src, n, codes, scales, st);
    else
      return 0;
  }
};

}  // namespace

MxStatsRun avx512::mx_rows_e2m1(const void* src, DType dtype, int64_t n, E8m0Rounding r,
                                uint8_t* codes, uint8_t* scales, bool stats, bool stream) {
  if (r != E8m0Rounding::kFloor || !cpu_features().avx512_vbmi)
    return avx2::mx_rows_e2m1(src, dtype, n, r, codes, scales, stats, stream);
  return encode_rows_of<Fp4Groups512, Element::kE2m1>(src, dtype, n, r, codes, scales, stats,
                                                      stream);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
