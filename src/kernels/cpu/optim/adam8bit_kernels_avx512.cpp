// AVX-512 8-bit Adam kernels (adam8bit_kernels.h): the AVX2 kernels' encoder arithmetic
// (adam8bit_kernels_avx2.cpp) on sixteen lanes, with mask registers for the selects and the
// lanes the fast encoder leaves to the exact table; the codes are decoded by table lookups
// (byte planes with VBMI, word planes without). Compiled with -ffp-contract=off
// (CMakeLists.txt) like the AVX2 file: the only fused multiply-adds are the codec's explicit
// ones, so the bits equal the scalar kernels'.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/optim/adam8bit_kernels.h"
#include "kernels/cpu/quant/blockwise_dynamic.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,prfchw")))
#define MANTISSA_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"), always_inline))
#define MANTISSA_AVX512_VBMI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,fma")))

namespace mantissa::kernels::optim {
namespace {

// An eight-entry table in both halves of a register, for permutes by indices 0..7.
MANTISSA_AVX512 inline __m512 table8(const float* t) {
  return _mm512_broadcast_f32x8(_mm256_loadu_ps(t));
}

// DynamicMapCodec::encode_fast on sixteen lanes: the codes, and in *redo the lanes the exact
// path must decide.
struct Encoder {
  __m512 a_tab, b_tab, eps;
  __m512i guess_tab, guess_base, thr_tab, cap_tab, abs_mask, one_bits, zero;
  MANTISSA_AVX512 explicit Encoder(const DynamicMapCodec& c)
      : a_tab(table8(c.enc_a)),
        b_tab(table8(c.enc_b)),
        eps(_mm512_set1_ps(c.eps)),
        guess_tab(
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c.guess)))),
        guess_base(_mm512_set1_epi32(DynamicMapCodec::kGuessBase)),
        thr_tab(_mm512_broadcast_i32x8(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.next_threshold)))),
        cap_tab(_mm512_broadcast_i32x8(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.enc_cap)))),
        abs_mask(_mm512_set1_epi32(0x7fffffff)),
        one_bits(_mm512_set1_epi32(0x3f800000)),
        zero(_mm512_setzero_si512()) {}

  template <bool kSigned>
  MANTISSA_AVX512_INLINE __m512i encode(__m512 x, __mmask16* redo) const {
    const __m512i bits = _mm512_castps_si512(x);
    // |x| (signed) or max(x, +0) (unsigned), at most 1.0 (as in the AVX2 kernel).
    const __m512i abits = _mm512_min_epi32(
        kSigned ? _mm512_and_si512(bits, abs_mask) : _mm512_max_epi32(bits, zero), one_bits);
    const __m512 a = _mm512_castsi512_ps(abits);
    const __m512i r0 =
        _mm512_shuffle_epi8(guess_tab, _mm512_sub_epi32(_mm512_srli_epi32(abits, 24), guess_base));
    const __m512i thr = _mm512_permutexvar_epi32(r0, thr_tab);
    // r0 + 1 where abits > thr (the AVX2 kernel subtracts the all-ones compare).
    const __m512i r =
        _mm512_mask_add_epi32(r0, _mm512_cmpgt_epi32_mask(abits, thr), r0, _mm512_set1_epi32(1));
    const __m512 t =
        _mm512_fmsub_ps(a, _mm512_permutexvar_ps(r, a_tab), _mm512_permutexvar_ps(r, b_tab));
    // trunc(t) (floor where the fast path is used: t >= 0 there) capped at the region's last
    // index, and t - trunc(t) in one VREDUCEPS (exact, as the scalar model's subtraction is).
    const __m512i c =
        _mm512_min_epi32(_mm512_cvttps_epi32(t), _mm512_permutexvar_epi32(r, cap_tab));
    __mmask16 bad = _mm512_cmp_ps_mask(_mm512_reduce_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC),
                                       eps, _CMP_LT_OQ);
    if constexpr (kSigned) {
      bad |= _mm512_cmpeq_epi32_mask(abits, thr);
      *redo = bad;
      // 127 + c, or 127 - clamp(c, 1, 127) where x's sign bit is set.
      const __m512i base = _mm512_set1_epi32(127);
      const __m512i down = _mm512_min_epi32(_mm512_max_epi32(c, _mm512_set1_epi32(1)), base);
      return _mm512_mask_sub_epi32(_mm512_add_epi32(base, c), _mm512_movepi32_mask(bits), base,
                                   down);
    }
    *redo = bad;
    return c;
  }
};

