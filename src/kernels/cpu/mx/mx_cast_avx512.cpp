// AVX-512 (F, BW, VL) bodies of the block-format casts: one MX block is two vectors of 16, one
// NVFP4 block one vector. The block's amax and scale come from vector reductions and the scalar
// scale arithmetic (mx_scalar.h); the elements are multiplied by the scale's exact reciprocal
// (the same value as torchao's division) and rounded with integer steps on the float32 bits
// (FP8: RNE on the dropped mantissa bits, subnormals by an FPU add; E2M1: torchao's branches).
// Blocks whose multiplier is NaN, and a row's short last block, run the scalar body. The
// encodes that count the statistics (mx_stats.h) count them from the vectors they cast, in the
// same pass: saturated where |x * multiplier| exceeds the element max, flushed where x is
// neither zero nor NaN and its code's magnitude bits are 0, and each block's amax and
// multiplier; the scalar body's blocks are counted by mx_run_stats / nvfp4_run_stats. A
// bfloat16 source's MXFP8 encode, and the transposed cast's columns, run the AVX2 bodies, whose
// 16-bit lanes take 16 elements a vector as this level's float32 lanes do.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "kernels/cpu/mx/philox.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;

inline __m512 load16(const void* src, DType dtype, int64_t i) {
  if (dtype == kFloat32) return _mm512_loadu_ps(static_cast<const float*>(src) + i);
  const __m256i h =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(src) + i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

inline __m512 abs16(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
}

const char* at(const void* src, DType dtype, int64_t i) {
  return static_cast<const char*>(src) + i * static_cast<int64_t>(dtype.itemsize());
}

// torch.clamp(y, -max, max): NaN stays (max_ps/min_ps return their second operand on NaN).
inline __m512 clamp16(__m512 y, float max) {
  return _mm512_min_ps(_mm512_set1_ps(max), _mm512_max_ps(_mm512_set1_ps(-max), y));
}

// FP8 codes of 16 values already within ±max (or NaN), as scalar::fp8_code.
template <int kMant, int kBias>
inline __m512i fp8_codes(__m512 y) {
  constexpr int kDrop = 23 - kMant;
  constexpr int kMinNormalBits = (128 - kBias) << 23;
  constexpr int kMagicBits = (127 + 24 - kBias - kMant) << 23;
  const __m512i x = _mm512_castps_si512(y);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 24), _mm512_set1_epi32(0x80));
  const __m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7FFFFFFF));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, kDrop), _mm512_set1_epi32(1));
  const __m512i r =
      _mm512_add_epi32(a, _mm512_add_epi32(lsb, _mm512_set1_epi32((1 << (kDrop - 1)) - 1)));
  const __m512i normal =
      _mm512_sub_epi32(_mm512_srli_epi32(r, kDrop), _mm512_set1_epi32((127 - kBias) << kMant));
  const __m512 sum =
      _mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(_mm512_set1_epi32(kMagicBits)));
  const __m512i sub = _mm512_sub_epi32(_mm512_castps_si512(sum), _mm512_set1_epi32(kMagicBits));
  const __mmask16 is_sub = _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32(kMinNormalBits));
  __m512i code = _mm512_mask_blend_epi32(is_sub, normal, sub);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7F800000));
  code = _mm512_mask_blend_epi32(nan, code, _mm512_set1_epi32(0x7F));
  return _mm512_or_si512(code, sign);
}

// E2M1 codes of 16 values, as scalar::e2m1_code.
inline __m512i e2m1_codes(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 28), _mm512_set1_epi32(8));
  const __m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7FFFFFFF));
  const __m512 af = _mm512_castsi512_ps(a);
  const __mmask16 sat = _mm512_cmp_ps_mask(af, _mm512_set1_ps(kE2m1Max), _CMP_GE_OQ);
  const __mmask16 den = _mm512_cmp_ps_mask(af, _mm512_set1_ps(1.0f), _CMP_LT_OQ);
  const __m512i dcode =
      _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(af, _mm512_set1_ps(0x1p22f))),
                       _mm512_set1_epi32(149 << 23));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 22), _mm512_set1_epi32(1));
  const __m512i biased = _mm512_add_epi32(
      _mm512_add_epi32(a, _mm512_set1_epi32(static_cast<int>(0xC1000000u + 0x1FFFFFu))), odd);
  const __m512i ncode = _mm512_and_si512(_mm512_srli_epi32(biased, 22), _mm512_set1_epi32(0xFF));
  __m512i code = _mm512_mask_blend_epi32(den, ncode, dcode);
  code = _mm512_mask_blend_epi32(sat, code, _mm512_set1_epi32(7));
  return _mm512_or_si512(code, sign);
}

