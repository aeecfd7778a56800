// AVX2 8-bit Adam kernels (adam8bit_kernels.h): the scalar kernels eight lanes at a time. The
// old codes become map values through plain scalar table reads (interleaved with the vector
// work, see adam8bit_blocks_avx2); the new codes are encoded with register arithmetic
// (dynamic_map_codec.h), not table gathers: a lane that the fast encoder cannot decide (within
// eps of a midpoint, or on a region edge) is redone with the exact table afterwards. Compiled with
// -ffp-contract=off (CMakeLists.txt), so the only fused multiply-adds are the encoder's explicit
// ones (modelled by std::fma in DynamicMapCodec's checks), and the update's arithmetic rounds
// as the scalar kernel's does: the bits equal the scalar kernels'.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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

// The encoder's lane arithmetic is one long dependent chain per vector (~45 cycles), longer than
// Zen 3's out-of-order window can hide when vectors are processed one after another: the encoder
// ran at ~22 cycles per eight values. So every stage below is applied to U vectors in lockstep (U
// independent chains side by side in program order); the arithmetic of each lane, and so every bit,
// is unchanged.
#define MANTISSA_LANES_OF(n) _Pragma("GCC unroll 8") for (int u = 0; u < (n); ++u)
#define MANTISSA_LANES MANTISSA_LANES_OF(U)
// Vectors per lockstep group in the update (Zen 3, 10M-parameter step: 2 and 8 were 6-12% and
// 3% slower than 4; one thread over 1M parameters in L3: 2, 3 and 4 gave 2.78, 2.65-2.87 and
// 2.43 ns per parameter; finishing m before decoding v, to spill less, 2.60).
constexpr int kUpdateLanes = 4;

