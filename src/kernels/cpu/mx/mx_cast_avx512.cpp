// AVX-512 (F, BW, VL) bodies of the MX casts: one MX block is two vectors of 16. The block's
// amax and scale come from vector reductions and the scalar scale arithmetic (mx_scalar.h); the
// elements are multiplied by the scale's exact reciprocal (the same value as torchao's
// division) and rounded with integer steps on the float32 bits (E2M1: torchao's branches).
// Blocks whose multiplier is NaN, and a row's short last block, run the scalar body. The
// encodes that count the statistics (mx_stats.h) count them from the vectors they cast, in the
// same pass: saturated where |x * multiplier| exceeds the element max, flushed where x is
// neither zero nor NaN and its code's magnitude bits are 0, and each block's amax and
// multiplier; the scalar body's blocks are counted by mx_run_stats. The MXFP8 encode, and the
// transposed cast's columns, run the AVX2 bodies, which cast FP8 blocks on the source's bits
// (for bfloat16 in 16-bit lanes, 16 elements a vector as this level's float32 lanes take) at
// memory speed. The level's NVFP4 and MXFP4-SR bodies are nvfp4_cast_avx512.cpp's.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx512.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx512_lanes;
using avx512_lanes::e4m3_values;  // beside the overload on code bytes below

// torch.clamp(y, -max, max): NaN stays (max_ps/min_ps return their second operand on NaN).
inline __m512 clamp16(__m512 y, float max) {
  return _mm512_min_ps(_mm512_set1_ps(max), _mm512_max_ps(_mm512_set1_ps(-max), y));
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

// The E2M1 (MXFP4) cast; FP8 elements take the AVX2 body (avx2_lanes).
template <bool kStats>
void mx_encode_with(const void* src, DType dtype, int64_t n, E8m0Rounding r, uint8_t* codes,
                    uint8_t* scales, LaneStats* st) {
  if (r == E8m0Rounding::kFloor)
    mx_encode_as<Element::kE2m1, E8m0Rounding::kFloor, kStats>(src, dtype, n, codes, scales, st);
  else
    mx_encode_as<Element::kE2m1, E8m0Rounding::kRceil, kStats>(src, dtype, n, codes, scales, st);
}

// FP8 blocks take the AVX2 body, which casts them on the source's bits (mx_cast_avx2.cpp) at
// memory speed: for a bfloat16 source its 16-bit lanes do in one vector what this level's
// float32 lanes do in two.
bool avx2_lanes(Element e) { return e != Element::kE2m1; }

void mx_encode(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r, uint8_t* codes,
               uint8_t* scales) {
  if (avx2_lanes(e)) return kAvx2Kernels.encode(src, dtype, n, e, r, codes, scales);
  mx_encode_with<false>(src, dtype, n, r, codes, scales, nullptr);
}

MxStatsRun mx_encode_stats(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                           uint8_t* codes, uint8_t* scales) {
  if (avx2_lanes(e)) return kAvx2Kernels.encode_stats(src, dtype, n, e, r, codes, scales);
  LaneStats st = LaneStats::zero();
  mx_encode_with<true>(src, dtype, n, r, codes, scales, &st);
  return st.finish();
}

// The values of 16 E5M2 codes: each is the high byte of a half (scalar::e5m2_value).
inline __m512 e5m2_values(const uint8_t* src) {
  const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_slli_epi32(c, 8)));
}
inline __m512 e4m3_values(const uint8_t* src) {
  return e4m3_values(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
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

}  // namespace

const MxKernels kAvx512Kernels = {.encode = mx_encode,
                                  .encode_stats = mx_encode_stats,
                                  .decode = mx_decode,
                                  .nvfp4_encode = avx512::nvfp4_encode,
                                  .nvfp4_encode_sr = avx512::nvfp4_encode_sr,
                                  .nvfp4_decode = avx512::nvfp4_decode,
                                  .amax = avx512::amax,
                                  .nvfp4_encode_stats = avx512::nvfp4_encode_stats,
                                  .mxfp4_encode_sr = avx512::mxfp4_encode_sr,
                                  .encode_columns_bf16 = mx_encode_columns_bf16_avx2,
                                  .encode_columns_f32 = mx_encode_columns_f32_avx2};

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
