// AVX2 8-bit Adam kernels (adam8bit_kernels.h): the scalar kernels eight lanes at a time. The
// codes are decoded and encoded with register arithmetic (dynamic_map_codec.h), not table
// gathers: a lane that the fast encoder cannot decide (within eps of a midpoint, or out of
// [-1, 1]) is redone with the exact table afterwards. Compiled with -ffp-contract=off
// (CMakeLists.txt), so the only fused multiply-adds are the explicit ones of the codec (the
// decoder's reproduce torch's linspace; the encoder's are modelled by std::fma in
// DynamicMapCodec's checks), and the update's arithmetic rounds as the scalar kernel's does:
// the bits equal the scalar kernels'.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/optim/adam8bit_kernels.h"
#include "kernels/cpu/quant/blockwise_dynamic.h"

#define MANTISSA_AVX2 __attribute__((target("avx2,fma")))
#define MANTISSA_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline))

namespace mantissa::kernels::optim {
namespace {

MANTISSA_AVX2 inline __m256 abs_ps(__m256 x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }

MANTISSA_AVX2 inline float hmax(__m256 x) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, x);
  float r = lanes[0];
  for (int i = 1; i < 8; ++i) r = std::max(r, lanes[i]);
  return r;
}

// Eight codes to eight int32 lanes.
MANTISSA_AVX2 inline __m256i load_codes(const uint8_t* q) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
}

// The low byte of each int32 lane, stored as eight bytes.
MANTISSA_AVX2 inline void store_codes(uint8_t* q, __m256i idx) {
  const __m256i pick =
      _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(idx, pick),
                                                     _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(q), _mm256_castsi256_si128(packed));
}

// Four vectors of eight codes (0..255) as 32 bytes in lane order.
MANTISSA_AVX2 inline void store_codes32(uint8_t* q, __m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i words = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
  const __m256i ordered =
      _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
}

// The codec's lane arithmetic is one long dependent chain per vector (~45 cycles to encode,
// ~30 to decode), longer than Zen 3's out-of-order window can hide when vectors are processed
// one after another: the encoder ran at ~22 cycles per eight values. So every stage below is
// applied to U vectors in lockstep (U independent chains side by side in program order); the
// arithmetic of each lane, and so every bit, is unchanged.
#define MANTISSA_LANES_OF(n) _Pragma("GCC unroll 8") for (int u = 0; u < (n); ++u)
#define MANTISSA_LANES MANTISSA_LANES_OF(U)
// Vectors per lockstep group in the update (Zen 3, 10M-parameter step: 2 and 8 were 6-12% and
// 3% slower than 4; one thread over 1M parameters in L3: 2, 3 and 4 gave 2.78, 2.65-2.87 and
// 2.43 ns per parameter; finishing m before decoding v, to spill less, 2.60).
constexpr int kUpdateLanes = 4;

// DynamicMapCodec::decode on U x eight lanes; j is |q - 127| (signed) or q + 1 (unsigned).
struct Decoder {
  __m256 step, scale, c_lo, c_hi, half, one;
  __m256i exponent, slot_bias;
  MANTISSA_AVX2 explicit Decoder(const DynamicMapCodec& c)
      : step(_mm256_loadu_ps(c.dec_step)),
        scale(_mm256_loadu_ps(c.dec_scale)),
        c_lo(_mm256_set1_ps(c.c_lo)),
        c_hi(_mm256_set1_ps(c.c_hi)),
        half(_mm256_set1_ps(0.5f)),
        one(_mm256_set1_ps(1.0f)),
        exponent(_mm256_set1_epi32(static_cast<int>(0xff800000u))),
        slot_bias(_mm256_set1_epi32(c.is_signed ? 126 : 127)) {}