// DynamicMapCodec::encode_fast on 4 x eight lanes: the 32 codes, and all-ones lanes in redo
// where the exact path must decide.
template <bool kSigned>
struct Encoder {
  __m256 a_tab, b_tab, eps;
  __m256i guess_tab, guess_base, thr_tab, cap_tab, abs_mask, one_bits, zero;
  MANTISSA_AVX2 explicit Encoder(const DynamicMapCodec& c)
      : a_tab(_mm256_loadu_ps(c.enc_a)),
        b_tab(_mm256_loadu_ps(c.enc_b)),
        eps(_mm256_set1_ps(c.eps)),
        guess_tab(_mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(c.guess)))),
        guess_base(_mm256_set1_epi32(DynamicMapCodec::kGuessBase)),
        thr_tab(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.next_threshold))),
        cap_tab(cap_bytes(c)),
        abs_mask(_mm256_set1_epi32(0x7fffffff)),
        one_bits(_mm256_set1_epi32(0x3f800000)),
        zero(_mm256_setzero_si256()) {}

  // The regions' caps (<= 128) as bytes 0..7 of both 128-bit halves, for a byte shuffle.
  MANTISSA_AVX2 static __m256i cap_bytes(const DynamicMapCodec& c) {
    alignas(16) uint8_t b[16] = {};
    for (int r = 0; r < 8; ++r) b[r] = static_cast<uint8_t>(c.enc_cap[r]);
    return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(b)));
  }

  // Four vectors of int32 as 32 bytes, 128-bit lane interleaved (encode32's final permute puts
  // them in order): with unsigned saturation (counts and regions; an undecided lane's negative
  // count becomes 0) or signed (keeps each lane's sign).
  template <bool kSignedSaturation>
  MANTISSA_AVX2_INLINE static __m256i pack_bytes(__m256i a, __m256i b, __m256i c, __m256i d) {
    if constexpr (kSignedSaturation)
      return _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    else
      return _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
  }

  // Per vector of eight: the clamp, the region, T and its truncation; per 32 values, on the
  // packed bytes: the region's cap and (signed map) the sign, a few operations per 32 values
  // instead of per 8.
  MANTISSA_AVX2_INLINE __m256i encode32(const __m256 (&x)[4], __m256i (&redo)[4]) const {
    __m256i abits[4], r[4], thr[4], c[4];
    __m256 t[4];
    // Signs and regions are packed as soon as they are known: one register each stays live
    // through the rest rather than four (the encoder and the decode reads use all 16).
    __m256i sign = zero;
    if constexpr (kSigned)
      sign = pack_bytes<true>(_mm256_castps_si256(x[0]), _mm256_castps_si256(x[1]),
                              _mm256_castps_si256(x[2]), _mm256_castps_si256(x[3]));
    MANTISSA_LANES_OF(4) {
      // |x| (signed) or max(x, +0) (unsigned), at most 1.0: for the rest the exact answer is
      // that of +-1.0 or +0, so no lane needs a range check.
      const __m256i bits = _mm256_castps_si256(x[u]);
      abits[u] = _mm256_min_epi32(
          kSigned ? _mm256_and_si256(bits, abs_mask) : _mm256_max_epi32(bits, zero), one_bits);
    }
    MANTISSA_LANES_OF(4) {
      // The guess table by the exponent's top 7 bits (a byte shuffle; a negative index, for a
      // below 2^-29, reads 0), then one compare with the next region's edge.
      const __m256i r0 = _mm256_shuffle_epi8(
          guess_tab, _mm256_sub_epi32(_mm256_srli_epi32(abits[u], 24), guess_base));
      thr[u] = _mm256_permutevar8x32_epi32(thr_tab, r0);
      r[u] = _mm256_sub_epi32(r0, _mm256_cmpgt_epi32(abits[u], thr[u]));
    }
    const __m256i caps = _mm256_shuffle_epi8(cap_tab, pack_bytes<false>(r[0], r[1], r[2], r[3]));
    MANTISSA_LANES_OF(4) {
      t[u] = _mm256_fmsub_ps(_mm256_castsi256_ps(abits[u]), _mm256_permutevar8x32_ps(a_tab, r[u]),
                             _mm256_permutevar8x32_ps(b_tab, r[u]));
    }
    MANTISSA_LANES_OF(4) {
      // t >= 0 wherever the fast path is used, so truncation is floor: the count, and the
      // fraction from converting it back (no VROUNDPS, two uops on Intel).
      c[u] = _mm256_cvttps_epi32(t[u]);
      redo[u] = _mm256_castps_si256(
          _mm256_cmp_ps(_mm256_sub_ps(t[u], _mm256_cvtepi32_ps(c[u])), eps, _CMP_LT_OQ));
      if constexpr (kSigned)
        redo[u] = _mm256_or_si256(redo[u], _mm256_cmpeq_epi32(abits[u], thr[u]));
    }
    __m256i codes = _mm256_min_epu8(pack_bytes<false>(c[0], c[1], c[2], c[3]), caps);
    if constexpr (kSigned) {
      // 127 + c, or 127 - max(c, 1) where x is negative (a negative x never gets the +0 entry;
      // c = 128 saturates to 0).
      const __m256i base = _mm256_set1_epi8(127);
      const __m256i up = _mm256_add_epi8(codes, base);
      const __m256i down = _mm256_subs_epu8(base, _mm256_max_epu8(codes, _mm256_set1_epi8(1)));
      codes = _mm256_blendv_epi8(up, down, sign);
    }
    return _mm256_permutevar8x32_epi32(codes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
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
    __m256i redo[U];
    const __m256 vinv = _mm256_set1_ps(inv);
    MANTISSA_LANES x[u] = _mm256_mul_ps(_mm256_load_ps(vals + j + 8 * u), vinv);
    if constexpr (U == 4) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j), enc.encode32(x, redo));
    } else {
      // Eight values (tails): one vector four times, the first eight codes.
      static_assert(U == 1);
      const __m256 x4[4] = {x[0], x[0], x[0], x[0]};
      __m256i redo4[4];
      _mm_storel_epi64(reinterpret_cast<__m128i*>(q + j),
                       _mm256_castsi256_si128(enc.encode32(x4, redo4)));
      redo[0] = redo4[0];
    }
    uint32_t bits = 0;
    MANTISSA_LANES bits |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(redo[u])))
                           << (8 * u);
    return bits;
  }

  // Whether the fast encoder may run: the signed map's sign comes from x = m * inv, which has
  // m's sign unless inv is infinite (absmax about 2^-128 or less) and m = 0: x is then a NaN.
  bool fast() const { return !kSigned || std::isfinite(inv); }

  // Values [0, n) (n <= 256), then the exact redo of every undecided lane.
  MANTISSA_AVX2 void finish(int64_t n) const {
    if (!fast()) {
      for (int64_t j = 0; j < n; ++j) q[j] = exact(j);
      return;
    }
    uint32_t redo[kRedoWords] = {};
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) redo[j / 32] = encode_lanes<4>(j);
    for (; j + 8 <= n; j += 8) redo[j / 32] |= encode_lanes<1>(j) << (j % 32);
    for (; j < n; ++j) q[j] = exact(j);
    redo_lanes(redo);
  }

  static constexpr int kRedoWords = kAdam8bitBlockSize / 32;

  // The exact encoding of every lane the fast pass left undecided.
  void redo_lanes(const uint32_t (&redo)[kRedoWords]) const {
    uint32_t any = 0;
    for (uint32_t r : redo) any |= r;
    if (any == 0) return;
    for (int64_t k = 0; k < kRedoWords; ++k)
      for (uint32_t lanes = redo[k]; lanes != 0; lanes &= lanes - 1)
        q[32 * k + __builtin_ctz(lanes)] = exact(32 * k + __builtin_ctz(lanes));
  }
};

