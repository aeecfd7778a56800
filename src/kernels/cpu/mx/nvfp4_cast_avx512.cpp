// AVX-512 (F, BW, VL) bodies of the NVFP4 casts and of MXFP4 with stochastic rounding: one
// NVFP4 block is one vector. The per-tensor amax pass; the 1x16 cast (16 blocks' amax, E4M3
// scales and factors as one vector, then each block's codes, rounded to nearest or
// stochastically, with the statistics counted from the vectors when asked; a float32 source
// rounded to nearest takes its codes from a byte table of the products' steps, four blocks at a
// time; stochastic groups aligned to the random words' 256 columns in nvfp4_sr_avx512.h);
// Philox4x32-10 on 16 lanes. Blocks whose factor is NaN or infinite, and a row's short
// last block, run the scalar body (mx_cast.cpp) and are counted by nvfp4_run_stats. A bfloat16
// source rounded to nearest takes the AVX2 level's body (nvfp4_rows_bf16_avx2.cpp) with its
// codes by lookup.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

#include "kernels/cpu/common/fetch_ahead.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx512.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"
#include "kernels/cpu/mx/nvfp4_scale_codes.h"
#include "kernels/cpu/mx/nvfp4_scale_lookup.h"
#include "kernels/cpu/mx/philox_avx512.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx512_lanes;

// scalar::nvfp4_block_scale for 16 blocks at once: their E4M3 codes (in lanes) and factors.
inline __m512 nvfp4_block_scales(__m512 amax, float tensor_scale, __m512i& code) {
  __m512 s =
      _mm512_div_ps(_mm512_div_ps(amax, _mm512_set1_ps(kE2m1Max)), _mm512_set1_ps(tensor_scale));
  s = _mm512_min_ps(_mm512_set1_ps(kE4m3Max), _mm512_max_ps(_mm512_set1_ps(0x1p-6f), s));
  code = fp8_codes<3, 7>(s);
  return _mm512_div_ps(_mm512_set1_ps(1.0f / tensor_scale), e4m3_values(code));
}

// The E4M3 scale codes of 16 blocks' amax bits (numbers >= 0, t.ok) by t's compares
// (nvfp4_scale_codes.h): 9 + 8 octaves + the steps the low 23 bits reach, clamped to 8..126.
inline __m512i scale_codes16(const Nvfp4ScaleCodeThresholds& t, __m512i bits) {
  const __m512i d = _mm512_sub_epi32(bits, _mm512_set1_epi32(t.base));
  __m512i c =
      _mm512_add_epi32(_mm512_slli_epi32(_mm512_srai_epi32(d, 23), 3), _mm512_set1_epi32(9));
  const __m512i low = _mm512_and_si512(d, _mm512_set1_epi32(0x7FFFFF));
#pragma GCC unroll 7
  for (int j = 0; j < 7; ++j)
    c = _mm512_mask_add_epi32(c, _mm512_cmpgt_epi32_mask(low, _mm512_set1_epi32(t.step[j])), c,
                              _mm512_set1_epi32(1));
  return _mm512_min_epi32(_mm512_max_epi32(c, _mm512_set1_epi32(8)), _mm512_set1_epi32(126));
}

// The factors of 16 scale codes (8..126) by t's table (t.factors_ok): nvfp4_block_scale's
// (1 / tensor scale) / value(code) without the division.
inline __m512 scale_factors16(const Nvfp4ScaleCodeThresholds& t, __m512i code) {
  const __m512i top = _mm512_permutexvar_epi32(
      code,
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.factor_top))));
  return _mm512_castsi512_ps(
      _mm512_sub_epi32(top, _mm512_slli_epi32(_mm512_srli_epi32(code, 3), 23)));
}

inline __m512i splat(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }

// Philox4x32-10 on 16 lanes: kernels/cpu/mx/philox_avx512.h.
using philox_avx512::SrWords16;

// e2m1_codes_stochastic's constants, made once per cast and passed in: built in the block loop,
// GCC makes each one again from a general register per block (mov, vpbroadcastd: the broadcast
// on the shift pipes that Philox needs); behind an empty asm that hides their values they stay
// in registers or are read as memory operands.
struct StochasticCodeConstants16 {
  __m512i sign, magnitude, byte_field, bias;
  __m512i rotate[4];  // random_bytes' left rotations of byte 0-3 to bits 14-21
  __m512 six, half;
  StochasticCodeConstants16()
      : sign(_mm512_set1_epi32(8)),
        magnitude(_mm512_set1_epi32(0x7FFFFFFF)),
        byte_field(_mm512_set1_epi32(0xFF << 14)),
        bias(_mm512_set1_epi32(static_cast<int>(0xC1000000u))),
        six(_mm512_set1_ps(kE2m1Max)),
        half(_mm512_set1_ps(0.5f)) {
    for (int j = 0; j < 4; ++j) rotate[j] = _mm512_set1_epi32((14 - 8 * j) & 31);
    asm("" : "+v"(sign), "+v"(magnitude), "+v"(byte_field), "+v"(bias), "+v"(six), "+v"(half));
  }
};

// Byte `byte` (0-3) of each lane of `words` (the lanes' random bits, philox.h's sr_byte) at bits
// 14-21, with e2m1_codes_stochastic's bias 0xC1000000 above them (bits 24, 30, 31).
inline __m512i random_bytes(__m512i words, int byte, const StochasticCodeConstants16& k) {
  // (rotated & field) | bias
  return _mm512_ternarylogic_epi32(_mm512_rolv_epi32(words, k.rotate[byte]), k.byte_field, k.bias,
                                   0xEA);
}

