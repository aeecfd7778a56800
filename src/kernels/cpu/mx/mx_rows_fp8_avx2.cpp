// AVX2 (+FMA, F16C) bodies of the MX row casts to FP8 (E4M3, E5M2), which the AVX-512 level runs
// too: eight blocks' amax, scales and checks at a time, a group ahead (prepare_fp8), then each
// block cast on the source's bits where its multiplier is a power of 2, in the source's lanes
// (32-bit for float32, 16-bit for bfloat16), by an exponent add and integer rounding
// (encode_fp8_groups); other blocks in float32 lanes, 8 at a time (four vectors a block), and
// those whose multiplier is NaN, and a row's short last block, by the scalar body. Float32 casts
// whose codes outgrow the caches stream them past the caches.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/common/fetch_ahead.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mx_rows_levels.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"
#include "kernels/cpu/mx/mx_fp8_groups_avx2.h"
#include "kernels/cpu/mx/mx_row_groups_avx2.h"

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// The Fp8Group of the eight blocks from element i, their scales into s: each block's amax and
// least |x| bits less 1 by integer maxima and unsigned minima of the magnitude bits.
template <Element E, E8m0Rounding R, DType::Id kSrc, bool kSat>
[[gnu::always_inline]] inline void prepare_fp8(const void* src, int64_t i, uint8_t* s,
                                               const Fp8Table<E, kSrc>& t, Fp8Group& g) {
  __m256i hi[8], lo[8];
#pragma GCC unroll 8
  for (int b = 0; b < 8; ++b) {
    const int64_t j = i + b * kMxBlock;
    if constexpr (kSrc == DType::Id::bf16) {
      const auto* h = static_cast<const uint16_t*>(src) + j;
      const __m256i a0 = _mm256_and_si256(load16_bits(h), t.magnitude16);
      const __m256i a1 = _mm256_and_si256(load16_bits(h + 16), t.magnitude16);
      hi[b] = _mm256_max_epi16(a0, a1);
      lo[b] = _mm256_min_epu16(_mm256_sub_epi16(a0, t.one16), _mm256_sub_epi16(a1, t.one16));
    } else {
      const auto* x = reinterpret_cast<const __m256i*>(static_cast<const float*>(src) + j);
      const auto a = [&](int v) {
        return _mm256_and_si256(_mm256_loadu_si256(x + v), t.magnitude32);
      };
      const __m256i a0 = a(0), a1 = a(1), a2 = a(2), a3 = a(3);
      hi[b] = _mm256_max_epi32(_mm256_max_epi32(a0, a1), _mm256_max_epi32(a2, a3));
      lo[b] = _mm256_min_epu32(
          _mm256_min_epu32(_mm256_sub_epi32(a0, t.one32), _mm256_sub_epi32(a1, t.one32)),
          _mm256_min_epu32(_mm256_sub_epi32(a2, t.one32), _mm256_sub_epi32(a3, t.one32)));
    }
  }
  // The amax first: the scales wait on it, the least bits only on the scales.
  const __m256i amax = kSrc == DType::Id::bf16 ? transposed_max8_16(hi) : transposed_max8(hi);
  const __m256i low = kSrc == DType::Id::bf16 ? transposed_min8_u16(lo) : transposed_min8_u32(lo);
  if constexpr (R == E8m0Rounding::kRceil)
    rceil_group<E, kSrc>(amax, low, s, t, g);
  else
    finish_fp8_group<E, R, kSrc, kSat>(amax, low, s, t, g);
}