// Two E2M1 codes per byte, even element in the low nibble: 16 codes -> 8 bytes.
inline void store_e2m1(uint8_t* dst, __m512i codes) {
  const __m512i pairs = _mm512_or_si512(codes, _mm512_srli_epi64(codes, 28));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi64_epi8(pairs));
}

// The codes of 16 values (already clamped where the format needs it), and their store.
inline __m512i element_codes(__m512 y, Element e) {
  if (e == Element::kE2m1) return e2m1_codes(y);
  return e == Element::kE4m3 ? fp8_codes<3, 7>(y) : fp8_codes<2, 15>(y);
}

inline void store_element_codes(uint8_t* codes, int64_t i, __m512i c, Element e) {
  if (e == Element::kE2m1) {
    store_e2m1(codes + i / 2, c);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm512_cvtepi32_epi8(c));
  }
}

// Lanes 4k..4k+3 of the result: the lane-wise maxima of a's 128-bit lanes 2k, 2k+1 (k = 0, 1)
// and of b's (k = 2, 3).
inline __m512i fold_lanes(__m512i a, __m512i b) {
  return _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane b of the result: the largest of v[b]'s 16 lanes (unsigned). Pairs of vectors are
// interleaved and reduced within 128-bit lanes, then the 128-bit lanes are folded, which leaves
// the blocks in order.
inline __m512i reduce16_max(const __m512i* v) {
  __m512i u[4];
  for (int g = 0; g < 4; ++g) {
    const __m512i* p = v + 4 * g;
    const __m512i t01 =
        _mm512_max_epu32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
    const __m512i t23 =
        _mm512_max_epu32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
    u[g] = _mm512_max_epu32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
  }
  return fold_lanes(fold_lanes(u[0], u[1]), fold_lanes(u[2], u[3]));
}

// The amax of `count` (at most 16) consecutive blocks of `block` (16 or 32) elements from i, as
// scalar::block_amax gives it: on the magnitudes' bits an unsigned max orders the numbers and
// puts every NaN above infinity.
inline void block_amaxes(const void* src, DType dtype, int64_t i, int64_t block, int count,
                         float* amax) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i m[16];
  for (int b = 0; b < 16; ++b) {
    m[b] = _mm512_setzero_si512();
    for (int64_t k = 0; b < count && k < block; k += 16) {
      const __m512i x = _mm512_castps_si512(load16(src, dtype, i + b * block + k));
      m[b] = _mm512_max_epu32(m[b], _mm512_and_si512(x, magnitude));
    }
  }
  alignas(64) uint32_t bits[16];
  _mm512_store_si512(bits, reduce16_max(m));
  for (int b = 0; b < count; ++b)
    amax[b] = bits[b] > 0x7F800000u ? float_of(kQuietNan) : float_of(bits[b]);
}

// A segment's statistics while it is encoded: the saturated and flushed elements counted in
// lanes (a lane sees one element in 16 of a segment of at most 2^31), the rest block by block.
struct LaneStats {
  __m512i saturated;
  __m512i flushed;
  MxStatsRun run;

  static LaneStats zero() { return {_mm512_setzero_si512(), _mm512_setzero_si512(), {}}; }

  // x: the source values, y: x times the multiplier (before any clamp), codes: their codes in
  // lanes, whose bits under `magnitude` are the code's magnitude.
  void count(__m512 x, __m512 y, __m512i codes, float max, int magnitude) {
    const __m512i one = _mm512_set1_epi32(1);
    const __mmask16 over = _mm512_cmp_ps_mask(abs16(y), _mm512_set1_ps(max), _CMP_GT_OQ);
    saturated = _mm512_mask_add_epi32(saturated, over, saturated, one);
    const __mmask16 zero_code = _mm512_testn_epi32_mask(codes, _mm512_set1_epi32(magnitude));
    const __mmask16 nonzero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    flushed = _mm512_mask_add_epi32(flushed, zero_code & nonzero, flushed, one);
  }
  MxStatsRun finish() {
    run.saturated += _mm512_reduce_add_epi32(saturated);
    run.flushed += _mm512_reduce_add_epi32(flushed);
    return run;
  }
};