// scalar::e2m1_code_stochastic on 16 lanes, `random` each lane's 8 bits at bits 14-21 with the
// bias above (random_bytes). With a = min(|v|, 6), u = max(a, (a + 1) / 2 rounded toward zero) is
// a from 1 on and (a + 1) / 2 below, in [0.5, 6]; (bits(u) - bits(0.5)) >> 14 is t: from 1 on
// the scalar body's (a's bits less 0.5's, shifted: below 2 this is a * 512 too), below 1
// ((a + 1) / 2 - 0.5) * 2^10 = a * 512, truncated (the rounding toward zero drops only bits
// below 2^-24). The code (t + random) >> 8 (0-7) is (bits(u) + random * 2^14 - 0x3F000000) >> 22,
// which mod 2^10 is that with 0xC1000000 = 2^32 - 0x3F000000 added; v's sign into bit 3. NaN lanes
// take e2m1_codes' answer; without kNan, v holds no NaN the codes keep (a block whose product
// holds one is cast again by the scalar body). `magnitude` is |v|, which the statistics read too.
// e2m1_magnitude_codes_stochastic is the code's magnitude bits (0-7) from `magnitude`.
inline __m512i e2m1_magnitude_codes_stochastic(__m512 magnitude, __m512i random,
                                               const StochasticCodeConstants16& k) {
  const __m512 a = _mm512_min_ps(magnitude, k.six);
  const __m512 u = _mm512_max_ps(
      a, _mm512_fmadd_round_ps(a, k.half, k.half, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
  return _mm512_srli_epi32(_mm512_add_epi32(_mm512_castps_si512(u), random), 22);
}
template <bool kNan = true>
inline __m512i e2m1_codes_stochastic(__m512 v, __m512 magnitude, __m512i random,
                                     const StochasticCodeConstants16& k) {
  const __m512i code = e2m1_magnitude_codes_stochastic(magnitude, random, k);
  // code | ((v >> 28) & 8): the sign into bit 3
  const __m512i signed_code =
      _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(_mm512_castps_si512(v), 28), k.sign, 0xF8);
  if constexpr (!kNan) return signed_code;
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (nan == 0) return signed_code;
  return _mm512_mask_blend_epi32(nan, signed_code, e2m1_codes(v));
}
template <bool kNan = true>
inline __m512i e2m1_codes_stochastic(__m512 v, __m512i random, const StochasticCodeConstants16& k) {
  return e2m1_codes_stochastic<kNan>(
      v, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), k.magnitude)), random, k);
}

// scalar::e2m1_code's magnitude bits (0-7) on 16 lanes y >= 0 that hold no NaN, by the FPU's
// rounding: with a = min(y, 6) and e = max(exponent(a), 0) (0, 1 or 2), a * 2^(1 - e) rounded
// to the nearest integer, ties to even, is n in 0..4 (e = 0: the grid 0, 0.5, .. 2 in halves) or
// 2..4 (e = 1: 2, 3, 4) or 2..3 (e = 2: 4, 6 in twos), and the code n + 2e. A tie between two
// codes goes to the even integer, which is the even code, as E2M1's round to nearest even does.
inline __m512i e2m1_magnitude_codes(__m512 y) {
  const __m512 a = _mm512_min_ps(y, _mm512_set1_ps(kE2m1Max));
  const __m512 e = _mm512_max_ps(_mm512_getexp_ps(a), _mm512_setzero_ps());  // getexp(0): -inf
  const __m512 n = _mm512_roundscale_ps(_mm512_scalef_ps(a, _mm512_sub_ps(_mm512_set1_ps(1.0f), e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_cvttps_epi32(_mm512_fmadd_ps(e, _mm512_set1_ps(2.0f), n));
}

// scalar::e2m1_code on 16 lanes that hold no NaN: the magnitude's code with y's sign bit.
inline __m512i e2m1_codes_of_numbers(__m512 y) {
  // code | ((y >> 28) & 8): the sign into bit 3
  return _mm512_ternarylogic_epi32(e2m1_magnitude_codes(abs16(y)),
                                   _mm512_srli_epi32(_mm512_castps_si512(y), 28),
                                   _mm512_set1_epi32(8), 0xF8);
}

// The codes of four blocks (16 int32 codes each, at most 15) as 32 bytes, the even element in
// the low nibble: packed to bytes in 128-bit lanes (lane L: elements 4L..4L + 3 of each block;
// store_e2m1_blocks4), paired into 16-bit units (even + 16 * odd; unit 8L + 2k + j: pair 2L + j
// of block k), put in order and narrowed to bytes (store_e2m1_bytes4, from the packed bytes b).
inline void store_e2m1_bytes4(uint8_t* dst, __m512i b) {
  const __m512i pairs = _mm512_maddubs_epi16(b, _mm512_set1_epi16(0x1001));
  // Byte 8k + 2L + j of the result is unit 8L + 2k + j.
  const __m512i order =
      _mm512_set_epi16(31, 30, 23, 22, 15, 14, 7, 6, 29, 28, 21, 20, 13, 12, 5, 4,  // blocks 3, 2
                       27, 26, 19, 18, 11, 10, 3, 2, 25, 24, 17, 16, 9, 8, 1, 0);   // blocks 1, 0
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm512_cvtepi16_epi8(_mm512_permutexvar_epi16(order, pairs)));
}
inline void store_e2m1_blocks4(uint8_t* dst, __m512i c0, __m512i c1, __m512i c2, __m512i c3) {
  store_e2m1_bytes4(dst,
                    _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3)));
}

