#pragma once
// Internal: the 16-lane helpers that the AVX-512 (F, BW, VL) block-format casts share, the MX
// ones (mx_cast_avx512.cpp) and the NVFP4 and MXFP4-SR ones (nvfp4_cast_avx512.cpp): loads of
// float32 or bfloat16 sources, FP8 and E2M1 codes of float32 lanes and their packing, blocks'
// amax by integer maxima, statistics counted in lanes, and the values of E2M1 and E4M3 codes.
// Each carries its target and is always inlined, so only the AVX-512 files that call it
// compile it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/mx/mx_scalar.h"
#include "kernels/cpu/mx/mx_stats.h"
#include "mantissa/core/dtype.h"

#define MX_AVX512_MEMBER __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline))
#define MX_AVX512 MX_AVX512_MEMBER inline

namespace mantissa::kernels::mx::avx512_lanes {

MX_AVX512 __m512 load16(const void* src, DType dtype, int64_t i) {
  if (dtype == kFloat32) return _mm512_loadu_ps(static_cast<const float*>(src) + i);
  const __m256i h =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(src) + i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

MX_AVX512 __m512 abs16(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
}

MX_AVX512 const char* at(const void* src, DType dtype, int64_t i) {
  return static_cast<const char*>(src) + i * static_cast<int64_t>(dtype.itemsize());
}

// FP8 codes of 16 values already within ±max (or NaN), as scalar::fp8_code.
template <int kMant, int kBias>
MX_AVX512 __m512i fp8_codes(__m512 y) {
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
MX_AVX512 __m512i e2m1_codes(__m512 v) {
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
MX_AVX512 void store_e2m1(uint8_t* dst, __m512i codes) {
  const __m512i pairs = _mm512_or_si512(codes, _mm512_srli_epi64(codes, 28));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi64_epi8(pairs));
}

// Lanes 4k..4k+3 of the result: the lane-wise maxima of a's 128-bit lanes 2k, 2k+1 (k = 0, 1)
// and of b's (k = 2, 3).
MX_AVX512 __m512i fold_lanes(__m512i a, __m512i b) {
  return _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane b of the result: the largest of v[b]'s 16 lanes (unsigned). Pairs of vectors are
// interleaved and reduced within 128-bit lanes, then the 128-bit lanes are folded, which leaves
// the blocks in order.
MX_AVX512 __m512i reduce16_max(const __m512i* v) {
  __m512i u[4];
#pragma GCC unroll 4
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
MX_AVX512 void block_amaxes(const void* src, DType dtype, int64_t i, int64_t block, int count,
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
    amax[b] =
        bits[b] > 0x7F800000u ? scalar::float_of(scalar::kQuietNan) : scalar::float_of(bits[b]);
}

// A segment's statistics while it is encoded: the saturated and flushed elements counted in
// lanes (a lane sees one element in 16 of a segment of at most 2^31), the rest block by block.
struct LaneStats {
  __m512i saturated;
  __m512i flushed;
  MxStatsRun run;

  MX_AVX512_MEMBER static LaneStats zero() {
    return {_mm512_setzero_si512(), _mm512_setzero_si512(), {}};
  }

  // x: the source values, y: x times the multiplier (before any clamp), codes: their codes in
  // lanes, whose bits under `magnitude` are the code's magnitude.
  MX_AVX512_MEMBER void count(__m512 x, __m512 y, __m512i codes, float max, int magnitude) {
    const __m512i one = _mm512_set1_epi32(1);
    const __mmask16 over = _mm512_cmp_ps_mask(abs16(y), _mm512_set1_ps(max), _CMP_GT_OQ);
    saturated = _mm512_mask_add_epi32(saturated, over, saturated, one);
    const __mmask16 zero_code = _mm512_testn_epi32_mask(codes, _mm512_set1_epi32(magnitude));
    const __mmask16 nonzero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    flushed = _mm512_mask_add_epi32(flushed, zero_code & nonzero, flushed, one);
  }
  MX_AVX512_MEMBER MxStatsRun finish() {
    run.saturated += _mm512_reduce_add_epi32(saturated);
    run.flushed += _mm512_reduce_add_epi32(flushed);
    return run;
  }
};

// 16 E2M1 codes from 8 bytes, low nibble first, as int32 lanes.
MX_AVX512 __m512i unpack_e2m1(const uint8_t* src) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
  const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0F));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F));
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
}

MX_AVX512 __m512 e2m1_table() { return _mm512_loadu_ps(scalar::kE2m1Values); }

// The values of 16 E4M3 codes without a table: the code's bits placed in a half's (exponent
// field and mantissa aligned, bias 15 against 7) give value * 2^-8, subnormals included; the
// NaN codes get scalar::e4m3_value's NaN.
MX_AVX512 __m512 e4m3_values(__m512i c) {
  const __m512i mag = _mm512_and_si512(c, _mm512_set1_epi32(0x7F));
  const __m512i sign = _mm512_and_si512(c, _mm512_set1_epi32(0x80));
  const __m512i half = _mm512_or_si512(_mm512_slli_epi32(mag, 7), _mm512_slli_epi32(sign, 8));
  const __m512 v =
      _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(half)), _mm512_set1_ps(256.0f));
  const __m512i nan = _mm512_or_si512(_mm512_slli_epi32(sign, 24), _mm512_set1_epi32(0x7FF00000));
  return _mm512_mask_blend_ps(_mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7F)), v,
                              _mm512_castsi512_ps(nan));
}

}  // namespace mantissa::kernels::mx::avx512_lanes

#undef MX_AVX512
#undef MX_AVX512_MEMBER