// The largest |x| of n elements from i with NaN passed over (a block whose amax is NaN).
float amax_without_nan(const void* src, DType dtype, int64_t i, int64_t n) {
  float amax = 0.0f;
  for (int64_t k = i; k < i + n; ++k) {
    const float a = std::fabs(load(src, dtype, k));
    amax = a > amax ? a : amax;  // NaN passed over
  }
  return amax;
}

// mx_run_stats's record of one vector-encoded block with scale code s and multiplier mul; amax:
// the block's (NaN where it holds one).
template <Element E>
void record_block(MxStatsRun& run, const void* src, DType dtype, int64_t i, float amax, uint8_t s,
                  float mul) {
  constexpr ElementLimits lim = element_limits(E);
  if (amax != amax) amax = amax_without_nan(src, dtype, i, kMxBlock);
  if (amax > run.best) {
    run.best = amax;
    if (s != kE8m0Nan) {
      run.scaled_best = amax;
      run.scale = mul;
    }
  }
  if (s != kE8m0Nan) run.peak = std::max(run.peak, static_cast<double>(amax) * mul / lim.max);
}

// One element format and scale rounding, fixed at compile time so the block loop has no
// branch on them; with kStats the segment's statistics are counted into *st as it is encoded.
template <Element E, E8m0Rounding R, bool kStats>
void mx_encode_as(const void* src, DType dtype, int64_t n, uint8_t* codes, uint8_t* scales,
                  LaneStats* st) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr bool clamp = R == E8m0Rounding::kRceil || E != Element::kE2m1;
  constexpr int kMagnitude = E == Element::kE2m1 ? 7 : 0x7F;
  // The scalar body over blocks the vectors leave, their statistics appended in order.
  auto scalar = [&](int64_t i, int64_t len) {
    const void* x = at(src, dtype, i);
    uint8_t* c = codes + code_bytes(E, i);
    uint8_t* s = scales + i / kMxBlock;
    kScalarKernels.encode(x, dtype, len, E, R, c, s);
    if constexpr (kStats) st->run.append(mx_run_stats(x, dtype, len, E, R, c, s));
  };
  const int64_t full = n / kMxBlock * kMxBlock;
  float amaxes[16];
  for (int64_t i = 0; i < full; i += kMxBlock) {
    const int64_t in_group = (i / kMxBlock) % 16;
    if (in_group == 0)
      block_amaxes(src, dtype, i, kMxBlock,
                   static_cast<int>(std::min<int64_t>(16, (full - i) / kMxBlock)), amaxes);
    const float amax = amaxes[in_group];
    uint8_t s;
    float m;
    if constexpr (R == E8m0Rounding::kFloor) {
      s = e8m0_floor(amax, lim.max_pow2);
      m = floor_reciprocal(s);
    } else {
      s = e8m0_rceil(amax, lim.max);
      if (s == kE8m0Nan) {  // NaN multiplier: the scalar body
        scalar(i, kMxBlock);
        continue;
      }
      m = rceil_multiplier(s, amax, lim.max);
    }
    scales[i / kMxBlock] = s;
    const __m512 mv = _mm512_set1_ps(m);
    for (int h = 0; h < 2; ++h) {
      const __m512 x = load16(src, dtype, i + 16 * h);
      const __m512 y = _mm512_mul_ps(x, mv);
      const __m512i c = element_codes(clamp ? clamp16(y, lim.max) : y, E);
      store_element_codes(codes, i + 16 * h, c, E);
      if constexpr (kStats) st->count(x, y, c, lim.max, kMagnitude);
    }
    if constexpr (kStats) record_block<E>(st->run, src, dtype, i, amax, s, m);
  }
  if (full < n) scalar(full, n - full);
}