  // The magnitude for j (slot from j's float exponent; the signed map's j = 0 saturates to
  // slot 0, which decodes to +0).
  template <int U, bool kSaturate>
  MANTISSA_AVX2_INLINE void magnitude(const __m256i (&j)[U], __m256 (&out)[U]) const {
    __m256 fj[U], p2[U], st[U], sc[U], b0[U], b1[U];
    __m256i slot[U];
    MANTISSA_LANES fj[u] = _mm256_cvtepi32_ps(j[u]);
    MANTISSA_LANES {
      const __m256i fb = _mm256_castps_si256(fj[u]);
      p2[u] = _mm256_castsi256_ps(_mm256_and_si256(fb, exponent));
      const __m256i e = _mm256_srli_epi32(fb, 23);
      slot[u] = kSaturate ? _mm256_subs_epu16(e, slot_bias) : _mm256_sub_epi32(e, slot_bias);
    }
    MANTISSA_LANES {
      st[u] = _mm256_permutevar8x32_ps(step, slot[u]);
      sc[u] = _mm256_permutevar8x32_ps(scale, slot[u]);
    }
    MANTISSA_LANES {
      const __m256 k0 = _mm256_sub_ps(fj[u], p2[u]);
      const __m256 h = _mm256_mul_ps(p2[u], half);
      const __m256 k1 = _mm256_add_ps(k0, one);
      const __m256 c0 = _mm256_blendv_ps(c_hi, c_lo, _mm256_cmp_ps(k0, h, _CMP_LT_OQ));
      const __m256 c1 = _mm256_blendv_ps(c_hi, c_lo, _mm256_cmp_ps(k1, h, _CMP_LT_OQ));
      b0[u] = _mm256_fmadd_ps(st[u], k0, c0);
      b1[u] = _mm256_fmadd_ps(st[u], k1, c1);
    }
    MANTISSA_LANES out[u] = _mm256_mul_ps(_mm256_add_ps(b0[u], b1[u]), sc[u]);  // sc = S_d / 2
  }

  template <int U>
  MANTISSA_AVX2_INLINE void signed_codes(const __m256i (&q)[U], __m256 (&out)[U]) const {
    __m256i j[U], aj[U];
    MANTISSA_LANES {
      j[u] = _mm256_sub_epi32(q[u], _mm256_set1_epi32(127));
      aj[u] = _mm256_abs_epi32(j[u]);
    }
    magnitude<U, true>(aj, out);
    MANTISSA_LANES {
      const __m256 v =
          _mm256_or_ps(out[u], _mm256_castsi256_ps(_mm256_and_si256(
                                   j[u], _mm256_set1_epi32(static_cast<int>(0x80000000u)))));
      out[u] = _mm256_blendv_ps(
          v, one, _mm256_castsi256_ps(_mm256_cmpeq_epi32(q[u], _mm256_set1_epi32(255))));
    }
  }

  template <int U>
  MANTISSA_AVX2_INLINE void unsigned_codes(const __m256i (&q)[U], __m256 (&out)[U]) const {
    __m256i j[U];
    MANTISSA_LANES j[u] = _mm256_add_epi32(q[u], _mm256_set1_epi32(1));
    magnitude<U, false>(j, out);
    MANTISSA_LANES out[u] = _mm256_blendv_ps(
        out[u], one, _mm256_castsi256_ps(_mm256_cmpeq_epi32(q[u], _mm256_set1_epi32(255))));
  }

  template <int U>
  MANTISSA_AVX2_INLINE void codes(bool is_signed, const __m256i (&q)[U], __m256 (&out)[U]) const {
    if (is_signed)
      signed_codes<U>(q, out);
    else
      unsigned_codes<U>(q, out);
  }
};