inline uint8_t encode_signed_exact(const Adam8bitMaps& maps, float m, float inv) {
  int q = maps.index1->index(m * inv);
  if ((q < maps.nonnegative_from1) != std::signbit(m)) q += m > 0.0f ? 1 : -1;
  return static_cast<uint8_t>(q);
}

// The exact path for one value (the lanes the fast encoder leaves undecided, and tails).
template <bool kSigned>
inline uint8_t encode_exact(const Adam8bitMaps& maps, float x, float inv) {
  return kSigned ? encode_signed_exact(maps, x, inv) : maps.index2->index(x * inv);
}

// Two packs leave 128-bit lane L holding codes 4L..4L+3 of each of four code vectors in turn;
// this dword permutation puts vector k's sixteen codes at bytes 16k..16k+15.
MANTISSA_AVX512_INLINE inline __m512i pack_order() {
  return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

// Codes of x[0..64) * inv into out[0..64), one store; redo[0..4) gets the undecided lanes.
template <bool kSigned>
MANTISSA_AVX512_INLINE inline void encode64(const Encoder& e, const float* x, __m512 vinv,
                                            __m512i order, uint8_t* out, __mmask16* redo) {
  __m512i c[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k)
    c[k] = e.encode<kSigned>(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), vinv), &redo[k]);
  const __m512i packed =
      _mm512_packus_epi16(_mm512_packus_epi32(c[0], c[1]), _mm512_packus_epi32(c[2], c[3]));
  _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, packed));
}

// The undecided lanes of the first `vectors` sixteen-value groups, by the exact path.
template <bool kSigned>
inline void redo_lanes(const Adam8bitMaps& maps, const float* x, float inv, uint8_t* out,
                       const __mmask16* redo, int64_t vectors) {
  unsigned any = 0;
  for (int64_t k = 0; k < vectors; ++k) any |= redo[k];
  if (any == 0) return;
  for (int64_t k = 0; k < vectors; ++k)
    for (unsigned lanes = redo[k]; lanes != 0; lanes &= lanes - 1) {
      const int64_t i = 16 * k + __builtin_ctz(lanes);
      out[i] = encode_exact<kSigned>(maps, x[i], inv);
    }
}

// Codes of x[0..n) * inv into out (n <= 256): 64 values per store, then sixteen, then one.
template <bool kSigned>
MANTISSA_AVX512_INLINE inline void encode_block(const Adam8bitMaps& maps, const Encoder& e,
                                                const float* x, float inv, uint8_t* out,
                                                int64_t n) {
  if (kSigned && !std::isfinite(inv)) {
    // x = m * inv has m's sign unless inv is infinite and m = 0 (x is a NaN): the signed map's
    // sign fix then needs the exact path.
    for (int64_t k = 0; k < n; ++k) out[k] = encode_exact<kSigned>(maps, x[k], inv);
    return;
  }
  __mmask16 redo[kAdam8bitBlockSize / 16];
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i order = pack_order();
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) encode64<kSigned>(e, x + j, vinv, order, out + j, &redo[j / 16]);
  for (; j + 16 <= n; j += 16) {
    const __m512i c = e.encode<kSigned>(_mm512_mul_ps(_mm512_loadu_ps(x + j), vinv), &redo[j / 16]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), _mm512_cvtepi32_epi8(c));
  }
  for (int64_t k = j; k < n; ++k) out[k] = encode_exact<kSigned>(maps, x[k], inv);
  redo_lanes<kSigned>(maps, x, inv, out, redo, j / 16);
}

// The first `count` (all when >= 16, none when <= 0) of sixteen floats held as integers.
MANTISSA_AVX512_INLINE inline void store_floats(float* out, __m512i f, int64_t count) {
  if (count >= 16)
    _mm512_storeu_si512(out, f);
  else if (count > 0)
    _mm512_mask_storeu_epi32(out, static_cast<__mmask16>((1u << count) - 1), f);
}