// The cast on its bits of a block the group's preparation passed (add, above: its lanes of
// Fp8Group), its 32 codes stored at out (streamed past the caches with kStream). kClamp lowers
// codes above the element's largest to it; under rceil no product exceeds the element max (the
// scale is the power of 2 at or above amax / max), so no code does and the cast leaves it out.
template <Element E, DType::Id kSrc, bool kSat, bool kStream, bool kClamp>
[[gnu::always_inline]] inline void fp8_block(const void* src, int64_t j, uint8_t* out,
                                             int32_t add_bits, int32_t above_bits,
                                             const Fp8Table<E, kSrc>& t, __m256i& sat) {
  using K = RowConstants<E, kSrc>;
  __m256i bytes;
  if constexpr (kSrc == DType::Id::bf16) {
    const auto* p = static_cast<const uint16_t*>(src) + j;
    const __m256i one = t.one16;
    const __m256i h0 = load16_bits(p), h1 = load16_bits(p + 16);
    const __m256i a0 = _mm256_and_si256(h0, t.magnitude16),
                  a1 = _mm256_and_si256(h1, t.magnitude16);
    const __m256i add = _mm256_set1_epi16(static_cast<int16_t>(add_bits));
    const auto code = [&](__m256i a) {
      return _mm256_srai_epi16(
          _mm256_add_epi16(
              _mm256_add_epi16(a, _mm256_and_si256(_mm256_srli_epi16(a, K::kDrop), one)), add),
          K::kDrop);
    };
    if constexpr (kSat) {
      const __m256i above = _mm256_set1_epi16(static_cast<int16_t>(above_bits));
      sat = _mm256_add_epi16(
          sat, _mm256_add_epi16(_mm256_cmpgt_epi16(a0, above), _mm256_cmpgt_epi16(a1, above)));
    }
    const __m256i packed = _mm256_packus_epi16(code(a0), code(a1));
    const __m256i codes = kClamp ? _mm256_min_epu8(packed, t.max_code8) : packed;
    const __m256i signs = _mm256_and_si256(_mm256_packs_epi16(h0, h1), t.sign8);
    bytes = _mm256_permute4x64_epi64(_mm256_or_si256(codes, signs), 0xD8);
  } else {
    const auto* p = reinterpret_cast<const __m256i*>(static_cast<const float*>(src) + j);
    const __m256i one = t.one32, magnitude = t.magnitude32;
    const __m256i x0 = _mm256_loadu_si256(p), x1 = _mm256_loadu_si256(p + 1);
    const __m256i x2 = _mm256_loadu_si256(p + 2), x3 = _mm256_loadu_si256(p + 3);
    const __m256i a0 = _mm256_and_si256(x0, magnitude), a1 = _mm256_and_si256(x1, magnitude);
    const __m256i a2 = _mm256_and_si256(x2, magnitude), a3 = _mm256_and_si256(x3, magnitude);
    const __m256i add = _mm256_set1_epi32(add_bits);
    const auto code = [&](__m256i a) {
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, K::kDrop), one);
      return _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(a, lsb), add), K::kDrop);
    };
    if constexpr (kSat) {
      const __m256i above = _mm256_set1_epi32(above_bits);
      sat = _mm256_add_epi32(
          sat, _mm256_add_epi32(_mm256_cmpgt_epi32(a0, above), _mm256_cmpgt_epi32(a1, above)));
      sat = _mm256_add_epi32(
          sat, _mm256_add_epi32(_mm256_cmpgt_epi32(a2, above), _mm256_cmpgt_epi32(a3, above)));
    }
    // packs keeps the order [0-3 8-11 | 4-7 12-15] of each pair; the byte packs then
    // [0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31], whose dwords the permute puts in order.
    const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(code(a0), code(a1)),
                                               _mm256_packs_epi32(code(a2), code(a3)));
    const __m256i codes = kClamp ? _mm256_min_epu8(packed, t.max_code8) : packed;
    const __m256i signs = _mm256_and_si256(
        _mm256_packs_epi16(_mm256_packs_epi32(x0, x1), _mm256_packs_epi32(x2, x3)), t.sign8);
    bytes = _mm256_permutevar8x32_epi32(_mm256_or_si256(codes, signs), t.dword_order);
  }
  if constexpr (kSat) asm("" : "+x"(sat));  // counted here, not sunk below the group's blocks
  if constexpr (kStream)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out), bytes);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), bytes);
}