template <E8m0Rounding R, bool kStats>
void mx_encode_rounded(const void* src, DType dtype, int64_t n, Element e, uint8_t* codes,
                       uint8_t* scales, LaneStats* st) {
  if (e == Element::kE4m3)
    return mx_encode_as<Element::kE4m3, R, kStats>(src, dtype, n, codes, scales, st);
  if (e == Element::kE5m2)
    return mx_encode_as<Element::kE5m2, R, kStats>(src, dtype, n, codes, scales, st);
  mx_encode_as<Element::kE2m1, R, kStats>(src, dtype, n, codes, scales, st);
}

template <bool kStats>
void mx_encode_with(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                    uint8_t* codes, uint8_t* scales, LaneStats* st) {
  if (r == E8m0Rounding::kFloor)
    mx_encode_rounded<E8m0Rounding::kFloor, kStats>(src, dtype, n, e, codes, scales, st);
  else
    mx_encode_rounded<E8m0Rounding::kRceil, kStats>(src, dtype, n, e, codes, scales, st);
}

// A bfloat16 source's FP8 blocks take the AVX2 body, whose 16-bit lanes (mx_cast_avx2.cpp) do
// in one vector what this level's float32 lanes do in two.
bool avx2_lanes(DType dtype, Element e) { return dtype == kBFloat16 && e != Element::kE2m1; }

void mx_encode(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r, uint8_t* codes,
               uint8_t* scales) {
  if (avx2_lanes(dtype, e)) return kAvx2Kernels.encode(src, dtype, n, e, r, codes, scales);
  mx_encode_with<false>(src, dtype, n, e, r, codes, scales, nullptr);
}

MxStatsRun mx_encode_stats(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                           uint8_t* codes, uint8_t* scales) {
  if (avx2_lanes(dtype, e)) return kAvx2Kernels.encode_stats(src, dtype, n, e, r, codes, scales);
  LaneStats st = LaneStats::zero();
  mx_encode_with<true>(src, dtype, n, e, r, codes, scales, &st);
  return st.finish();
}

// 16 E2M1 codes from 8 bytes, low nibble first, as int32 lanes.
inline __m512i unpack_e2m1(const uint8_t* src) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0F));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
}

inline __m512 e2m1_table() { return _mm512_loadu_ps(kE2m1Values); }

// The values of 16 E4M3 codes without a table: the code's bits placed in a half's (exponent
// field and mantissa aligned, bias 15 against 7) give value * 2^-8, subnormals included; the
// NaN codes get scalar::e4m3_value's NaN.
inline __m512 e4m3_values(__m512i c) {
  const __m512i mag = _mm512_and_si512(c, _mm512_set1_epi32(0x7F));
  const __m512i sign = _mm512_and_si512(c, _mm512_set1_epi32(0x80));
  const __m512i half = _mm512_or_si512(_mm512_slli_epi32(mag, 7), _mm512_slli_epi32(sign, 8));
  const __m512 v =
      _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(half)), _mm512_set1_ps(256.0f));
  const __m512i nan = _mm512_or_si512(_mm512_slli_epi32(sign, 24), _mm512_set1_epi32(0x7FF00000));
  return _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7F)), v,
                              _mm512_castsi512_ps(nan));
}
// The values of 16 E5M2 codes: each is the high byte of a half (scalar::e5m2_value).
inline __m512 e5m2_values(const uint8_t* src) {
  const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_slli_epi32(c, 8)));
}
inline __m512 e4m3_values(const uint8_t* src) {
  return e4m3_values(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
}

// scalar::nvfp4_block_scale for 16 blocks at once: their E4M3 codes and factors.
inline void nvfp4_block_scales(const float* amax, float tensor_scale, uint8_t* code,
                               float* factor) {
  __m512 s = _mm512_div_ps(_mm512_div_ps(_mm512_loadu_ps(amax), _mm512_set1_ps(kE2m1Max)),
                           _mm512_set1_ps(tensor_scale));
  s = _mm512_min_ps(_mm512_set1_ps(kE4m3Max), _mm512_max_ps(_mm512_set1_ps(0x1p-6f), s));
  const __m512i c = fp8_codes<3, 7>(s);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(code), _mm512_cvtepi32_epi8(c));
  _mm512_storeu_ps(factor, _mm512_div_ps(_mm512_set1_ps(1.0f / tensor_scale), e4m3_values(c)));
}