// A segment's statistics from its vector blocks: saturated and flushed elements counted in
// lanes, and the largest block amax and amax * factor as lane maxima.
struct Nvfp4LaneStats {
  __m512i saturated;
  __m512i flushed;
  __m512 best;
  __m512 peak;

  static Nvfp4LaneStats zero() {
    return {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_set1_ps(-1.0f),
            _mm512_setzero_ps()};
  }
};

// The magnitude bits of 16 bfloat16 blocks' amax (p: 256 elements) as float32 bits in block
// order, reduced in 16-bit lanes (the float32 bits are the bfloat16's shifted up, so the unsigned
// maxima agree, a NaN's above infinity's): 8 vectors of two blocks folded by 128-bit lanes, then
// 64-bit and 32-bit units, then the two halves of each 32-bit lane, and one permute to block order.
inline __m512i bf16_block_amax16(const uint16_t* p) {
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
  __m512i r[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    // Blocks 4i..4i + 3, one per 128-bit lane, 8 partial maxima each.
    const __m512i a = _mm512_and_si512(_mm512_loadu_si512(p + 64 * i), magnitude);
    const __m512i b = _mm512_and_si512(_mm512_loadu_si512(p + 64 * i + 32), magnitude);
    r[i] = _mm512_max_epu16(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Lane L: blocks L and 4 + L (t0), 8 + L and 12 + L (t1), 4 partial maxima each.
  const __m512i t0 =
      _mm512_max_epu16(_mm512_unpacklo_epi64(r[0], r[1]), _mm512_unpackhi_epi64(r[0], r[1]));
  const __m512i t1 =
      _mm512_max_epu16(_mm512_unpacklo_epi64(r[2], r[3]), _mm512_unpackhi_epi64(r[2], r[3]));
  // Lane L, 32-bit unit i: block L + 4i, 2 partial maxima.
  const __m512 f0 = _mm512_castsi512_ps(t0), f1 = _mm512_castsi512_ps(t1);
  const __m512i w =
      _mm512_max_epu16(_mm512_castps_si512(_mm512_shuffle_ps(f0, f1, _MM_SHUFFLE(2, 0, 2, 0))),
                       _mm512_castps_si512(_mm512_shuffle_ps(f0, f1, _MM_SHUFFLE(3, 1, 3, 1))));
  const __m512i m = _mm512_slli_epi32(_mm512_max_epu16(w, _mm512_srli_epi32(w, 16)), 16);
  // Block k lies in unit 4 (k % 4) + k / 4.
  return _mm512_permutexvar_epi32(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), m);
}

// A group of 16 blocks' own amax bits, factors and the blocks the scalar body casts (factor NaN
// or infinite, where x = 0 makes x * factor NaN), taken before their codes (prepare_group16), so
// that a loop can take the next group's while it codes one.
struct FloatGroup16 {
  __m512i own;  // a NaN's bits above infinity's
  __m512 factor;
  __mmask16 to_scalar;
  alignas(64) float f[16];
};

// encode_group16's first half: the 16 blocks' amax (block_amax_in's 16, or their own), their
// scales (written; by sc's compares where they serve, or by `lookup`'s, when given) and factors.
// With kGivenOnly and block_amax_in, g.own is block_amax_in's (the own amax are not taken: no
// statistics, or records taken from the tiles' own amax, MxKernels::nvfp4_encode_stats).
template <DType::Id kSrc, bool kGivenOnly = false>
[[gnu::always_inline]] inline void prepare_group16(const void* src, const float* block_amax_in,
                                                   float tensor_scale,
                                                   const Nvfp4ScaleCodeThresholds& sc,
                                                   uint8_t* scales, FloatGroup16& g,
                                                   const Nvfp4ScaleCodeLookup* lookup = nullptr) {
  const DType dtype{kSrc};
  if (kGivenOnly && block_amax_in) {
    g.own = _mm512_loadu_si512(block_amax_in);
  } else if constexpr (kSrc == DType::Id::bf16) {
    g.own = bf16_block_amax16(static_cast<const uint16_t*>(src));
  } else {
    const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
    __m512i m[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k)
      m[k] = _mm512_and_si512(_mm512_castps_si512(load16(src, dtype, 16 * k)), magnitude);
    g.own = reduce16_max(m);
  }
  __m512 amax;
  if (block_amax_in) {
    amax = _mm512_loadu_ps(block_amax_in);
  } else {
    amax = _mm512_mask_blend_ps(_mm512_cmpgt_epu32_mask(g.own, _mm512_set1_epi32(0x7F800000)),
                                _mm512_castsi512_ps(g.own), _mm512_castsi512_ps(splat(kQuietNan)));
  }
  __m512i scale_codes;
  // The compares serve where every amax is a number >= 0 (as unsigned bits, at most infinity's).
  const __m512i bits = _mm512_castps_si512(amax);
  if (sc.ok && _mm512_cmpgt_epu32_mask(bits, _mm512_set1_epi32(0x7F800000)) == 0) {
    scale_codes = lookup ? scale_codes16(*lookup, bits) : scale_codes16(sc, bits);
    g.factor = sc.factors_ok
                   ? scale_factors16(sc, scale_codes)
                   : _mm512_div_ps(_mm512_set1_ps(1.0f / tensor_scale), e4m3_values(scale_codes));
  } else {
    g.factor = nvfp4_block_scales(amax, tensor_scale, scale_codes);
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(scales), _mm512_cvtepi32_epi8(scale_codes));
  // A factor that is NaN or infinite (where x = 0 makes x * factor NaN) is the scalar body's.
  g.to_scalar = _mm512_cmp_ps_mask(g.factor, _mm512_set1_ps(std::numeric_limits<float>::infinity()),
                                   _CMP_NLT_UQ);
  _mm512_store_ps(g.f, g.factor);
}

// encode_group16's second half, from its prepared group g: each block's codes, its factor
// broadcast from g.f (a load, where a permute of the factors' register would cost the shuffle
// unit two operations a block).
template <bool kSr, bool kStats, DType::Id kSrc>
[[gnu::always_inline]] inline unsigned encode_prepared16(const void* src, const FloatGroup16& g,
                                                         SrWords16* sr, uint64_t offset,
                                                         uint64_t row, int64_t col, uint8_t* codes,
                                                         Nvfp4LaneStats* st) {
  const DType dtype{kSrc};
  // Made for stochastic rounding only (the asm that hides them would keep them otherwise).
  [[maybe_unused]] const auto sr_constants = [] {
    if constexpr (kSr)
      return StochasticCodeConstants16();
    else
      return 0;
  }();
  if constexpr (kSr) sr->need(offset, row, col, col + 16 * 15);
  const __m512 six = _mm512_set1_ps(kE2m1Max);
  __m512i c4[4];
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) {
    const __m512 x = load16(src, dtype, 16 * k);
    const __m512 y = _mm512_mul_ps(x, _mm512_set1_ps(g.f[k]));
    __m512i& c = c4[k % 4];
    __m512 ay;  // |y|
    if constexpr (kSr) {
      // Block k's lanes read their bytes of a word of the blocks of column c0's group.
      const int64_t c0 = col + 16 * k;
      const __m512i word = sr->words(c0)[sr_word_index(static_cast<uint64_t>(c0))];
      // A NaN in y makes the block's factor NaN: the scalar body casts it again.
      ay = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(y), sr_constants.magnitude));
      c = e2m1_codes_stochastic<false>(
          y, ay, random_bytes(word, sr_byte_index(static_cast<uint64_t>(c0)), sr_constants),
          sr_constants);
    } else {
      c = e2m1_codes_of_numbers(y);
      ay = abs16(y);
    }
    if (k % 4 == 3) store_e2m1_blocks4(codes + 8 * (k - 3), c4[0], c4[1], c4[2], c4[3]);
    if constexpr (kStats) {
      // A block the scalar body casts counts zero here (its lanes' masks are cleared).
      const __mmask16 live = (g.to_scalar >> k) & 1 ? 0 : 0xFFFF;
      const __m512i one = _mm512_set1_epi32(1);
      const __mmask16 over = _mm512_mask_cmp_ps_mask(live, ay, six, _CMP_GT_OQ);
      st->saturated = _mm512_mask_add_epi32(st->saturated, over, st->saturated, one);
      const __mmask16 zero_code = _mm512_mask_testn_epi32_mask(live, c, _mm512_set1_epi32(7));
      const __mmask16 nonzero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_OQ);
      st->flushed = _mm512_mask_add_epi32(st->flushed, zero_code & nonzero, st->flushed, one);
    }
  }
  if constexpr (kStats) {
    // The blocks' own amax with NaN passed over is a number where the factor is finite (a
    // block holding a NaN has a NaN factor).
    const __m512 own_f = _mm512_castsi512_ps(g.own);
    st->best = _mm512_mask_max_ps(st->best, static_cast<__mmask16>(~g.to_scalar), own_f, st->best);
    st->peak = _mm512_mask_max_ps(st->peak, static_cast<__mmask16>(~g.to_scalar),
                                  _mm512_mul_ps(own_f, g.factor), st->peak);
  }
  return g.to_scalar;
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail

#include "kernels/cpu/mx/nvfp4_sr_avx512.h"

namespace mantissa::kernels::mx::detail {
namespace {

// A float32 source rounded to nearest: E2M1 codes by a byte table of the index of y = |x| *
// factor's bits among the grid's steps (nvfp4_rows_avx2.cpp's E2m1StepTable, which gives the
// reasons): b = ceil((bits(y) - bits(0.25) + bit) / 2^21), bit the one worth 2^22, and b - 16,
// saturated to a byte, picks the code from two 16-entry tables. The constants, read from memory.
struct E2m1StepTable16 {
  __m512i low, high;      // the codes of b = 0..15 and 16..31 in each 128-bit lane
  __m512i c15, sixteen;   // 15: the high table's index min(b - 16, 15); 16: the low's b from b - 16
  __m512i first_flushed;  // -15: b - 16 below it is code 0
  __m512i eight;          // the sign's bit of a code
  __m512i pair;           // maddubs weights 1, 16: two codes to a byte
  __m512i order;          // store_e2m1_blocks4's order of the 16-bit units
  __m512i magnitude, one, six;
  __m512i offset;  // 2^21 - 1 - 16 * 2^21 - bits(0.25): (bits(y) + offset + bit) >> 21 is b - 16
  E2m1StepTable16()
      : low(_mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 5))),
        high(_mm512_broadcast_i32x4(_mm_setr_epi8(6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7))),
        c15(_mm512_set1_epi8(15)),
        sixteen(_mm512_set1_epi8(16)),
        first_flushed(_mm512_set1_epi8(-15)),
        eight(_mm512_set1_epi8(8)),
        pair(_mm512_set1_epi16(0x1001)),
        order(_mm512_set_epi16(31, 30, 23, 22, 15, 14, 7, 6, 29, 28, 21, 20, 13, 12, 5, 4, 27, 26,
                               19, 18, 11, 10, 3, 2, 25, 24, 17, 16, 9, 8, 1, 0)),
        magnitude(_mm512_set1_epi32(0x7FFFFFFF)),
        one(_mm512_set1_epi32(1)),
        six(_mm512_set1_epi32(0x40C00000)),
        offset(_mm512_set1_epi32((1 << 21) - 1 - (16 << 21) - 0x3E800000)) {}
};