// The FP8 row cast of whole groups of eight blocks: each group prepared (prepare_fp8) while the
// group before it is cast, then its blocks on their bits, a group the preparation passed whole
// without a test per block; other blocks as encode_groups takes them. Statistics as
// encode_groups counts them. Returns the elements done.
template <Element E, E8m0Rounding R, DType::Id kSrc, bool kStats, bool kStream>
int64_t encode_fp8_groups(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                          SegmentStats* st) {
  constexpr ElementLimits lim = element_limits(E);
  constexpr int64_t kGroup = 8 * kMxBlock;
  constexpr bool kSat = kStats && R == E8m0Rounding::kFloor;
  constexpr bool kHalf = kSrc == DType::Id::bf16;
  constexpr bool kClamp = R == E8m0Rounding::kFloor;
  const int64_t groups = n / kGroup;
  if (groups == 0) return 0;
  Fp8Table<E, kSrc> t;
  asm("" : "+m"(t));                     // its constants read from memory, not rebuilt
  __m256i sat = _mm256_setzero_si256();  // -1 masks: 32-bit lanes, or 16-bit lanes (2 a block)
  __m256 peak = _mm256_setzero_ps();
  Fp8Group ahead[2];
  prepare_fp8<E, R, kSrc, kSat>(src, 0, scales, t, ahead[0]);
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t i = q * kGroup;
    const Fp8Group& g = ahead[q & 1];
    fetch_group_ahead<kSrc, kStream>(src, i);
    if (q + 1 < groups)
      prepare_fp8<E, R, kSrc, kSat>(src, i + kGroup, scales + (i + kGroup) / kMxBlock, t,
                                    ahead[(q + 1) & 1]);
    if (g.slow == 0) {
#pragma GCC unroll 8
      for (int b = 0; b < 8; ++b) {
        const int64_t j = i + b * kMxBlock;
        fp8_block<E, kSrc, kSat, kStream, kClamp>(src, j, codes + j, g.add[b], g.sat_above[b], t,
                                                  sat);
      }
      if constexpr (kStats) record_group(st->run, g.amax, g.mul, peak);
    } else {
      const uint8_t* s = scales + i / kMxBlock;
      const bool nan = kStats && _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                     g.amax, _mm256_set1_epi32(0x7F800000)))) != 0;
      for (int b = 0; b < 8; ++b) {
        const int64_t j = i + b * kMxBlock;
        if (!((g.slow >> b) & 1u)) {
          fp8_block<E, kSrc, kSat, kStream, kClamp>(src, j, codes + j, g.add[b], g.sat_above[b], t,
                                                    sat);
        } else if (R == E8m0Rounding::kRceil && s[b] == kE8m0Nan) {  // NaN multiplier
          encode_scalar<E, R, kSrc>(src, j, kMxBlock, codes, scales, st);
          continue;
        } else {
          encode_block<E, R, kSrc>(src, j, g.mul[b], codes, kStats ? st : nullptr);
        }
        if (nan) {
          alignas(32) uint32_t bits[8];
          _mm256_store_si256(reinterpret_cast<__m256i*>(bits), g.amax);
          record_block<E, kSrc>(st->run, src, j, bits[b], s[b], g.mul[b]);
        }
      }
      if (kStats && !nan) record_group(st->run, g.amax, g.mul, peak);
    }
    if (kSat && kHalf && (q & 1023) == 1023) {
      st->run.saturated -= lane_sum16(sat);
      sat = _mm256_setzero_si256();
    }
  }
  if constexpr (kStream) _mm_sfence();
  if constexpr (kStats) {
    if constexpr (kSat) st->run.saturated -= kHalf ? lane_sum16(sat) : lane_sum(sat);
    finish_peak(st->run, peak, lim.max);
  }
  return groups * kGroup;
}

template <Element E, E8m0Rounding R, DType::Id kSrc, bool kStream>
struct Fp8Groups {
  static int64_t run(const void* src, int64_t n, uint8_t* codes, uint8_t* scales,
                     SegmentStats* st) {
    return st ? encode_fp8_groups<E, R, kSrc, true, kStream>(src, n, codes, scales, st)
              : encode_fp8_groups<E, R, kSrc, false, kStream>(src, n, codes, scales, st);
  }
};

}  // namespace

MxStatsRun avx2::mx_rows_fp8(const void* src, DType dtype, int64_t n, Element e, E8m0Rounding r,
                             uint8_t* codes, uint8_t* scales, bool stats, bool stream) {
  if (e == Element::kE4m3)
    return encode_rows_of<Fp8Groups, Element::kE4m3>(src, dtype, n, r, codes, scales, stats,
                                                     stream);
  return encode_rows_of<Fp8Groups, Element::kE5m2>(src, dtype, n, r, codes, scales, stats, stream);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