// out[i] = the table's entry for codes[i], i < n, from its byte planes: per 64 codes, each plane
// is looked up with two VPERMT2B (entries 0-127 and 128-255) and a blend on the codes' top bit,
// and the four byte vectors are interleaved into floats by unpacks. The unpacks work within
// 128-bit lanes, so the codes are first permuted such that each output vector receives sixteen
// consecutive codes. Not inlined: the callers are compiled without VBMI.
MANTISSA_AVX512_VBMI __attribute__((noinline)) void decode_by_byte_planes(const CodeBytePlanes& t,
                                                                          const uint8_t* codes,
                                                                          float* out, int64_t n) {
  // Byte 16L + 4k + j of the permuted codes is code 16k + 4L + j: after the two unpack levels,
  // output vector k holds codes 16k .. 16k + 15 in order.
  alignas(64) static constexpr uint8_t kOrder[64] = {
      0,  1,  2,  3,  16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51, 4,  5,  6,  7,  20, 21,
      22, 23, 36, 37, 38, 39, 52, 53, 54, 55, 8,  9,  10, 11, 24, 25, 26, 27, 40, 41, 42, 43,
      56, 57, 58, 59, 12, 13, 14, 15, 28, 29, 30, 31, 44, 45, 46, 47, 60, 61, 62, 63};
  const __m512i order = _mm512_load_si512(kOrder);
  for (int64_t i = 0; i < n; i += 64) {
    const int64_t len = std::min<int64_t>(64, n - i);
    const __mmask64 in = len == 64 ? ~__mmask64{0} : (__mmask64{1} << len) - 1;
    const __m512i idx = _mm512_permutexvar_epi8(order, _mm512_maskz_loadu_epi8(in, codes + i));
    const __mmask64 upper = _mm512_movepi8_mask(idx);
    // The planes are read from memory (L1) as operands: held in registers they would take all
    // sixteen of the loop's spare ones.
    __m512i b[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const uint8_t* pl = t.plane[k];
      b[k] = _mm512_mask_blend_epi8(
          upper, _mm512_permutex2var_epi8(_mm512_load_si512(pl), idx, _mm512_load_si512(pl + 64)),
          _mm512_permutex2var_epi8(_mm512_load_si512(pl + 128), idx, _mm512_load_si512(pl + 192)));
    }
    const __m512i lo01 = _mm512_unpacklo_epi8(b[0], b[1]), hi01 = _mm512_unpackhi_epi8(b[0], b[1]);
    const __m512i lo23 = _mm512_unpacklo_epi8(b[2], b[3]), hi23 = _mm512_unpackhi_epi8(b[2], b[3]);
    store_floats(out + i, _mm512_unpacklo_epi16(lo01, lo23), len);
    store_floats(out + i + 16, _mm512_unpackhi_epi16(lo01, lo23), len - 16);
    store_floats(out + i + 32, _mm512_unpacklo_epi16(hi01, hi23), len - 32);
    store_floats(out + i + 48, _mm512_unpackhi_epi16(hi01, hi23), len - 48);
  }
}

// out[i] = the table's entry for codes[i], i < n, from its word planes (AVX-512 BW, no VBMI):
// per 32 codes, each plane is looked up with four VPERMT2W (64 entries each) and three blends on
// the codes' bits 6 and 7, and the two word vectors are interleaved into floats by unpacks. As
// in decode_by_byte_planes the codes are first permuted so that the unpacks, which work within
// 128-bit lanes, give consecutive codes.
MANTISSA_AVX512 __attribute__((noinline)) void decode_by_word_planes(const CodeWordPlanes& t,
                                                                     const uint8_t* codes,
                                                                     float* out, int64_t n) {
  // Word 8L + j of the permuted codes is code 4L + j (j < 4) or 16 + 4L + (j - 4): after the
  // unpacks, output vector 0 holds codes 0 .. 15 and vector 1 codes 16 .. 31, in order.
  alignas(64) static constexpr uint16_t kOrder[32] = {0,  1,  2,  3,  16, 17, 18, 19, 4,  5,  6,
                                                      7,  20, 21, 22, 23, 8,  9,  10, 11, 24, 25,
                                                      26, 27, 12, 13, 14, 15, 28, 29, 30, 31};
  const __m512i order = _mm512_load_si512(kOrder);
  const __m512i bit6 = _mm512_set1_epi16(0x40), bit7 = _mm512_set1_epi16(0x80);
  for (int64_t i = 0; i < n; i += 32) {
    const int64_t len = std::min<int64_t>(32, n - i);
    const __mmask32 in = len == 32 ? ~__mmask32{0} : (__mmask32{1} << len) - 1;
    const __m512i idx = _mm512_permutexvar_epi16(
        order, _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(in, codes + i)));
    const __mmask32 m6 = _mm512_test_epi16_mask(idx, bit6);
    const __mmask32 m7 = _mm512_test_epi16_mask(idx, bit7);
    __m512i w[2];
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) {
      const uint16_t* pl = k == 0 ? t.lo : t.hi;
      const __m512i r0 =
          _mm512_permutex2var_epi16(_mm512_load_si512(pl), idx, _mm512_load_si512(pl + 32));
      const __m512i r1 =
          _mm512_permutex2var_epi16(_mm512_load_si512(pl + 64), idx, _mm512_load_si512(pl + 96));
      const __m512i r2 =
          _mm512_permutex2var_epi16(_mm512_load_si512(pl + 128), idx, _mm512_load_si512(pl + 160));
      const __m512i r3 =
          _mm512_permutex2var_epi16(_mm512_load_si512(pl + 192), idx, _mm512_load_si512(pl + 224));
      w[k] = _mm512_mask_blend_epi16(m7, _mm512_mask_blend_epi16(m6, r0, r1),
                                     _mm512_mask_blend_epi16(m6, r2, r3));
    }
    store_floats(out + i, _mm512_unpacklo_epi16(w[0], w[1]), len);
    store_floats(out + i + 16, _mm512_unpackhi_epi16(w[0], w[1]), len - 16);
  }
}