// The 16 blocks of a prepared float32 group whose factors are all finite (g.to_scalar 0), rounded
// to nearest by the table, four blocks' codes stored at once, and with kStats their statistics:
// saturated (y > 6) in 32-bit lanes, flushed (code 0 from x != 0) in bytes. The records (best,
// peak) come from g alone, taken where `records`: rows that share g (a tile row's) take them once.
template <bool kStats>
[[gnu::always_inline]] inline void encode_f32_table16(const float* p, const FloatGroup16& g,
                                                      const E2m1StepTable16& t, uint8_t* codes,
                                                      Nvfp4LaneStats* st, bool records = true) {
  __m512i flushed = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int k = 0; k < 16; k += 4) {
    __m512i x[4], a[4], index[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      x[j] = _mm512_loadu_si512(p + 16 * (k + j));
      a[j] = _mm512_and_si512(x[j], t.magnitude);
      const __m512i y =
          _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(a[j]), _mm512_set1_ps(g.f[k + j])));
      const __m512i bit = _mm512_and_si512(_mm512_srli_epi32(y, 22), t.one);
      index[j] = _mm512_srai_epi32(_mm512_add_epi32(_mm512_add_epi32(y, t.offset), bit), 21);
      if constexpr (kStats)
        st->saturated = _mm512_mask_add_epi32(st->saturated, _mm512_cmpgt_epi32_mask(y, t.six),
                                              st->saturated, t.one);
    }
    // Per 128-bit lane L: elements 4L..4L + 3 of blocks k, k + 1, k + 2, k + 3.
    const __m512i q = _mm512_packs_epi16(_mm512_packs_epi32(index[0], index[1]),
                                         _mm512_packs_epi32(index[2], index[3]));
    const __mmask64 negative = _mm512_movepi8_mask(
        _mm512_packs_epi16(_mm512_packs_epi32(x[0], x[1]), _mm512_packs_epi32(x[2], x[3])));
    // The larger of the two tables' codes (nvfp4_rows_avx2.cpp's e2m1_table_pairs).
    const __m512i magnitudes =
        _mm512_max_epu8(_mm512_shuffle_epi8(t.high, _mm512_min_epi8(q, t.c15)),
                        _mm512_shuffle_epi8(t.low, _mm512_add_epi8(q, t.sixteen)));
    if constexpr (kStats) {
      // Code 0 and x nonzero: the packs of the magnitudes keep a nonzero one nonzero.
      const __m512i nonzero =
          _mm512_packs_epi16(_mm512_packs_epi32(a[0], a[1]), _mm512_packs_epi32(a[2], a[3]));
      const __mmask64 flush =
          _mm512_cmpgt_epi8_mask(t.first_flushed, q) & _mm512_test_epi8_mask(nonzero, nonzero);
      flushed = _mm512_mask_sub_epi8(flushed, flush, flushed, _mm512_set1_epi8(-1));
    }
    // The sign into bit 3 (the magnitude codes are at most 7).
    const __m512i coded = _mm512_mask_add_epi8(magnitudes, negative, magnitudes, t.eight);
    const __m512i pairs = _mm512_maddubs_epi16(coded, t.pair);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 8 * k),
                        _mm512_cvtepi16_epi8(_mm512_permutexvar_epi16(t.order, pairs)));
  }
  if constexpr (kStats) {
    st->flushed = _mm512_add_epi32(st->flushed, _mm512_sad_epu8(flushed, _mm512_setzero_si512()));
    if (!records) return;
    const __m512 own = _mm512_castsi512_ps(g.own);
    st->best = _mm512_max_ps(own, st->best);
    st->peak = _mm512_max_ps(_mm512_mul_ps(own, g.factor), st->peak);
  }
}

// 16 blocks of 16 elements from src (256 elements, all inside the segment): their amax
// (block_amax_in's 16, or their own), scales and factors as vectors, then each block's codes,
// rounded to nearest or (kSr) stochastically with the bytes of the 256-column groups from
// column `col` (a multiple of 16; philox.h's sr_byte). Returns the blocks whose factor is NaN or
// infinite (their codes and scales are left for the scalar body, and they are not counted).
// `lookup`, where given, takes the scale codes in place of sc's compares (prepare_group16).
template <bool kSr, bool kStats, DType::Id kSrc>
inline unsigned encode_group16(const void* src, const float* block_amax_in, float tensor_scale,
                               const Nvfp4ScaleCodeThresholds& sc,
                               const Nvfp4ScaleCodeLookup* lookup, SrWords16* sr, uint64_t offset,
                               uint64_t row, int64_t col, uint8_t* codes, uint8_t* scales,
                               Nvfp4LaneStats* st) {
  FloatGroup16 g;
  prepare_group16<kSrc>(src, block_amax_in, tensor_scale, sc, scales, g, lookup);
  if constexpr (kSr) {
    if ((col & 255) == 0 && g.to_scalar == 0) {
      sr->need(offset, row, col, col);
      encode_sr_aligned16<kStats, kSrc>(src, g, sr->words(col), codes, st);
      return 0;
    }
  }
  return encode_prepared16<kSr, kStats, kSrc>(src, g, sr, offset, row, col, codes, st);
}

