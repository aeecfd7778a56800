// AVX-512 (F, BW, VL) bodies of the NVFP4 casts and of MXFP4 with stochastic rounding: one
// NVFP4 block is one vector. The per-tensor amax pass; the 1x16 cast (16 blocks' amax, E4M3
// scales and factors as one vector, then each block's codes, rounded to nearest or
// stochastically, with the statistics counted from the vectors when asked); Philox4x32-10 on 16
// lanes. Blocks whose factor is NaN, and a row's short last block, run the scalar body
// (mx_cast.cpp) and are counted by nvfp4_run_stats.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx512.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"
#include "kernels/cpu/mx/philox.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx512_lanes;

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

}  // namespace

namespace avx512 {

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

}  // namespace avx512
}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