bool codecs_exact(const Adam8bitMaps& maps) {
  return maps.index1->exact && maps.index2->exact && maps.codec1->exact && maps.codec2->exact;
}

// The update constants of one step.
struct UpdateConstants {
  __m512 b1, omb1, b2, omb2, step, eps, decay;
  bool apply_decay;
  MANTISSA_AVX512 explicit UpdateConstants(const Adam8bitScalars& s)
      : b1(_mm512_set1_ps(s.beta1)),
        omb1(_mm512_set1_ps(s.one_minus_beta1)),
        b2(_mm512_set1_ps(s.beta2)),
        omb2(_mm512_set1_ps(s.one_minus_beta2)),
        step(_mm512_set1_ps(s.step_size)),
        eps(_mm512_set1_ps(s.eps_scaled)),
        decay(_mm512_set1_ps(s.decay)),
        apply_decay(s.apply_decay) {}
};

// One block between its update and its encoding: where it lives, its scratch m and v (in L1),
// its old absmax, and the running maxima of |m| and |v| that become the new one.
struct BlockInFlight {
  int64_t index = 0, len = 0;
  float* p = nullptr;
  const float* g = nullptr;
  uint8_t* q1 = nullptr;
  uint8_t* q2 = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  float a1 = 0, a2 = 0;          // absmax the codes were stored with
  float new_a1 = 0, new_a2 = 0;  // after the update
  __m512 max1, max2;
};

// Sixteen lanes of a block's update at offset i: m and v from the code values the table decode
// left in the block's scratch, the parameter step, and the maxima.
MANTISSA_AVX512_INLINE inline void update16(const UpdateConstants& k, BlockInFlight& b, int64_t i) {
  const __m512 gi = _mm512_loadu_ps(b.g + i);
  const __m512 c1 = _mm512_load_ps(b.m + i);
  const __m512 c2 = _mm512_load_ps(b.v + i);
  const __m512 mi = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(c1, _mm512_set1_ps(b.a1)), k.b1),
                                  _mm512_mul_ps(k.omb1, gi));
  const __m512 vi = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(c2, _mm512_set1_ps(b.a2)), k.b2),
                                  _mm512_mul_ps(_mm512_mul_ps(k.omb2, gi), gi));
  _mm512_store_ps(b.m + i, mi);
  _mm512_store_ps(b.v + i, vi);
  b.max1 = _mm512_max_ps(b.max1, _mm512_abs_ps(mi));
  b.max2 = _mm512_max_ps(b.max2, _mm512_abs_ps(vi));
  const __m512 denom = _mm512_add_ps(_mm512_sqrt_ps(vi), k.eps);
  __m512 pi =
      _mm512_add_ps(_mm512_loadu_ps(b.p + i), _mm512_mul_ps(k.step, _mm512_div_ps(mi, denom)));
  if (k.apply_decay) pi = _mm512_mul_ps(pi, k.decay);
  _mm512_storeu_ps(b.p + i, pi);
}