void mx_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, Element e, float* out) {
  const int64_t full = n / kMxBlock * kMxBlock;
  const __m512 table = e2m1_table();
  for (int64_t i = 0; i < full; i += kMxBlock) {
    const __m512 s = _mm512_set1_ps(e8m0_value(scales[i / kMxBlock]));
    for (int64_t j = i; j < i + kMxBlock; j += 16) {
      __m512 v;
      if (e == Element::kE4m3) {
        v = e4m3_values(codes + j);
      } else if (e == Element::kE5m2) {
        v = e5m2_values(codes + j);
      } else {
        v = _mm512_permutexvar_ps(unpack_e2m1(codes + j / 2), table);
      }
      _mm512_storeu_ps(out + j, _mm512_mul_ps(v, s));
    }
  }
  if (full < n)
    kScalarKernels.decode(codes + code_bytes(e, full), scales + full / kMxBlock, n - full, e,
                          out + full);
}

// The amax (block_amax_in's, or each block's own) of `count` (at most 16) blocks from block b,
// the rest of the 16 lanes 0.
inline void group_amaxes(const void* src, DType dtype, int64_t i, const float* block_amax_in,
                         int count, float* amax) {
  if (!block_amax_in) {
    block_amaxes(src, dtype, i, kNvfp4Block, count, amax);
  } else {
    for (int k = 0; k < count; ++k) amax[k] = block_amax_in[i / kNvfp4Block + k];
  }
  for (int k = count; k < 16; ++k) amax[k] = 0.0f;
}

// Philox4x32-10 on 16 lanes (kernels/cpu/mx/philox.h): lane l runs counter block
// first_block + l of `row`; out[k] holds word k of every lane.
inline void mulhilo(__m512i a, uint32_t m, __m512i& hi, __m512i& lo) {
  const __m512i mv = _mm512_set1_epi32(static_cast<int>(m));
  lo = _mm512_mullo_epi32(a, mv);
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(a, mv), 32);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), mv);
  hi = _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

inline void philox16(uint64_t seed, uint64_t offset, uint64_t row, uint64_t first_block,
                     __m512i* out) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const PhiloxCounter base = sr_counter(first_block, row, offset);
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(base[0])), lane);
  __m512i c1 = _mm512_set1_epi32(static_cast<int>(base[1]));
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(base[2]));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(base[3]));
  PhiloxKey key = sr_key(seed);
  for (int round = 0; round < 10; ++round) {
    __m512i hi0, lo0, hi1, lo1;
    mulhilo(c0, 0xD2511F53u, hi0, lo0);
    mulhilo(c2, 0xCD9E8D57u, hi1, lo1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(key[0])));
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(key[1])));
    c3 = lo0;
    key[0] += 0x9E3779B9u;
    key[1] += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// scalar::e2m1_code_stochastic on 16 lanes.
inline __m512i e2m1_codes_stochastic(__m512 v, __m512i random) {
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  const __m512i sign =
      _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 28), _mm512_set1_epi32(8));
  const __m512 a = _mm512_min_ps(abs16(v), _mm512_set1_ps(kE2m1Max));
  const __mmask16 below2 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.0f), _CMP_LT_OQ);
  const __mmask16 below4 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(4.0f), _CMP_LT_OQ);
  const __m512 step = _mm512_mask_blend_ps(
      below2, _mm512_mask_blend_ps(below4, _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f)),
      _mm512_set1_ps(0.5f));
  const __m512 inv = _mm512_mask_blend_ps(
      below2, _mm512_mask_blend_ps(below4, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f)),
      _mm512_set1_ps(2.0f));
  const __m512 lo = _mm512_mul_ps(
      _mm512_roundscale_ps(_mm512_mul_ps(a, inv), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), step);
  const __m512 frac = _mm512_mul_ps(_mm512_sub_ps(a, lo), inv);
  const __m512 u = _mm512_cvtepi32_ps(_mm512_srli_epi32(random, 8));
  const __mmask16 up =
      _mm512_cmp_ps_mask(u, _mm512_mul_ps(frac, _mm512_set1_ps(0x1p24f)), _CMP_LT_OQ);
  const __m512 value = _mm512_mask_add_ps(lo, up, lo, step);
  const __m512i code = _mm512_or_si512(e2m1_codes(value), sign);
  return _mm512_mask_blend_epi32(nan, code, e2m1_codes(v));
}