// DynamicMapCodec::encode_fast on U x eight lanes: the codes, and all-ones lanes in redo where
// the exact path must decide.
template <bool kSigned>
struct Encoder {
  __m256 log_mul, log_add, a_tab, b_tab, hi_tab, eps, zero;
  __m256i thr_tab, abs_mask, one_bits, above_one;
  MANTISSA_AVX2 explicit Encoder(const DynamicMapCodec& c)
      : log_mul(_mm256_set1_ps(c.log_mul)),
        log_add(_mm256_set1_ps(c.log_add)),
        a_tab(_mm256_loadu_ps(c.enc_a)),
        b_tab(_mm256_loadu_ps(c.enc_b)),
        hi_tab(_mm256_loadu_ps(c.enc_hi)),
        eps(_mm256_set1_ps(c.eps)),
        zero(_mm256_setzero_ps()),
        thr_tab(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.next_threshold))),
        abs_mask(_mm256_set1_epi32(0x7fffffff)),
        one_bits(_mm256_set1_epi32(0x3f800000)),
        above_one(_mm256_set1_epi32(0x3f800001)) {}

  template <int U>
  MANTISSA_AVX2_INLINE void encode(const __m256 (&x)[U], __m256i (&code)[U],
                                   __m256i (&redo)[U]) const {
    __m256i bits[U], abits[U], r[U], thr[U];
    __m256 t[U], whole[U];
    MANTISSA_LANES {
      bits[u] = _mm256_castps_si256(x[u]);
      abits[u] = _mm256_and_si256(bits[u], abs_mask);
    }
    MANTISSA_LANES {
      const __m256 l =
          _mm256_max_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(abits[u]), log_mul, log_add), zero);
      r[u] = _mm256_cvttps_epi32(l);
    }
    MANTISSA_LANES {
      thr[u] = _mm256_permutevar8x32_epi32(thr_tab, r[u]);
      r[u] = _mm256_sub_epi32(r[u], _mm256_cmpgt_epi32(abits[u], thr[u]));
    }
    MANTISSA_LANES {
      const __m256 a = _mm256_castsi256_ps(abits[u]);
      t[u] = _mm256_min_ps(_mm256_fmsub_ps(a, _mm256_permutevar8x32_ps(a_tab, r[u]),
                                           _mm256_permutevar8x32_ps(b_tab, r[u])),
                           _mm256_permutevar8x32_ps(hi_tab, r[u]));
    }
    MANTISSA_LANES whole[u] = _mm256_round_ps(t[u], _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    MANTISSA_LANES {
      redo[u] = _mm256_castps_si256(_mm256_cmp_ps(_mm256_sub_ps(t[u], whole[u]), eps, _CMP_LT_OQ));
      const __m256i c = _mm256_cvttps_epi32(whole[u]);
      if constexpr (kSigned) {
        redo[u] = _mm256_or_si256(redo[u], _mm256_or_si256(_mm256_cmpgt_epi32(abits[u], one_bits),
                                                           _mm256_cmpeq_epi32(abits[u], thr[u])));
        const __m256i base = _mm256_set1_epi32(127);
        const __m256i up = _mm256_add_epi32(base, c);
        const __m256i down = _mm256_sub_epi32(
            base, _mm256_min_epi32(_mm256_max_epi32(c, _mm256_set1_epi32(1)), base));
        code[u] = _mm256_blendv_epi8(up, down, _mm256_srai_epi32(bits[u], 31));
      } else {
        // Unsigned: x must be in [+0, 1] (a negative x, -0 included, takes the exact path): its
        // bits as unsigned at most those of 1.0.
        redo[u] = _mm256_or_si256(
            redo[u], _mm256_cmpeq_epi32(_mm256_min_epu32(bits[u], above_one), above_one));
        code[u] = c;
      }
    }
  }
};

// The scalar kernel's encoding of one value (the exact path).
inline uint8_t encode_signed_exact(const Adam8bitMaps& maps, float m, float inv) {
  int q = maps.index1->index(m * inv);
  if ((q < maps.nonnegative_from1) != std::signbit(m)) q += m > 0.0f ? 1 : -1;
  return static_cast<uint8_t>(q);
}

// Encodes vals[0..n) * inv into q with the codec (n <= 256, vals 32-byte aligned), 32 values
// per step. Undecided lanes are only noted in the hot loop (one byte of lane bits per eight
// values, no branch) and redone exactly at the end.
template <bool kSigned>
struct BlockEncoder {
  const Adam8bitMaps& maps;
  const Encoder<kSigned>& enc;
  const float* vals;
  float inv;
  uint8_t* q;

