// AVX2 (+FMA, F16C) bodies of the MX casts to E2M1 with blocks along the columns
// (mx_quantize_columns), which the AVX-512 level runs too: a band of 32 rows read as it lies
// (mx_columns_avx2.h's walk), in chunks of columns, twice: each column's amax as vertical maxima
// of the magnitude bits row by row, then, from the chunk in cache, each row's codes under its
// columns' scales, two a byte in the source's layout. Under the floor scale the codes come from a
// byte table of the E2M1 steps (an offset a column), past the caches for a large cast, under rceil
// from float32 lanes. A column whose block the lanes do not cast (floor: a tiny, infinite or NaN
// amax; rceil: a NaN amax) is encoded again by the scalar body (encode_column_block_scalar).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/common/stream_codes.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_columns_levels.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"
#include "kernels/cpu/mx/mx_columns_avx2.h"
#include "kernels/cpu/mx/mx_columns_e2m1_floor.h"

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;

// A band's E2M1 codes in float32 lanes (encode_block's arithmetic with a multiplier a lane):
// chunks of `width` columns (a multiple of 32) from column c0. A rceil column whose amax is NaN
// (a NaN multiplier) goes to the scalar body.
template <E8m0Rounding R, bool kStats, DType::Id kSrc>
void e2m1_chunk(const void* src, int64_t ld, int n, int64_t c0, int64_t width, uint8_t* codes,
                int64_t code_row, uint8_t* scale_row, MxStatsRun* runs, int64_t& saturated,
                int64_t& flushed, Ahead ahead) {
  constexpr Element E = Element::kE2m1;
  constexpr int64_t kItem = kSrc == DType::Id::f32 ? 4 : 2;
  constexpr int64_t kMax = kChunkBytes / (kMxBlock * kItem) / 8;
  const DType dtype{kSrc};
  alignas(32) __m256i amax[kMax];
  alignas(32) float mul[kMax * 8];
  const int64_t groups = width / 8;
  column_amax<kSrc>(src, ld, n, c0, groups, amax);
  alignas(32) uint32_t fallback[kMax];
  for (int64_t g = 0; g < groups; ++g) {
    alignas(32) uint32_t bits[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), amax[g]);
    uint8_t* s = scale_row + c0 + 8 * g;
    scales8<E, R>(amax[g], s, mul + 8 * g);
    unsigned fb = 0;
    for (int j = 0; j < 8; ++j) {
      if (R == E8m0Rounding::kRceil && s[j] == kE8m0Nan) {
        fb |= 1u << j;
        mul[8 * g + j] = 0.0f;  // lanes the scalar body redoes
      }
      if (kStats && bits[j] > 0x7F800000u && !((fb >> j) & 1u)) {
        float a = 0.0f;  // the column's amax, NaN passed over
        for (int k = 0; k < n; ++k) {
          const float v = std::fabs(load(src, dtype, k * ld + c0 + 8 * g + j));
          a = v > a ? v : a;
        }
        bits[j] = bits_of(a);
      }
    }
    fallback[g] = fb;
    if constexpr (kStats) record_columns<E, kSrc>(runs + c0 + 8 * g, bits, s, mul + 8 * g, 8, fb);
  }
  constexpr bool clamp = R == E8m0Rounding::kRceil;
  __m256i sat = _mm256_setzero_si256(), flush = _mm256_setzero_si256();
  for (int k = 0; k < n; ++k) {
    uint8_t* out = codes + k * code_row + c0 / 2;
    for (int64_t g = 0; g < groups; ++g) {
      if (kItem == 4 || g % 2 == 0) ahead.next();
      const __m256 x = load8(src, dtype, k * ld + c0 + 8 * g);
      __m256 y = _mm256_mul_ps(x, _mm256_load_ps(mul + 8 * g));
      if constexpr (kStats)
        sat = _mm256_sub_epi32(
            sat, _mm256_castps_si256(_mm256_cmp_ps(abs8(y), _mm256_set1_ps(kE2m1Max), _CMP_GT_OQ)));
      if constexpr (clamp) y = clamp8(y, kE2m1Max);
      const __m256i c = e2m1_codes(y);
      store_e2m1(out + 4 * g, c);
      if constexpr (kStats) {
        const __m256i zero_code =
            _mm256_cmpeq_epi32(_mm256_and_si256(c, _mm256_set1_epi32(7)), _mm256_setzero_si256());
        const __m256i nonzero =
            _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_OQ));
        flush = _mm256_sub_epi32(flush, _mm256_and_si256(zero_code, nonzero));
      }
    }
  }
  for (int64_t g = 0; g < groups; ++g)
    for (unsigned f = fallback[g]; f; f &= f - 1) {
      const int j = __builtin_ctz(f);
      const int64_t c = c0 + 8 * g + j;
      if constexpr (kStats) {  // the vector lanes' counts of the column, taken back
        // A NaN multiplier's lanes ran with 0: their y is 0 or NaN, none saturated; flushed
        // counts the nonzero finite elements, which the scalar body counts again.
        for (int k = 0; k < n; ++k) {
          const float v = load(src, dtype, k * ld + c);
          if (v == v && v != 0.0f && !std::isinf(v)) --flushed;
        }
      }
      encode_column_block_scalar(src, dtype, ld, n, c, E, R, codes, code_row, scale_row + c,
                                 kStats ? runs + c : nullptr);
    }
  if constexpr (kStats) {
    saturated += lane_sum(sat);
    flushed += lane_sum(flush);
  }
}