// The NVFP4 cast of a segment, 16 blocks at a time (their amax, scales and factors in one
// vector), each block's codes rounded to nearest or (kSr) stochastically. With kStats it
// returns nvfp4_run_stats's counts of the segment, taken from the vectors the cast holds: each
// block's amax with NaN passed over, |x * factor| > 6, and codes whose magnitude bits are 0
// from x != 0 (not NaN). Blocks whose factor is NaN, and a row's short last block, run the
// scalar body and are counted by nvfp4_run_stats.
template <bool kSr, bool kStats>
MxStatsRun nvfp4_encode_body(const void* src, DType dtype, int64_t n, float tensor_scale,
                             const float* block_amax_in, uint64_t seed, uint64_t offset,
                             int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  const int64_t full = n / kNvfp4Block * kNvfp4Block;
  float amaxes[16], own[16], factors[16];
  uint8_t scale_codes[16];
  __m512i words[4];
  int64_t group = -1;
  LaneStats st = LaneStats::zero();
  float best = -1.0f, peak = 0.0f;  // the vector blocks' largest amax and amax * factor
  auto scalar = [&](int64_t b, int64_t i, int64_t len) {
    const float* in = block_amax_in ? block_amax_in + b : nullptr;
    if constexpr (kSr) {
      kScalarKernels.nvfp4_encode_sr(at(src, dtype, i), dtype, len, tensor_scale, in, seed, offset,
                                     row, first_col + i, codes + i / 2, scales + b);
    } else {
      kScalarKernels.nvfp4_encode(at(src, dtype, i), dtype, len, tensor_scale, in, codes + i / 2,
                                  scales + b);
    }
    if constexpr (kStats)
      st.run.append(
          nvfp4_run_stats(at(src, dtype, i), dtype, len, tensor_scale, codes + i / 2, scales + b));
  };
  for (int64_t i = 0; i < full; i += kNvfp4Block) {
    const int64_t b = i / kNvfp4Block;
    if (b % 16 == 0) {
      const int count = static_cast<int>(std::min<int64_t>(16, (full - i) / kNvfp4Block));
      group_amaxes(src, dtype, i, block_amax_in, count, amaxes);
      nvfp4_block_scales(amaxes, tensor_scale, scale_codes, factors);
      // The blocks' own amax (the 16x16 tiles' stand in the cast's amaxes).
      if constexpr (kStats) {
        if (block_amax_in) {
          block_amaxes(src, dtype, i, kNvfp4Block, count, own);
        } else {
          std::copy(amaxes, amaxes + count, own);
        }
      }
    }
    const float factor = factors[b % 16];
    if (factor != factor) {  // NaN factor: the scalar body keeps each NaN's sign
      scalar(b, i, kNvfp4Block);
      continue;
    }
    scales[b] = scale_codes[b % 16];
    const __m512 x = load16(src, dtype, i);
    const __m512 y = _mm512_mul_ps(x, _mm512_set1_ps(factor));
    __m512i c;
    if constexpr (kSr) {
      const int64_t col = first_col + i;
      if (col >> 6 != group) {
        group = col >> 6;
        philox16(seed, offset, static_cast<uint64_t>(row), 16 * static_cast<uint64_t>(group),
                 words);
      }
      c = e2m1_codes_stochastic(y, words[(col >> 4) & 3]);
    } else {
      c = e2m1_codes(y);
    }
    store_e2m1(codes + i / 2, c);
    if constexpr (kStats) {
      // (A block holding a NaN has a NaN factor: its amax here is a number.)
      st.count(x, y, c, kE2m1Max, 7);
      best = std::max(best, own[b % 16]);
      peak = std::max(peak, own[b % 16] * factor);
    }
  }
  if (full < n) scalar(full / kNvfp4Block, full, n - full);
  if constexpr (kStats) {
    if (best >= 0.0f) {
      st.run.best = std::max(st.run.best, best);
      // max of amax * factor / 6 over the blocks is their max over 6 (division is monotonic).
      st.run.peak = std::max(st.run.peak, static_cast<double>(peak) / kE2m1Max);
    }
  }
  return st.finish();
}