  uint8_t exact(int64_t i) const {
    return kSigned ? encode_signed_exact(maps, vals[i], inv) : maps.index2->index(vals[i] * inv);
  }

  // Values [j, j + 8U): the codes stored, the undecided lanes' bits returned (bit k: value
  // j + k). Redone only after the whole block, so the hot loop has no branch.
  template <int U>
  MANTISSA_AVX2_INLINE uint32_t encode_lanes(int64_t j) const {
    __m256 x[U];
    __m256i c[U], redo[U];
    const __m256 vinv = _mm256_set1_ps(inv);
    MANTISSA_LANES x[u] = _mm256_mul_ps(_mm256_load_ps(vals + j + 8 * u), vinv);
    enc.template encode<U>(x, c, redo);
    uint32_t bits = 0;
    MANTISSA_LANES bits |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(redo[u])))
                           << (8 * u);
    if constexpr (U == 4)
      store_codes32(q + j, c[0], c[1], c[2], c[3]);
    else
      MANTISSA_LANES store_codes(q + j + 8 * u, c[u]);
    return bits;
  }

  // Values [0, n) (n <= 256), then the exact redo of every undecided lane.
  MANTISSA_AVX2 void finish(int64_t n) const {
    uint32_t redo[kAdam8bitBlockSize / 32] = {};
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) redo[j / 32] = encode_lanes<4>(j);
    for (; j + 8 <= n; j += 8) redo[j / 32] |= encode_lanes<1>(j) << (j % 32);
    for (; j < n; ++j) q[j] = exact(j);
    uint32_t any = 0;
    for (uint32_t r : redo) any |= r;
    if (any == 0) return;
    for (int64_t k = 0; k < kAdam8bitBlockSize / 32; ++k)
      for (uint32_t lanes = redo[k]; lanes != 0; lanes &= lanes - 1)
        q[32 * k + __builtin_ctz(lanes)] = exact(32 * k + __builtin_ctz(lanes));
  }
};

// The update of one block's values [i, i + 8U) (decode, moments into the block's scratch m, v,
// running absmax, parameter), U vectors in lockstep as the codec's stages are.
struct BlockUpdate {
  const Decoder& dec1;
  const Decoder& dec2;
  __m256 b1, omb1, b2, omb2, step, eps, decay;
  bool apply_decay;

  MANTISSA_AVX2 BlockUpdate(const Adam8bitScalars& s, const Decoder& d1, const Decoder& d2)
      : dec1(d1),
        dec2(d2),
        b1(_mm256_set1_ps(s.beta1)),
        omb1(_mm256_set1_ps(s.one_minus_beta1)),
        b2(_mm256_set1_ps(s.beta2)),
        omb2(_mm256_set1_ps(s.one_minus_beta2)),
        step(_mm256_set1_ps(s.step_size)),
        eps(_mm256_set1_ps(s.eps_scaled)),
        decay(_mm256_set1_ps(s.decay)),
        apply_decay(s.apply_decay) {}

  template <int U>
  MANTISSA_AVX2_INLINE void run(int64_t i, float* p, const float* g, const uint8_t* q1,
                                const uint8_t* q2, __m256 va1, __m256 va2, float* m, float* v,
                                __m256& max1, __m256& max2) const {
    __m256i k1[U], k2[U];
    __m256 c1[U], c2[U], mi[U], vi[U], pi[U];
    MANTISSA_LANES {
      k1[u] = load_codes(q1 + i + 8 * u);
      k2[u] = load_codes(q2 + i + 8 * u);
    }
    dec1.signed_codes<U>(k1, c1);
    dec2.unsigned_codes<U>(k2, c2);
    MANTISSA_LANES {
      const __m256 gi = _mm256_loadu_ps(g + i + 8 * u);
      mi[u] = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(c1[u], va1), b1), _mm256_mul_ps(omb1, gi));
      vi[u] = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(c2[u], va2), b2),
                            _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
      _mm256_store_ps(m + i + 8 * u, mi[u]);
      _mm256_store_ps(v + i + 8 * u, vi[u]);
      max1 = _mm256_max_ps(max1, abs_ps(mi[u]));
      max2 = _mm256_max_ps(max2, abs_ps(vi[u]));
    }
    MANTISSA_LANES pi[u] = _mm256_div_ps(mi[u], _mm256_add_ps(_mm256_sqrt_ps(vi[u]), eps));
    MANTISSA_LANES {
      pi[u] = _mm256_add_ps(_mm256_loadu_ps(p + i + 8 * u), _mm256_mul_ps(step, pi[u]));
      if (apply_decay) pi[u] = _mm256_mul_ps(pi[u], decay);
      _mm256_storeu_ps(p + i + 8 * u, pi[u]);
    }
  }
};

}  // namespace