// Codes to their map values with plain loads and stores.
// These run on the load/store ports, which the vector encoders leave mostly idle, so the
// blocks kernel does them interleaved with the previous block's encoding; the file is built with
// -fno-tree-vectorize so that they stay scalar (an AVX2 gather costs ~10 cycles on Zen 3).
MANTISSA_AVX2_INLINE inline void copy_code_values(const float* code, const uint8_t* q, float* out,
                                                  int n) {
  for (int k = 0; k < n; ++k) out[k] = code[q[k]];
}
template <int N>
MANTISSA_AVX2_INLINE inline void copy_code_values(const float* code, const uint8_t* q, float* out) {
  static_assert(N % 8 == 0);
  _Pragma("GCC unroll 8") for (int k = 0; k < N; k += 8) {
    uint64_t eight;
    std::memcpy(&eight, q + k, 8);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; ++j) {
      uint32_t bits;
      std::memcpy(&bits, code + ((eight >> (8 * j)) & 0xff), 4);
      std::memcpy(out + k + j, &bits, 4);
    }
  }
}

// The update of one block's values [i, i + 8U): the old moments' map values are read from m, v
// (copied there from the codes), the new moments written back over them; running absmax,
// parameter. U vectors in lockstep, as the encoders' stages are.
struct BlockUpdate {
  __m256 b1, omb1, b2, omb2, step, eps, decay;
  bool apply_decay;

  MANTISSA_AVX2 explicit BlockUpdate(const Adam8bitScalars& s)
      : b1(_mm256_set1_ps(s.beta1)),
        omb1(_mm256_set1_ps(s.one_minus_beta1)),
        b2(_mm256_set1_ps(s.beta2)),
        omb2(_mm256_set1_ps(s.one_minus_beta2)),
        step(_mm256_set1_ps(s.step_size)),
        eps(_mm256_set1_ps(s.eps_scaled)),
        decay(_mm256_set1_ps(s.decay)),
        apply_decay(s.apply_decay) {}