void nvfp4_encode(const void* src, DType dtype, int64_t n, float tensor_scale,
                  const float* block_amax_in, uint8_t* codes, uint8_t* scales) {
  nvfp4_encode_body<false, false>(src, dtype, n, tensor_scale, block_amax_in, 0, 0, 0, 0, codes,
                                  scales);
}

void nvfp4_encode_sr(const void* src, DType dtype, int64_t n, float tensor_scale,
                     const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                     int64_t first_col, uint8_t* codes, uint8_t* scales) {
  nvfp4_encode_body<true, false>(src, dtype, n, tensor_scale, block_amax_in, seed, offset, row,
                                 first_col, codes, scales);
}

MxStatsRun nvfp4_encode_stats(const void* src, DType dtype, int64_t n, float tensor_scale,
                              const float* block_amax_in, bool stochastic, uint64_t seed,
                              uint64_t offset, int64_t row, int64_t first_col, uint8_t* codes,
                              uint8_t* scales) {
  if (stochastic)
    return nvfp4_encode_body<true, true>(src, dtype, n, tensor_scale, block_amax_in, seed, offset,
                                         row, first_col, codes, scales);
  return nvfp4_encode_body<false, true>(src, dtype, n, tensor_scale, block_amax_in, 0, 0, 0, 0,
                                        codes, scales);
}

// mxfp4_sr.h's cast on 16 lanes: each 1x32 block's E8M0 floor scale, then the stochastic rounding
// of x * 2^-e * 3/4 with the column's Philox word (n and first_col multiples of 32 and 64).
void mxfp4_encode_sr(const void* src, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                     int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  const __m512 prescale = _mm512_set1_ps(kMxfp4SrPrescale);
  __m512i words[4];
  for (int64_t i = 0; i < n; i += kMxBlock) {
    const int64_t col = first_col + i;
    if ((col & 63) == 0)
      philox16(seed, offset, static_cast<uint64_t>(row), 16 * static_cast<uint64_t>(col >> 6),
               words);
    const __m512 x0 = load16(src, dtype, i), x1 = load16(src, dtype, i + 16);
    const bool nan =
        (_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q)) != 0;
    const uint8_t s = nan ? kE8m0Nan
                          : e8m0_floor(_mm512_reduce_max_ps(_mm512_max_ps(abs16(x0), abs16(x1))),
                                       element_limits(Element::kE2m1).max_pow2);
    scales[i / kMxBlock] = s;
    const __m512 r = _mm512_set1_ps(floor_reciprocal(s));
    store_e2m1(codes + i / 2, e2m1_codes_stochastic(_mm512_mul_ps(_mm512_mul_ps(x0, r), prescale),
                                                    words[(col >> 4) & 3]));
    store_e2m1(codes + i / 2 + 8,
               e2m1_codes_stochastic(_mm512_mul_ps(_mm512_mul_ps(x1, r), prescale),
                                     words[((col + 16) >> 4) & 3]));
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

float amax(const void* src, DType dtype, int64_t n) {
  const int64_t full = n / 16 * 16;
  __m512 m = _mm512_setzero_ps();
  __mmask16 nan = 0;
  for (int64_t i = 0; i < full; i += 16) {
    const __m512 x = load16(src, dtype, i);
    nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    m = _mm512_max_ps(m, abs16(x));
  }
  if (nan) return float_of(kQuietNan);
  const float vec = _mm512_reduce_max_ps(m);
  const float tail = kScalarKernels.amax(at(src, dtype, full), dtype, n - full);
  return tail != tail ? tail : (tail > vec ? tail : vec);
}

}  // namespace

const MxKernels kAvx512Kernels = {.encode = mx_encode,
                                  .encode_stats = mx_encode_stats,
                                  .decode = mx_decode,
                                  .nvfp4_encode = nvfp4_encode,
                                  .nvfp4_encode_sr = nvfp4_encode_sr,
                                  .nvfp4_decode = nvfp4_decode,
                                  .amax = amax,
                                  .nvfp4_encode_stats = nvfp4_encode_stats,
                                  .mxfp4_encode_sr = mxfp4_encode_sr,
                                  .encode_columns_bf16 = mx_encode_columns_bf16_avx2};

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