// Consecutive blocks, each in two passes over its 256 values: decode, update and absmax; then
// encode both moments from the block's scratch copy (in L1). (Interleaving one block's update
// with the previous block's encoding was measured no faster on Zen 3.)
MANTISSA_AVX2 void adam8bit_blocks_avx2(const Adam8bitScalars& s, const Adam8bitMaps& maps,
                                        float* p, const float* g, uint8_t* q1, uint8_t* q2,
                                        float* absmax1, float* absmax2, int64_t n) {
  if (n <= 0) return;
  if (!maps.index1->exact || !maps.index2->exact || !maps.codec1->exact || !maps.codec2->exact) {
    adam8bit_blocks_scalar(s, maps, p, g, q1, q2, absmax1, absmax2, n);
    return;
  }
  constexpr int64_t kBs = kAdam8bitBlockSize;
  alignas(32) float m[kBs];
  alignas(32) float v[kBs];
  const Decoder dec1(*maps.codec1), dec2(*maps.codec2);
  const Encoder<true> enc1(*maps.codec1);
  const Encoder<false> enc2(*maps.codec2);
  const BlockUpdate update(s, dec1, dec2);

  const int64_t blocks = (n + kBs - 1) / kBs;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t off = b * kBs, len = std::min(kBs, n - off);
    float* pb = p + off;
    const float* gb = g + off;
    const uint8_t* q1b = q1 + off;
    const uint8_t* q2b = q2 + off;
    prefetch_block_after_next(b, blocks, off, p, g, q1, q2);
    const float a1 = absmax1[b], a2 = absmax2[b];
    const __m256 va1 = _mm256_set1_ps(a1), va2 = _mm256_set1_ps(a2);
    __m256 max1 = _mm256_setzero_ps(), max2 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 * kUpdateLanes <= len; i += 8 * kUpdateLanes)
      update.run<kUpdateLanes>(i, pb, gb, q1b, q2b, va1, va2, m, v, max1, max2);
    for (; i + 8 <= len; i += 8) update.run<1>(i, pb, gb, q1b, q2b, va1, va2, m, v, max1, max2);
    float new_a1 = hmax(max1), new_a2 = hmax(max2);
    adam8bit_update_scalar(s, maps, pb, gb, q1b, q2b, a1, a2, m, v, i, len, &new_a1, &new_a2);
    absmax1[b] = new_a1;
    absmax2[b] = new_a2;
    if (new_a1 == 0.0f)
      std::fill(q1 + off, q1 + off + len, maps.zero_index1);
    else
      BlockEncoder<true>{maps, enc1, m, 1.0f / new_a1, q1 + off}.finish(len);
    if (new_a2 == 0.0f)
      std::fill(q2 + off, q2 + off + len, maps.zero_index2);
    else
      BlockEncoder<false>{maps, enc2, v, 1.0f / new_a2, q2 + off}.finish(len);
  }
}

void adam8bit_block_avx2(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                         const float* g, uint8_t* q1, uint8_t* q2, float* absmax1, float* absmax2,
                         int64_t n) {
  adam8bit_blocks_avx2(s, maps, p, g, q1, q2, absmax1, absmax2,
                       std::min<int64_t>(n, kAdam8bitBlockSize));
}

