#pragma once
// Internal: the steps of the AVX2 NVFP4 row casts that the bfloat16 round-to-nearest body
// (nvfp4_rows_bf16_avx2.cpp) and the others (nvfp4_rows_avx2.cpp) share: 8 blocks' E4M3 scale
// codes by the per-tensor-scale thresholds and their factors by the octave table
// (nvfp4_scale_codes.h), the cast of 8 blocks of either source through float32 lanes (rounded to
// nearest or stochastically, with the statistics counted in lanes), and the segment's scalar
// blocks, zero-padded last group and statistics' sums. Its functions carry the AVX2 target and
// internal linkage, so each file that includes it builds its own.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/common/fetch_ahead.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/nvfp4_lanes_avx2.h"
#include "kernels/cpu/mx/nvfp4_scale_codes.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {

namespace {

using namespace scalar;
using namespace avx2_lanes;
using namespace nvfp4_avx2;

// The E4M3 scale codes of 8 blocks' amax bits (numbers >= 0, t.ok) by t's compares
// (nvfp4_scale_codes.h): 9 + 8 octaves + the steps the low 23 bits reach, clamped to 8..126.
inline __m256i scale_codes8(const Nvfp4ScaleCodeThresholds& t, __m256i bits) {
  const __m256i d = _mm256_sub_epi32(bits, _mm256_set1_epi32(t.base));
  __m256i c =
      _mm256_add_epi32(_mm256_slli_epi32(_mm256_srai_epi32(d, 23), 3), _mm256_set1_epi32(9));
  const __m256i low = _mm256_and_si256(d, _mm256_set1_epi32(0x7FFFFF));
#pragma GCC unroll 7
  for (int j = 0; j < 7; ++j)
    c = _mm256_sub_epi32(c, _mm256_cmpgt_epi32(low, _mm256_set1_epi32(t.step[j])));
  return _mm256_min_epi32(_mm256_max_epi32(c, _mm256_set1_epi32(8)), _mm256_set1_epi32(126));
}

// Whether 8 amax (as bits) are all numbers >= 0, which scale_codes8 takes (a NaN's or a
// negative's sign bit is set in `unusual`).
inline bool scale_codes8_serve(const Nvfp4ScaleCodeThresholds& t, __m256i bits) {
  const __m256i unusual =
      _mm256_or_si256(bits, _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(0x7F800000)));
  return t.ok && _mm256_testz_si256(unusual, _mm256_set1_epi32(INT32_MIN));
}

// The factors of 8 scale codes (8..126) by t's table (t.factors_ok): nvfp4_block_scale's
// (1 / tensor scale) / value(code) without the division.
inline __m256 scale_factors8(const Nvfp4ScaleCodeThresholds& t, __m256i code) {
  const __m256i top = _mm256_permutevar8x32_epi32(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.factor_top)), code);
  return _mm256_castsi256_ps(
      _mm256_sub_epi32(top, _mm256_slli_epi32(_mm256_srli_epi32(code, 3), 23)));
}

// The codes of two blocks (c0, c1: the first's elements 0-7 and 8-15; c2, c3: the second's),
// each at most 15, as 16 bytes, the even element in the low nibble.
inline void store_e2m1_blocks2(uint8_t* dst, __m256i c0, __m256i c1, __m256i c2, __m256i c3) {
  // Per 128-bit half h: bytes c0[4h..4h+3], c1[4h..], c2[4h..], c3[4h..].
  const __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
  // even + 16 * odd: per half, the pairs (2h, 2h + 1) of c0, c1, c2, c3 as 16-bit units.
  const __m256i pairs = _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x1001));
  const __m256i p = _mm256_packus_epi16(pairs, pairs);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm_unpacklo_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
}

// A segment's statistics from its vector blocks: saturated and flushed elements counted in
// lanes (a compare mask is -1 where true, so subtracting it counts), and the largest block amax
// and amax * factor as lane maxima.
struct Nvfp4LaneStats8 {
  __m256i saturated;
  __m256i flushed;
  __m256 best;
  __m256 peak;

  static Nvfp4LaneStats8 zero() {
    return {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_set1_ps(-1.0f),
            _mm256_setzero_ps()};
  }
};

// 8 blocks' amax: block_amax_in's where the caller has them, else their own maxima of the magnitude
// bits (own), a NaN's bits (above infinity's) made the quiet NaN.
__attribute__((always_inline)) inline __m256 group_amax(__m256i own, const float* block_amax_in) {
  if (block_amax_in) return _mm256_loadu_ps(block_amax_in);
  return _mm256_castsi256_ps(
      _mm256_blendv_epi8(own, _mm256_set1_epi32(static_cast<int>(kQuietNan)),
                         _mm256_cmpgt_epi32(own, _mm256_set1_epi32(0x7F800000))));
}