// How a block's old codes become its scratch m and v: table lookups by byte planes (VBMI, 64
// codes per step) or by word planes (AVX-512 BW, 32 codes per step).
enum class Decode { kBytePlanes, kWordPlanes };

// Consecutive blocks, software-pipelined: block b's update (sixteen lanes at a time, bound by
// the division and square root) runs interleaved with block b - 1's encoding (bound by the
// vector ALUs), so that each fills the other's idle units; the encoding needs the block's new
// absmax, which only its whole update gives, hence one block of lag. Blocks that are partial or
// have an all-zero moment run the two stages one after the other. Each block's codes
// are first decoded into its scratch by table lookups (kDecode). Every value goes through the same
// operations as in the scalar kernel, so the order changes no bit.
template <Decode kDecode>
MANTISSA_AVX512 void blocks_avx512(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                                   const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                                   float* absmax2, int64_t n) {
  if (n <= 0) return;
  if (!codecs_exact(maps)) {
    adam8bit_blocks_scalar(s, maps, p, g, q1, q2, absmax1, absmax2, n);
    return;
  }
  constexpr int64_t kBs = kAdam8bitBlockSize;
  alignas(64) float scratch[2][2][kBs];  // [block parity][m, v]
  const Encoder enc1(*maps.codec1), enc2(*maps.codec2);
  const UpdateConstants k(s);
  const __m512i order = pack_order();

  const int64_t blocks = (n + kBs - 1) / kBs;
  BlockInFlight cur, prev;
  for (int64_t b = 0; b <= blocks; ++b) {
    const bool updating = b<blocks, encoding = b> 0;
    if (updating) {
      const int64_t off = b * kBs;
      cur.index = b;
      cur.len = std::min(kBs, n - off);
      cur.p = p + off;
      cur.g = g + off;
      cur.q1 = q1 + off;
      cur.q2 = q2 + off;
      cur.m = scratch[b & 1][0];
      cur.v = scratch[b & 1][1];
      cur.a1 = absmax1[b];
      cur.a2 = absmax2[b];
      cur.max1 = cur.max2 = _mm512_setzero_ps();
      prefetch_block_after_next(b, blocks, off, p, g, q1, q2);
      // The table decode writes the code values where the block's m and v go (each lane reads
      // its own value before it writes the moment).
      if constexpr (kDecode == Decode::kBytePlanes) {
        decode_by_byte_planes(*maps.planes1, cur.q1, cur.m, cur.len);
        decode_by_byte_planes(*maps.planes2, cur.q2, cur.v, cur.len);
      } else if constexpr (kDecode == Decode::kWordPlanes) {
        decode_by_word_planes(*maps.words1, cur.q1, cur.m, cur.len);
        decode_by_word_planes(*maps.words2, cur.q2, cur.v, cur.len);
      }
    }
    const float inv1 = encoding && prev.new_a1 != 0.0f ? 1.0f / prev.new_a1 : 0.0f;
    const float inv2 = encoding && prev.new_a2 != 0.0f ? 1.0f / prev.new_a2 : 0.0f;
    const bool interleave = updating && encoding && cur.len == kBs && prev.len == kBs &&
                            inv1 != 0.0f && inv2 != 0.0f && std::isfinite(inv1);
    if (interleave) {
      __mmask16 redo1[kBs / 16], redo2[kBs / 16];
      const __m512 vinv1 = _mm512_set1_ps(inv1), vinv2 = _mm512_set1_ps(inv2);
#pragma GCC unroll 1
      for (int64_t j = 0; j < 4; ++j) {
        update16(k, cur, 64 * j);
        update16(k, cur, 64 * j + 16);
        encode64<true>(enc1, prev.m + 64 * j, vinv1, order, prev.q1 + 64 * j, &redo1[4 * j]);
        update16(k, cur, 64 * j + 32);
        update16(k, cur, 64 * j + 48);
        encode64<false>(enc2, prev.v + 64 * j, vinv2, order, prev.q2 + 64 * j, &redo2[4 * j]);
      }
      redo_lanes<true>(maps, prev.m, inv1, prev.q1, redo1, kBs / 16);
      redo_lanes<false>(maps, prev.v, inv2, prev.q2, redo2, kBs / 16);
    } else {
      if (updating)
        for (int64_t i = 0; i + 16 <= cur.len; i += 16) update16(k, cur, i);
      if (encoding) {
        if (inv1 == 0.0f)
          std::fill(prev.q1, prev.q1 + prev.len, maps.zero_index1);
        else
          encode_block<true>(maps, enc1, prev.m, inv1, prev.q1, prev.len);
        if (inv2 == 0.0f)
          std::fill(prev.q2, prev.q2 + prev.len, maps.zero_index2);
        else
          encode_block<false>(maps, enc2, prev.v, inv2, prev.q2, prev.len);
      }
    }
    if (updating) {
      // The moments are finite (the optimizer refuses non-finite gradients first), so the
      // reduction order does not matter.
      cur.new_a1 = _mm512_reduce_max_ps(cur.max1);
      cur.new_a2 = _mm512_reduce_max_ps(cur.max2);
      const int64_t done = cur.len - cur.len % 16;
      adam8bit_update_scalar(s, maps, cur.p, cur.g, cur.q1, cur.q2, cur.a1, cur.a2, cur.m, cur.v,
                             done, cur.len, &cur.new_a1, &cur.new_a2);
      absmax1[b] = cur.new_a1;
      absmax2[b] = cur.new_a2;
      prev = cur;
    }
  }
}

}  // namespace