MANTISSA_AVX2 void adam8bit_encode_avx2(const Adam8bitMaps& maps, bool first_moment,
                                        const float* values, float inv, uint8_t* codes, int64_t n) {
  if (!maps.index1->exact || !maps.index2->exact || !maps.codec1->exact || !maps.codec2->exact) {
    adam8bit_encode_scalar(maps, first_moment, values, inv, codes, n);
    return;
  }
  const Encoder<true> enc1(*maps.codec1);
  const Encoder<false> enc2(*maps.codec2);
  alignas(32) float buf[kAdam8bitBlockSize];
  for (int64_t b = 0; b < n; b += kAdam8bitBlockSize) {
    const int64_t len = std::min(kAdam8bitBlockSize, n - b);
    std::copy(values + b, values + b + len, buf);
    if (first_moment)
      BlockEncoder<true>{maps, enc1, buf, inv, codes + b}.finish(len);
    else
      BlockEncoder<false>{maps, enc2, buf, inv, codes + b}.finish(len);
  }
}

MANTISSA_AVX2 void adam8bit_decode_avx2(const Adam8bitMaps& maps, bool first_moment,
                                        const uint8_t* codes, float* out, int64_t n) {
  const DynamicMapCodec& codec = first_moment ? *maps.codec1 : *maps.codec2;
  const float* code = first_moment ? maps.code1 : maps.code2;
  int64_t i = 0;
  if (codec.exact) {
    const Decoder dec(codec);
    for (; i + 32 <= n; i += 32) {
      __m256i q[4];
      __m256 x[4];
      MANTISSA_LANES_OF(4) q[u] = load_codes(codes + i + 8 * u);
      dec.codes<4>(first_moment, q, x);
      MANTISSA_LANES_OF(4) _mm256_storeu_ps(out + i + 8 * u, x[u]);
    }
    for (; i + 8 <= n; i += 8) {
      const __m256i q[1] = {load_codes(codes + i)};
      __m256 x[1];
      dec.codes<1>(first_moment, q, x);
      _mm256_storeu_ps(out + i, x[0]);
    }
  }
  for (; i < n; ++i) out[i] = code[codes[i]];
}

MANTISSA_AVX2 bool any_non_finite_avx2(const float* g, int64_t n) {
  // A float is finite exactly when its exponent field is not all ones.
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i all_ones = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i e = _mm256_cmpeq_epi32(
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + i)), exponent),
        exponent);
    for (int k = 8; k < 32; k += 8)
      e = _mm256_or_si256(
          e, _mm256_cmpeq_epi32(
                 _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + i + k)),
                                  exponent),
                 exponent));
    all_ones = _mm256_or_si256(all_ones, e);
  }
  return !_mm256_testz_si256(all_ones, all_ones) || any_non_finite_scalar(g + i, n - i);
}

MANTISSA_AVX2 void adam32_span_avx2(const Adam8bitScalars& s, float* p, const float* g, float* m,
                                    float* v, int64_t n) {
  const __m256 b1 = _mm256_set1_ps(s.beta1), omb1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 b2 = _mm256_set1_ps(s.beta2), omb2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 step = _mm256_set1_ps(s.step_size), eps = _mm256_set1_ps(s.eps_scaled);
  const __m256 decay = _mm256_set1_ps(s.decay);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i);
    const __m256 mi =
        _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(omb1, gi));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2),
                                    _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(vi), eps);
    __m256 pi =
        _mm256_add_ps(_mm256_loadu_ps(p + i), _mm256_mul_ps(step, _mm256_div_ps(mi, denom)));
    if (s.apply_decay) pi = _mm256_mul_ps(pi, decay);
    _mm256_storeu_ps(p + i, pi);
  }
  if (i < n) adam32_span_scalar(s, p + i, g + i, m + i, v + i, n - i);
}

}  // namespace mantissa::kernels::optim