// A segment's statistics from its lanes (st) added to run's, where it has vector blocks.
inline void add_lane_stats(const Nvfp4LaneStats& st, int64_t blocks, MxStatsRun& run) {
  if (blocks > 0) {
    run.best = std::max(run.best, _mm512_reduce_max_ps(st.best));
    // max of amax * factor / 6 over the blocks is their max over 6 (division is monotonic).
    run.peak = std::max(run.peak, static_cast<double>(_mm512_reduce_max_ps(st.peak)) / kE2m1Max);
  }
  run.saturated += _mm512_reduce_add_epi32(st.saturated);
  run.flushed += _mm512_reduce_add_epi32(st.flushed);
}

// The NVFP4 cast of a segment, 16 blocks at a time (encode_group16); the segment's last blocks
// that make no group of 16 are cast from a zero-padded copy and their bytes copied out. With
// kStats it returns nvfp4_run_stats's counts of the segment, taken from the vectors the cast
// holds: each block's amax with NaN passed over, |x * factor| > 6, and codes whose magnitude
// bits are 0 from x != 0 (not NaN). Blocks whose factor is NaN or infinite, and a row's short
// last block, run the scalar body and are counted by nvfp4_run_stats.
template <bool kSr, bool kStats, DType::Id kSrc, bool kTileRecords = false>
MxStatsRun nvfp4_encode_as(const void* src, int64_t n, float tensor_scale,
                           const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                           int64_t first_col, uint8_t* codes, uint8_t* scales) {
  const DType dtype{kSrc};
  const int64_t blocks = n / kNvfp4Block, full = blocks * kNvfp4Block;
  std::optional<SrWords16> sr;
  if constexpr (kSr) sr.emplace(seed);
  Nvfp4LaneStats st = Nvfp4LaneStats::zero();
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
  const Nvfp4ScaleCodeThresholds& sc = nvfp4_scale_code_thresholds(tensor_scale);
  // Stochastic rounding takes its scale codes by lookup where it serves (nvfp4_scale_lookup.h).
  const Nvfp4ScaleCodeLookup* lookup = nullptr;
  if constexpr (kSr)
    if (const Nvfp4ScaleCodeLookup& l = nvfp4_scale_code_lookup(sc); l.ok) lookup = &l;
  auto group = [&](const void* x, const float* amax_in, int64_t b, uint8_t* c, uint8_t* s) {
    return encode_group16<kSr, kStats, kSrc>(
        x, amax_in, tensor_scale, sc, lookup, sr ? &*sr : nullptr, offset,
        static_cast<uint64_t>(row), first_col + b * kNvfp4Block, c, s, &st);
  };
  // Rounded to nearest: each group's amax and factors taken a group ahead, so that their chain
  // (a reduction, the scale codes' compares, a division) hides behind the blocks before. Given
  // the blocks' amax, their own are taken only for the statistics' records, and not from the
  // tiles' own.
  constexpr bool kAhead = !kSr;
  constexpr bool kGivenOnly = !kStats || kTileRecords;
  auto prepare = [&](int64_t b, FloatGroup16 & g) __attribute__((always_inline)) {
    prepare_group16<kSrc, kGivenOnly>(at(src, dtype, b * kNvfp4Block),
                                      block_amax_in ? block_amax_in + b : nullptr, tensor_scale, sc,
                                      scales + b, g);
  };
  const int64_t groups = blocks / 16;
  const E2m1StepTable16 table;
  FloatGroup16 ahead[2];
  if (kAhead && groups > 0) prepare(0, ahead[0]);
  int64_t b = 0;
  for (; b + 16 <= blocks; b += 16) {
    const void* x = at(src, dtype, b * kNvfp4Block);
    uint8_t* c = codes + b * kNvfp4Block / 2;
    unsigned nan;
    if constexpr (kAhead) {
      const int64_t q = b / 16;
      // The float32 group's 16 lines 8 KiB on, into L2 (kernels/cpu/common/fetch_ahead.h).
      fetch_group_lines_to_l2<16, 8192>(x);
      if (q + 1 < groups) prepare(b + 16, ahead[(q + 1) & 1]);
      if constexpr (kSrc == DType::Id::f32) {
        if (ahead[q & 1].to_scalar == 0) {
          encode_f32_table16<kStats>(static_cast<const float*>(x), ahead[q & 1], table, c, &st);
          continue;
        }
      }
      nan = encode_prepared16<kSr, kStats, kSrc>(x, ahead[q & 1], nullptr, 0, 0, 0, c, &st);
    } else {
      nan = group(x, block_amax_in ? block_amax_in + b : nullptr, b, c, scales + b);
    }
    for (; nan; nan &= nan - 1) scalar_block(b + std::countr_zero(nan), kNvfp4Block);
  }
  if (b < blocks) {
    // The last 1-15 whole blocks, zero-padded to 16 (the padding's codes are dropped).
    const int count = static_cast<int>(blocks - b);
    alignas(64) unsigned char x[16 * kNvfp4Block * sizeof(float)] = {};
    alignas(64) float amax_in[16] = {};
    const size_t item = dtype.itemsize();
    std::memcpy(x, at(src, dtype, b * kNvfp4Block), count * kNvfp4Block * item);
    if (block_amax_in) std::copy(block_amax_in + b, block_amax_in + blocks, amax_in);
    uint8_t c[16 * kNvfp4Block / 2], s[16];
    unsigned nan = group(x, block_amax_in ? amax_in : nullptr, b, c, s);
    std::memcpy(codes + b * kNvfp4Block / 2, c, count * kNvfp4Block / 2);
    std::memcpy(scales + b, s, count);
    for (nan &= (1u << count) - 1; nan; nan &= nan - 1)
      scalar_block(b + std::countr_zero(nan), kNvfp4Block);
  }
  if (full < n) scalar_block(blocks, n - full);
  if constexpr (kStats) add_lane_stats(st, blocks, run);
  return run;
}