void adam8bit_blocks_avx512(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                            const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                            float* absmax2, int64_t n) {
  blocks_avx512<Decode::kWordPlanes>(s, maps, p, g, q1, q2, absmax1, absmax2, n);
}

void adam8bit_blocks_avx512_vbmi(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                                 const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                                 float* absmax2, int64_t n) {
  blocks_avx512<Decode::kBytePlanes>(s, maps, p, g, q1, q2, absmax1, absmax2, n);
}

void adam8bit_block_avx512(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                           const float* g, uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                           int64_t n) {
  blocks_avx512<Decode::kWordPlanes>(s, maps, p, g, q1, q2, absmax1, absmax2,
                                     std::min<int64_t>(n, kAdam8bitBlockSize));
}

void adam8bit_block_avx512_vbmi(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                                const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                                float* absmax2, int64_t n) {
  blocks_avx512<Decode::kBytePlanes>(s, maps, p, g, q1, q2, absmax1, absmax2,
                                     std::min<int64_t>(n, kAdam8bitBlockSize));
}

void adam8bit_decode_avx512_vbmi(const Adam8bitMaps& maps, bool first_moment, const uint8_t* codes,
                                 float* out, int64_t n) {
  decode_by_byte_planes(first_moment ? *maps.planes1 : *maps.planes2, codes, out, n);
}

MANTISSA_AVX512 bool any_non_finite_avx512(const float* g, int64_t n) {
  // A float is finite exactly when its exponent field is not all ones; lanes of four vectors
  // are tested per step and their masks or-ed.
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  __mmask16 bad = 0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 64; k += 16) {
      const __m512i e = _mm512_and_si512(_mm512_loadu_si512(g + i + k), exponent);
      bad |= _mm512_cmpeq_epi32_mask(e, exponent);
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 in = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
    const __m512i e = _mm512_and_si512(_mm512_maskz_loadu_epi32(in, g + i), exponent);
    bad |= _mm512_mask_cmpeq_epi32_mask(in, e, exponent);
  }
  return bad != 0;
}

MANTISSA_AVX512 void adam8bit_encode_avx512(const Adam8bitMaps& maps, bool first_moment,
                                            const float* values, float inv, uint8_t* codes,
                                            int64_t n) {
  if (!codecs_exact(maps)) {
    adam8bit_encode_scalar(maps, first_moment, values, inv, codes, n);
    return;
  }
  const Encoder enc(first_moment ? *maps.codec1 : *maps.codec2);
  for (int64_t b = 0; b < n; b += kAdam8bitBlockSize) {
    const int64_t len = std::min(kAdam8bitBlockSize, n - b);
    if (first_moment)
      encode_block<true>(maps, enc, values + b, inv, codes + b, len);
    else
      encode_block<false>(maps, enc, values + b, inv, codes + b, len);
  }
}

void adam8bit_decode_avx512(const Adam8bitMaps& maps, bool first_moment, const uint8_t* codes,
                            float* out, int64_t n) {
  decode_by_word_planes(first_moment ? *maps.words1 : *maps.words2, codes, out, n);
}

}  // namespace mantissa::kernels::optim