// A group of 8 blocks' own amax bits, factors and the blocks the scalar body casts (factor NaN
// or infinite, where x = 0 makes x * factor NaN), taken before their codes (prepare_group8), so
// that a loop can take the next group's while it codes one.
struct FloatGroup {
  __m256i own;  // a NaN's bits above infinity's
  __m256 factor;
  __m256 scalar_lanes;
  unsigned to_scalar;
  alignas(32) float f[8];
};

// encode_group8's first half: the 8 blocks' amax (block_amax_in's 8, or their own by integer
// maxima of the magnitude bits), their scales (written; by sc's compares where they serve) and
// factors. With kGivenOnly and block_amax_in, g.own is block_amax_in's (the own amax are not
// taken: no statistics, or records taken from the tiles' own amax).
template <DType::Id kSrc, bool kGivenOnly = false>
[[gnu::always_inline]] inline void prepare_group8(const void* src, const float* block_amax_in,
                                                  float tensor_scale,
                                                  const Nvfp4ScaleCodeThresholds& sc,
                                                  uint8_t* scales, FloatGroup& g) {
  __m256i m[8];
  if (kGivenOnly && block_amax_in) {
    g.own = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_amax_in));
  } else if constexpr (kSrc == DType::Id::bf16) {
    const auto* p = static_cast<const uint16_t*>(src);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      m[k] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                              _mm256_set1_epi16(0x7FFF));
    g.own = transposed_max8_16(m);
  } else {
    const auto* p = static_cast<const float*>(src);
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
      m[k] = _mm256_max_epi32(
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k)),
                           magnitude),
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k + 8)),
                           magnitude));
    g.own = transposed_max8(m);
  }
  const __m256 amax = group_amax(g.own, block_amax_in);
  __m256i scale_codes;
  const __m256i bits = _mm256_castps_si256(amax);
  if (scale_codes8_serve(sc, bits)) {
    scale_codes = scale_codes8(sc, bits);
    g.factor = sc.factors_ok
                   ? scale_factors8(sc, scale_codes)
                   : _mm256_div_ps(_mm256_set1_ps(1.0f / tensor_scale), e4m3_values(scale_codes));
  } else {
    g.factor = nvfp4_block_scales(amax, tensor_scale, scale_codes);
  }
  _mm_storel_epi64(reinterpret_cast<__m128i*>(scales), bytes_of(scale_codes));
  // A factor that is NaN or infinite (where x = 0 makes x * factor NaN) is the scalar body's.
  g.scalar_lanes =
      _mm256_cmp_ps(g.factor, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_NLT_UQ);
  g.to_scalar = static_cast<unsigned>(_mm256_movemask_ps(g.scalar_lanes));
  _mm256_store_ps(g.f, g.factor);
}

// encode_group8's second half, from its prepared group g.
template <bool kSr, bool kStats, DType::Id kSrc>
[[gnu::always_inline]] inline unsigned encode_prepared8(const void* src, const FloatGroup& g,
                                                        SrWords8* sr, uint64_t offset, uint64_t row,
                                                        int64_t col, uint8_t* codes,
                                                        Nvfp4LaneStats8* st) {
  const DType dtype{kSrc};
  // Made for stochastic rounding only (the asm that hides them would keep them otherwise).
  [[maybe_unused]] const auto sr_constants = [] {
    if constexpr (kSr)
      return StochasticCodeConstants8();
    else
      return 0;
  }();
  if constexpr (kSr) sr->need(offset, row, col, col + 16 * 7);
  const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(kE2m1Max);
#pragma GCC unroll 4
  for (int k = 0; k < 8; k += 2) {
    __m256i c[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int blk = k + j / 2, h = j % 2;
      const __m256 x = load8(src, dtype, 16 * blk + 8 * h);
      const __m256 y = _mm256_mul_ps(x, _mm256_set1_ps(g.f[blk]));
      if constexpr (kSr) {
        // Block blk's lanes 8h.. read their bytes of a word of the blocks of column c0's group.
        const int64_t c0 = col + 16 * blk;
        const __m256i word = sr->words(c0)[h][sr_word_index(static_cast<uint64_t>(c0))];
        // A NaN in y makes the block's factor NaN: the scalar body casts it again.
        c[j] = e2m1_codes_stochastic<false>(
            y, random_bytes(word, sr_byte_index(static_cast<uint64_t>(c0)), sr_constants),
            sr_constants);
      } else {
        c[j] = e2m1_codes_of_numbers(y);
      }
      if constexpr (kStats) {
        if (!((g.to_scalar >> blk) & 1)) {
          st->saturated = _mm256_sub_epi32(
              st->saturated, _mm256_castps_si256(_mm256_cmp_ps(abs8(y), six, _CMP_GT_OQ)));
          const __m256i zero_code = _mm256_cmpeq_epi32(_mm256_and_si256(c[j], _mm256_set1_epi32(7)),
                                                       _mm256_setzero_si256());
          const __m256 nonzero = _mm256_cmp_ps(x, zero, _CMP_NEQ_OQ);
          st->flushed = _mm256_sub_epi32(st->flushed,
                                         _mm256_and_si256(zero_code, _mm256_castps_si256(nonzero)));
        }
      }
    }
    store_e2m1_blocks2(codes + 8 * k, c[0], c[1], c[2], c[3]);
  }
  if constexpr (kStats) {
    // The blocks' own amax with NaN passed over is a number where the factor is finite (a
    // block holding a NaN has a NaN factor); the other lanes count 0.
    const __m256 own_f = _mm256_andnot_ps(g.scalar_lanes, _mm256_castsi256_ps(g.own));
    st->best = _mm256_max_ps(own_f, st->best);
    st->peak =
        _mm256_max_ps(_mm256_mul_ps(own_f, _mm256_andnot_ps(g.scalar_lanes, g.factor)), st->peak);
  }
  return g.to_scalar;
}