// The AVX2 level's Lookup (mx_columns_e2m1_floor.h): the rounding bit as a compare's -1 taken
// off (Zen 4 runs shifts on the two pipes of the packs and shuffles, which bound this loop), and
// the codes of q = b - 16 by two pshufb; the pairs in order by a pack and permutes. `high` holds b
// in [16, 31] (q >= 0; below, the byte's top bit gives 0); `low` b in [0, 15] at q + 16, which is
// negative (0) below b = 0 and for b >= 16 wraps to low[b - 16], at most 1, under high's 6 and 7:
// the codes rise with b, so the larger of the two is the code.
struct Fp4Avx2Lookup : Fp4ColumnConsts {
  static constexpr int kSteps = 0;
  __m256i low, high, sixteen, bit6, bit22, dword_order, word_order;
  Fp4Avx2Lookup()
      : low(_mm256_setr_epi8(0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 5, 0, 1, 1, 1, 1, 1, 1, 2,
                             2, 2, 3, 3, 4, 4, 5, 5)),
        high(_mm256_setr_epi8(6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 7, 7, 7, 7, 7,
                              7, 7, 7, 7, 7, 7, 7, 7, 7)),
        sixteen(_mm256_set1_epi8(16)),
        bit6(_mm256_set1_epi16(1 << 6)),
        bit22(_mm256_set1_epi32(1 << 22)),
        dword_order(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)),
        word_order(_mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0, 1, 8,
                                    9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15)) {}
  [[gnu::always_inline]] __m256i round16(__m256i t, __m256i a) const {
    return _mm256_sub_epi16(t, _mm256_cmpeq_epi16(_mm256_and_si256(a, bit6), bit6));
  }
  [[gnu::always_inline]] __m256i round32(__m256i t, __m256i a) const {
    return _mm256_sub_epi32(t, _mm256_cmpeq_epi32(_mm256_and_si256(a, bit22), bit22));
  }
  [[gnu::always_inline]] static __m256i pack16(__m256i v0, __m256i v1) {
    return _mm256_packs_epi16(v0, v1);
  }
  [[gnu::always_inline]] __m256i codes(__m256i q) const {
    return _mm256_max_epu8(_mm256_shuffle_epi8(high, q),
                           _mm256_shuffle_epi8(low, _mm256_add_epi8(q, sixteen)));
  }
  // The pairs' low bytes by an unsigned pack: bfloat16 dwords [a 0-7, a 16-23, b 0-7, b 16-23 |
  // a 8-15, ...] (columns of halves a, b), put in order by a dword permute; float32 words [a 0-3,
  // a 8-11, a 16-19, a 24-27, b 0-3, ... | a 4-7, a 12-15, ...], the lanes' first halves paired
  // by a qword permute and their words interleaved.
  template <bool kBf16>
  [[gnu::always_inline]] __m256i order(__m256i p0, __m256i p1) const {
    const __m256i bytes = _mm256_packus_epi16(p0, p1);
    return kBf16 ? _mm256_permutevar8x32_epi32(bytes, dword_order)
                 : _mm256_shuffle_epi8(_mm256_permute4x64_epi64(bytes, 0xD8), word_order);
  }
};

// encode_column_band to E2M1 under rceil.
void rceil_columns(const void* src, DType dtype, int64_t rows, int64_t cols, uint8_t* codes,
                   uint8_t* scales, MxStatsRun* runs) {
  constexpr Element E = Element::kE2m1;
  constexpr E8m0Rounding R = E8m0Rounding::kRceil;
  for_stats_and_dtype(dtype, runs, [&]<bool kStats, DType::Id kSrc>() {
    walk_column_bands<E, R, kStats, kSrc>(
        src, rows, cols, codes, scales, runs, 64, [](const ColumnChunk& k) {
          e2m1_chunk<E8m0Rounding::kRceil, kStats, kSrc>(k.band, k.ld, k.n, k.c0, k.width, k.codes,
                                                         k.code_row, k.scale_row, k.runs,
                                                         *k.saturated, *k.flushed, k.ahead);
        });
  });
}

}  // namespace

void avx2::mx_columns_e2m1(const void* src, DType dtype, int64_t rows, int64_t cols, E8m0Rounding r,
                           uint8_t* codes, uint8_t* scales, MxStatsRun* runs) {
  if (r == E8m0Rounding::kFloor)
    floor_columns<Fp4Avx2Lookup>(src, dtype, rows, cols, codes, scales, runs);
  else
    rceil_columns(src, dtype, rows, cols, codes, scales, runs);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