  template <int U>
  MANTISSA_AVX2_INLINE void run(int64_t i, float* p, const float* g, __m256 va1, __m256 va2,
                                float* m, float* v, __m256& max1, __m256& max2) const {
    __m256 c1[U], c2[U], mi[U], vi[U], pi[U];
    MANTISSA_LANES {
      c1[u] = _mm256_load_ps(m + i + 8 * u);
      c2[u] = _mm256_load_ps(v + i + 8 * u);
    }
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

// Consecutive blocks. Each block: its old moments' map values (copied from the codes while the
// previous block was encoded) are updated with the parameter and the block's absmax, into the
// block's scratch (in L1); then both moments are encoded from there, 32 values of each per step,
// and the next block's codes are copied to map values in the same steps (integer loads and
// stores beside the encoders' vector arithmetic).
MANTISSA_AVX2 void adam8bit_blocks_avx2(const Adam8bitScalars& s, const Adam8bitMaps& maps,
                                        float* p, const float* g, uint8_t* q1, uint8_t* q2,
                                        float* absmax1, float* absmax2, int64_t n) {
  if (n <= 0) return;
  if (!maps.index1->exact || !maps.index2->exact || !maps.codec1->exact || !maps.codec2->exact) {
    adam8bit_blocks_scalar(s, maps, p, g, q1, q2, absmax1, absmax2, n);
    return;
  }
  constexpr int64_t kBs = kAdam8bitBlockSize;
  // Two scratch pairs: the block being updated and encoded, and the next block's map values.
  alignas(32) float scratch[2][2][kBs];
  const Encoder<true> enc1(*maps.codec1);
  const Encoder<false> enc2(*maps.codec2);
  const BlockUpdate update(s);

  const int64_t blocks = (n + kBs - 1) / kBs;
  copy_code_values(maps.code1, q1, scratch[0][0], static_cast<int>(std::min(kBs, n)));
  copy_code_values(maps.code2, q2, scratch[0][1], static_cast<int>(std::min(kBs, n)));
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t off = b * kBs, len = std::min(kBs, n - off);
    const int64_t next_len = b + 1 < blocks ? std::min(kBs, n - off - kBs) : 0;
    float* m = scratch[b & 1][0];
    float* v = scratch[b & 1][1];
    float* next_m = scratch[(b + 1) & 1][0];
    float* next_v = scratch[(b + 1) & 1][1];
    float* pb = p + off;
    const float* gb = g + off;
    prefetch_block_after_next(b, blocks, off, p, g, q1, q2);
    const float a1 = absmax1[b], a2 = absmax2[b];
    const __m256 va1 = _mm256_set1_ps(a1), va2 = _mm256_set1_ps(a2);
    __m256 max1 = _mm256_setzero_ps(), max2 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 * kUpdateLanes <= len; i += 8 * kUpdateLanes)
      update.run<kUpdateLanes>(i, pb, gb, va1, va2, m, v, max1, max2);
    for (; i + 8 <= len; i += 8) update.run<1>(i, pb, gb, va1, va2, m, v, max1, max2);
    float new_a1 = hmax(max1), new_a2 = hmax(max2);
    adam8bit_update_scalar(s, maps, pb, gb, q1 + off, q2 + off, a1, a2, m, v, i, len, &new_a1,
                           &new_a2);
    absmax1[b] = new_a1;
    absmax2[b] = new_a2;
    const BlockEncoder<true> e1{maps, enc1, m, new_a1 == 0.0f ? 0.0f : 1.0f / new_a1, q1 + off};
    const BlockEncoder<false> e2{maps, enc2, v, new_a2 == 0.0f ? 0.0f : 1.0f / new_a2, q2 + off};
    if (len == kBs && next_len == kBs && new_a1 != 0.0f && new_a2 != 0.0f && e1.fast()) {
      // The common case: a whole block, followed by a whole block.
      uint32_t redo1[BlockEncoder<true>::kRedoWords], redo2[BlockEncoder<false>::kRedoWords];
      for (int64_t j = 0; j < kBs; j += 32) {
        // Each encoder's vector work followed by integer reads in program order: dispatch is in
        // order, and with both encoders first their dependent chains filled the vector
        // scheduler and held the reads back (llvm-mca -mcpu=znver3: 122 -> 110 cycles per 32).
        redo1[j / 32] = e1.encode_lanes<4>(j);
        copy_code_values<32>(maps.code1, q1 + off + kBs + j, next_m + j);
        redo2[j / 32] = e2.encode_lanes<4>(j);
        copy_code_values<32>(maps.code2, q2 + off + kBs + j, next_v + j);
      }
      e1.redo_lanes(redo1);
      e2.redo_lanes(redo2);
      continue;
    }
    if (new_a1 == 0.0f)
      std::fill(q1 + off, q1 + off + len, maps.zero_index1);
    else
      e1.finish(len);
    if (new_a2 == 0.0f)
      std::fill(q2 + off, q2 + off + len, maps.zero_index2);
    else
      e2.finish(len);
    copy_code_values(maps.code1, q1 + off + kBs, next_m, static_cast<int>(next_len));
    copy_code_values(maps.code2, q2 + off + kBs, next_v, static_cast<int>(next_len));
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