// 8 blocks of 16 elements from src (128 elements, all inside the segment): their amax
// (block_amax_in's 8, or their own by integer maxima of the magnitude bits), scales and factors
// as vectors, then each block's codes, rounded to nearest or (kSr) stochastically with the
// bytes of the 256-column groups from column `col` (a multiple of 16; philox.h's sr_byte), two
// blocks' codes stored at once. Returns the blocks whose factor is NaN or infinite (their codes
// and scales are left for the scalar body, and they are not counted).
template <bool kSr, bool kStats, DType::Id kSrc>
inline unsigned encode_group8(const void* src, const float* block_amax_in, float tensor_scale,
                              const Nvfp4ScaleCodeThresholds& sc, SrWords8* sr, uint64_t offset,
                              uint64_t row, int64_t col, uint8_t* codes, uint8_t* scales,
                              Nvfp4LaneStats8* st) {
  FloatGroup g;
  prepare_group8<kSrc>(src, block_amax_in, tensor_scale, sc, scales, g);
  return encode_prepared8<kSr, kStats, kSrc>(src, g, sr, offset, row, col, codes, st);
}

// The scalar body's cast of block b (len elements) of a segment, and with kStats its counts
// (nvfp4_run_stats) added to run: for the blocks whose factor is NaN or infinite and a row's
// short last block.
template <bool kSr, bool kStats>
void nvfp4_scalar_block(const void* src, DType dtype, float tensor_scale,
                        const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                        int64_t first_col, uint8_t* codes, uint8_t* scales, int64_t b, int64_t len,
                        MxStatsRun& run) {
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
}

// The last 1-7 whole blocks of a segment, from block b of `blocks`, cast from a zero-padded copy
// of 8 blocks by cast8(x, block_amax_in or nullptr, codes, scales), which returns the blocks the
// scalar body casts; their bytes are copied out (the padding's dropped), and scalar(block) is
// called for each such block of the segment's.
template <class Cast8, class Scalar>
[[gnu::always_inline]] inline void nvfp4_last_blocks(const void* src, DType dtype,
                                                     const float* block_amax_in, int64_t b,
                                                     int64_t blocks, uint8_t* codes,
                                                     uint8_t* scales, Cast8 cast8, Scalar scalar) {
  const int count = static_cast<int>(blocks - b);
  alignas(32) unsigned char x[8 * kNvfp4Block * sizeof(float)] = {};
  alignas(32) float amax_in[8] = {};
  std::memcpy(x, at(src, dtype, b * kNvfp4Block), count * kNvfp4Block * dtype.itemsize());
  if (block_amax_in) std::copy(block_amax_in + b, block_amax_in + blocks, amax_in);
  uint8_t c[8 * kNvfp4Block / 2], s[8];
  unsigned nan = cast8(x, block_amax_in ? amax_in : nullptr, c, s);
  std::memcpy(codes + b * kNvfp4Block / 2, c, count * kNvfp4Block / 2);
  std::memcpy(scales + b, s, count);
  for (nan &= (1u << count) - 1; nan; nan &= nan - 1) scalar(b + std::countr_zero(nan));
}

// A segment's statistics from its lanes (st) added to run's, where it has vector blocks.
inline void nvfp4_add_lane_stats(const Nvfp4LaneStats8& st, int64_t blocks, MxStatsRun& run) {
  if (blocks > 0) {
    run.best = std::max(run.best, hmax(st.best));
    // max of amax * factor / 6 over the blocks is their max over 6 (division is monotonic).
    run.peak = std::max(run.peak, static_cast<double>(hmax(st.peak)) / kE2m1Max);
  }
  alignas(32) int32_t lanes[2][8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[0]), st.saturated);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes[1]), st.flushed);
  for (int k = 0; k < 8; ++k) {
    run.saturated += lanes[0][k];
    run.flushed += lanes[1][k];
  }
}

}  // namespace
}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