// A float32 row's groups of 16 blocks prepared once from given amax for every row that shares
// them (a 16x16 tile row's rows: prepare_shared_groups16), and the first row's scales, which the
// preparation wrote.
struct FloatSharedGroups16 {
  static constexpr int64_t kMaxGroups = 32;  // rows of up to 8192 elements
  FloatGroup16 group[kMaxGroups];
  const uint8_t* scales = nullptr;
};

// nvfp4_encode_as of a float32 row rounded to nearest whose groups of 16 blocks are prepared in
// `shared`: each group's codes from them, the first row's scales copied (the row that wrote them
// takes the records); the blocks after the last whole group as a segment of their own.
template <bool kStats, bool kTileRecords>
MxStatsRun encode_f32_shared_row(const float* p, int64_t n, float tensor_scale,
                                 const float* block_amax_in, uint8_t* codes, uint8_t* scales,
                                 const FloatSharedGroups16& shared) {
  const int64_t groups = n / kNvfp4Block / 16;
  const bool records = shared.scales == scales;
  const E2m1StepTable16 table;
  Nvfp4LaneStats st = Nvfp4LaneStats::zero();
  MxStatsRun run;
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t b = 16 * q;
    const float* x = p + b * kNvfp4Block;
    uint8_t* c = codes + b * kNvfp4Block / 2;
    const FloatGroup16& g = shared.group[q];
    fetch_group_lines_to_l2<16, 8192>(x);
    if (!records) std::memcpy(scales + b, shared.scales + b, 16);
    if (g.to_scalar == 0) {
      encode_f32_table16<kStats>(x, g, table, c, &st, records);
      continue;
    }
    for (unsigned nan =
             encode_prepared16<false, kStats, DType::Id::f32>(x, g, nullptr, 0, 0, 0, c, &st);
         nan; nan &= nan - 1) {
      const int64_t blk = b + std::countr_zero(nan);
      run.append(nvfp4_encode_as<false, kStats, DType::Id::f32, kTileRecords>(
          x + (blk - b) * kNvfp4Block, kNvfp4Block, tensor_scale, block_amax_in + blk, 0, 0, 0, 0,
          codes + blk * kNvfp4Block / 2, scales + blk));
    }
  }
  if constexpr (kStats) add_lane_stats(st, 16 * groups, run);
  const int64_t done = 16 * groups * kNvfp4Block;
  if (done < n)
    run.append(nvfp4_encode_as<false, kStats, DType::Id::f32, kTileRecords>(
        p + done, n - done, tensor_scale, block_amax_in + 16 * groups, 0, 0, 0, 0, codes + done / 2,
        scales + 16 * groups));
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

}  // namespace

namespace avx512 {

// A bfloat16 source rounded to nearest takes the AVX2 level's body (nvfp4_rows_bf16_avx2.cpp)
// with its codes by vpermt2w lookups: per-scale tables cost no more in 256-bit vectors, where
// 512-bit ones would assemble two blocks' tables for every lookup.
void nvfp4_encode(const void* src, DType dtype, int64_t n, float tensor_scale,
                  const float* block_amax_in, uint8_t* codes, uint8_t* scales) {
  if (dtype == kBFloat16) {
    avx2::nvfp4_encode_bf16(static_cast<const uint16_t*>(src), n, tensor_scale, block_amax_in,
                            false, false, true, codes, scales);
    return;
  }
  nvfp4_encode_as<false, false, DType::Id::f32>(src, n, tensor_scale, block_amax_in, 0, 0, 0, 0,
                                                codes, scales);
}

void nvfp4_encode_sr(const void* src, DType dtype, int64_t n, float tensor_scale,
                     const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                     int64_t first_col, uint8_t* codes, uint8_t* scales) {
  nvfp4_encode_body<true, false>(src, dtype, n, tensor_scale, block_amax_in, seed, offset, row,
                                 first_col, codes, scales);
}

MxStatsRun nvfp4_encode_stats(const void* src, DType dtype, int64_t n, float tensor_scale,
                              const float* block_amax_in, bool tile_records, bool stochastic,
                              uint64_t seed, uint64_t offset, int64_t row, int64_t first_col,
                              uint8_t* codes, uint8_t* scales) {
  if (stochastic)
    return nvfp4_encode_body<true, true>(src, dtype, n, tensor_scale, block_amax_in, seed, offset,
                                         row, first_col, codes, scales);
  if (dtype == kBFloat16)
    return avx2::nvfp4_encode_bf16(static_cast<const uint16_t*>(src), n, tensor_scale,
                                   block_amax_in, true, tile_records, true, codes, scales);
  if (tile_records && block_amax_in)
    return nvfp4_encode_as<false, true, DType::Id::f32, true>(src, n, tensor_scale, block_amax_in,
                                                              0, 0, 0, 0, codes, scales);
  return nvfp4_encode_as<false, true, DType::Id::f32>(src, n, tensor_scale, block_amax_in, 0, 0, 0,
                                                      0, codes, scales);
}

MxStatsRun nvfp4_encode_f32_tile_rows(const float* src, int64_t rows, int64_t n, int64_t ld,
                                      float tensor_scale, const float* tile_amax, bool stats,
                                      bool tile_records, uint8_t* codes, int64_t code_ld,
                                      uint8_t* scales, int64_t scale_ld) {
  return nvfp4_with_stats(stats, tile_records, [&]<bool kStats, bool kTileRecords>() {
    // Rows whose statistics need their blocks' own amax, or longer than the groups hold, go one at
    // a time.
    return nvfp4_tile_rows<FloatSharedGroups16>(
        rows, (!kStats || kTileRecords) && n <= 16 * kNvfp4Block * FloatSharedGroups16::kMaxGroups,
        [&](int64_t r) {
          return nvfp4_encode_as<false, kStats, DType::Id::f32, kTileRecords>(
              src + r * ld, n, tensor_scale, tile_amax, 0, 0, 0, 0, codes + r * code_ld,
              scales + r * scale_ld);
        },
        [&](FloatSharedGroups16& shared) {
          const Nvfp4ScaleCodeThresholds& sc = nvfp4_scale_code_thresholds(tensor_scale);
          nvfp4_share_groups(shared, n / kNvfp4Block / 16, scales, [&](int64_t q, FloatGroup16& g) {
            prepare_group16<DType::Id::f32, true>(src + 16 * q * kNvfp4Block, tile_amax + 16 * q,
                                                  tensor_scale, sc, scales + 16 * q, g);
          });
        },
        [&](int64_t r, const FloatSharedGroups16& shared) {
          return encode_f32_shared_row<kStats, kTileRecords>(src + r * ld, n, tensor_scale,
                                                             tile_amax, codes + r * code_ld,
                                                             scales + r * scale_ld, shared);
        });
  });
}

// mxfp4_sr.h's cast on 16 lanes: each 1x32 block's E8M0 floor scale, then the stochastic rounding
// of x * 2^-e * 3/4 with the column's random byte (n and first_col multiples of 32).
void mxfp4_encode_sr(const void* src, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                     int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  SrWords16 sr(seed);
  const StochasticCodeConstants16 sr_constants;
  const __m512 prescale = _mm512_set1_ps(kMxfp4SrPrescale);
  for (int64_t i = 0; i < n; i += kMxBlock) {
    const int64_t col = first_col + i;
    sr.need(offset, static_cast<uint64_t>(row), col, col);
    const auto& words = sr.words(col);
    const __m512 x0 = load16(src, dtype, i), x1 = load16(src, dtype, i + 16);
    const bool nan =
        (_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q)) != 0;
    const uint8_t s = nan ? kE8m0Nan
                          : e8m0_floor(_mm512_reduce_max_ps(_mm512_max_ps(abs16(x0), abs16(x1))),
                                       element_limits(Element::kE2m1).max_pow2);
    scales[i / kMxBlock] = s;
    const __m512 r = _mm512_set1_ps(floor_reciprocal(s));
    const auto c0 = static_cast<uint64_t>(col), c1 = c0 + 16;
    store_e2m1(codes + i / 2, e2m1_codes_stochastic(_mm512_mul_ps(_mm512_mul_ps(x0, r), prescale),
                                                    random_bytes(words[sr_word_index(c0)],
                                                                 sr_byte_index(c0), sr_constants),
                                                    sr_constants));
    store_e2m1(
        codes + i / 2 + 8,
        e2m1_codes_stochastic(
            _mm512_mul_ps(_mm512_mul_ps(x1, r), prescale),
            random_bytes(words[sr_word_index(c1)], sr_byte_index(c1), sr_constants), sr_constants));
  }
}

void nvfp4_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, float tensor_scale,
                  float* out) {
  const int64_t full = n / kNvfp4Block * kNvfp4Block;
  const __m512 table = e2m1_table();
  for (int64_t i = 0; i < full; i += kNvfp4Block) {
    const __m512 s = _mm512_set1_ps(tensor_scale * e4m3_value(scales[i / kNvfp4Block]));
    const __m512 v = _mm512_permutexvar_ps(unpack_e2m1(codes + i / 2), table);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(v, s));
  }
  if (full < n)
    kScalarKernels.nvfp4_decode(codes + full / 2, scales + full / kNvfp4Block, n - full,
                                tensor_scale, out + full);
}

// max |x| by integer maxima of the magnitude bits, 32 bfloat16 or 16 float32 lanes a vector
// (a NaN's bits lie above infinity's).
float amax(const void* src, DType dtype, int64_t n) {
  __m512i m = _mm512_setzero_si512();
  int64_t full;
  uint32_t bits;
  if (dtype == kBFloat16) {
    const auto* p = static_cast<const uint16_t*>(src);
    full = n / 32 * 32;
    for (int64_t i = 0; i < full; i += 32)
      m = _mm512_max_epu16(m, _mm512_and_si512(_mm512_loadu_si512(p + i), splat(0x7FFF7FFFu)));
    // The 32 lanes' maximum in 16-bit lanes, moved into float32's high half.
    const __m256i h = _mm256_max_epu16(_mm512_castsi512_si256(m), _mm512_extracti64x4_epi64(m, 1));
    __m128i q = _mm_max_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_xor_si128(_mm_minpos_epu16(_mm_xor_si128(q, _mm_set1_epi16(-1))), _mm_set1_epi16(-1));
    bits = static_cast<uint32_t>(_mm_extract_epi16(q, 0)) << 16;
  } else {
    const auto* p = static_cast<const float*>(src);
    full = n / 16 * 16;
    for (int64_t i = 0; i < full; i += 16)
      m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(p + i), splat(0x7FFFFFFFu)));
    bits = static_cast<uint32_t>(_mm512_reduce_max_epu32(m));
  }
  if (bits > 0x7F800000u) return float_of(kQuietNan);
  const float vec = float_of(bits);
  const float tail = kScalarKernels.amax(at(src, dtype, full), dtype, n - full);
  return tail != tail ? tail : (tail > vec ? tail : vec);
}

}  // namespace avx512
}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
