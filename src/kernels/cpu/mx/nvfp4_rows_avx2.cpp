// AVX2 (+FMA, F16C) bodies of the NVFP4 row casts and of MXFP4 with stochastic rounding, 8 lanes
// at a time: one NVFP4 block is two vectors. The per-tensor amax pass; the cast of a row's 1x16
// blocks (8 blocks' amax, E4M3 scales and factors as one vector, then each block's codes, rounded
// to nearest or stochastically, with the statistics counted from the vectors when asked:
// nvfp4_rows_avx2.h; a float32 source rounded to nearest takes its codes from a byte table of the
// products' steps), which casts the 16x16 tiles' rows too from the tiles' amax
// (nvfp4_tiles.cpp); a bfloat16 source rounded to nearest takes its own body
// (nvfp4_rows_bf16_avx2.cpp); the decode. Blocks whose factor is NaN or infinite, and a row's
// short last block, run the scalar body (mx_cast.cpp).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "kernels/cpu/mx/nvfp4_cast_levels.h"
#include "kernels/cpu/mx/nvfp4_lanes_avx2.h"
#include "kernels/cpu/mx/nvfp4_rows_avx2.h"
#include "kernels/cpu/mx/nvfp4_scale_codes.h"
#include "kernels/cpu/mx/nvfp4_sr_avx2.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;
using namespace nvfp4_avx2;

// --- float32 rounded to nearest: E2M1 codes by a byte table ------------------------------------
//
// y = |x| * factor is the float32 product the scalar body rounds (its sign is x's). Every step of
// e2m1_code's grid lies at y = 0.25 * (1 + k / 4) * 2^n, a multiple of kStep = 2^21 in the bits
// v = bits(y) - bits(0.25): code 1 from v > 0, 2 from v >= 6 kStep, 3 from v > 9 kStep, 4 from
// v >= 11 kStep, 5 from v > 13 kStep, 6 from v >= 15 kStep, 7 from v > 17 kStep (ties round to
// the even code). The index b = ceil((v + bit) / kStep), bit the bit of v worth 2 kStep, puts
// every such v on its side: a non-strict step (6, 11, 15) has that bit set and a strict one (0,
// 9, 13, 17) clear, and a v between two steps takes the upper's index either way. b - 16,
// saturated to a byte, gives the code through two 16-entry byte tables (b <= 0 is code 0, from
// y <= 0.25 down to 0; b >= 18 code 7, y > 5 up to infinity). Saturated: y > 6; flushed: code 0
// from x != 0. The same index as the MX rows' E2M1 table (mx_rows_e2m1_avx2.cpp), there under
// power-of-2 scales.

// The constants of the table, read from memory.
struct E2m1StepTable {
  __m256i low, high;      // the codes of b = 0..15 and 16..31 in each 128-bit half
  __m256i c15, sixteen;   // 15: the high table's index min(b - 16, 15); 16: the low's b from b - 16
  __m256i first_flushed;  // -15: b - 16 below it is code 0
  __m256i eight;          // the sign's bit of a code
  __m256i pair;           // maddubs weights 1, 16: two codes to a byte
  __m256i dword_order;
  __m256i magnitude, one, six;
  __m256i offset;  // kStep - 1 - 16 kStep - bits(0.25): bits(y) + offset + bit >> 21 is b - 16
  E2m1StepTable()
      : low(_mm256_setr_epi8(0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 5, 0, 1, 1, 1, 1, 1, 1, 2,
                             2, 2, 3, 3, 4, 4, 5, 5)),
        high(_mm256_setr_epi8(6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 7, 7, 7, 7, 7,
                              7, 7, 7, 7, 7, 7, 7, 7, 7)),
        c15(_mm256_set1_epi8(15)),
        sixteen(_mm256_set1_epi8(16)),
        first_flushed(_mm256_set1_epi8(-15)),
        eight(_mm256_set1_epi8(8)),
        pair(_mm256_set1_epi16(0x1001)),
        dword_order(_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)),
        magnitude(_mm256_set1_epi32(0x7FFFFFFF)),
        one(_mm256_set1_epi32(1)),
        six(_mm256_set1_epi32(0x40C00000)),
        offset(_mm256_set1_epi32((1 << 21) - 1 - (16 << 21) - 0x3E800000)) {}
};

// The codes of two blocks (p: 32 float32 elements; f0, f1: their factors) as 16-bit units even +
// 16 * odd in element order, and with kStats their saturated elements (-1 masks added in 32-bit
// lanes) and flushed ones (counts in bytes).
template <bool kStats>
[[gnu::always_inline]] inline __m256i e2m1_table_pairs(const float* p, __m256 f0, __m256 f1,
                                                       const E2m1StepTable& t, __m256i& saturated,
                                                       __m256i& flushed) {
  __m256i x[4], a[4], index[4], over[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    x[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * j));
    a[j] = _mm256_and_si256(x[j], t.magnitude);
    const __m256i y =
        _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(a[j]), j < 2 ? f0 : f1));
    const __m256i bit = _mm256_and_si256(_mm256_srli_epi32(y, 22), t.one);
    index[j] = _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(y, t.offset), bit), 21);
    if constexpr (kStats) over[j] = _mm256_cmpgt_epi32(y, t.six);
  }
  // Per 128-bit half: elements 0-3 of x[0], x[1], x[2], x[3], then 4-7 of each.
  const __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(index[0], index[1]),
                                       _mm256_packs_epi32(index[2], index[3]));
  const __m256i signs =
      _mm256_packs_epi16(_mm256_packs_epi32(x[0], x[1]), _mm256_packs_epi32(x[2], x[3]));
  // q = b - 16: the high table's code at min(q, 15) where q >= 0 (0 where q's sign is set); the
  // low table's at b = q + 16 where that lies in 0..15 (0 below, where b's sign is set), and where
  // b >= 16 codes 0-5 (or 0, b's sign set from q >= 112) below the high table's 6 and 7. The
  // larger of the two is b's code.
  const __m256i codes = _mm256_max_epu8(_mm256_shuffle_epi8(t.high, _mm256_min_epi8(q, t.c15)),
                                        _mm256_shuffle_epi8(t.low, _mm256_add_epi8(q, t.sixteen)));
  if constexpr (kStats) {
    saturated = _mm256_sub_epi32(saturated, _mm256_add_epi32(_mm256_add_epi32(over[0], over[1]),
                                                             _mm256_add_epi32(over[2], over[3])));
    // Code 0 and x nonzero: the packs of the magnitudes keep a nonzero one nonzero.
    const __m256i nonzero =
        _mm256_packs_epi16(_mm256_packs_epi32(a[0], a[1]), _mm256_packs_epi32(a[2], a[3]));
    flushed =
        _mm256_sub_epi8(flushed, _mm256_sign_epi8(_mm256_cmpgt_epi8(t.first_flushed, q), nonzero));
  }
  const __m256i nibbles = _mm256_permutevar8x32_epi32(
      _mm256_blendv_epi8(codes, _mm256_or_si256(codes, t.eight), signs), t.dword_order);
  return _mm256_maddubs_epi16(nibbles, t.pair);
}

// The 8 blocks of a prepared float32 group whose factors are all finite (g.to_scalar 0), rounded
// to nearest by the table, their codes stored and with kStats their statistics counted.
// The records (best, peak) come from g alone: rows that share g (a tile row's) take them once.
template <bool kStats>
[[gnu::always_inline]] inline void encode_f32_table8(const float* p, const FloatGroup& g,
                                                     const E2m1StepTable& t, uint8_t* codes,
                                                     Nvfp4LaneStats8* st, bool records) {
  __m256i saturated = _mm256_setzero_si256(), flushed = saturated;
#pragma GCC unroll 2
  for (int k = 0; k < 8; k += 4) {
    const __m256i ab =
        e2m1_table_pairs<kStats>(p + 16 * k, _mm256_broadcast_ss(g.f + k),
                                 _mm256_broadcast_ss(g.f + k + 1), t, saturated, flushed);
    const __m256i cd =
        e2m1_table_pairs<kStats>(p + 16 * k + 32, _mm256_broadcast_ss(g.f + k + 2),
                                 _mm256_broadcast_ss(g.f + k + 3), t, saturated, flushed);
    // qwords [ab 0-7, cd 0-7 | ab 8-15, cd 8-15] put in order.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 8 * k),
                        _mm256_permute4x64_epi64(_mm256_packus_epi16(ab, cd), 0xD8));
  }
  if constexpr (kStats) {
    st->saturated = _mm256_add_epi32(st->saturated, saturated);
    st->flushed = _mm256_add_epi32(st->flushed, _mm256_sad_epu8(flushed, _mm256_setzero_si256()));
    if (!records) return;
    const __m256 own = _mm256_castsi256_ps(g.own);
    st->best = _mm256_max_ps(own, st->best);
    st->peak = _mm256_max_ps(_mm256_mul_ps(own, g.factor), st->peak);
  }
}

// A row's float32 groups of 8 blocks prepared once for every row that shares their amax (a 16x16
// tile row's rows: prepare_shared_groups8), and the first row's scales, which the preparation
// wrote.
struct FloatSharedGroups {
  static constexpr int64_t kMaxGroups = 64;  // rows of up to 8192 elements
  FloatGroup group[kMaxGroups];
  const uint8_t* scales = nullptr;
};

// The NVFP4 cast of a segment, 8 blocks at a time (encode_group8); the segment's last blocks
// that make no group of 8 are cast from a zero-padded copy and their bytes copied out. With
// kStats it returns nvfp4_run_stats's counts of the segment, taken from the vectors the cast
// holds: a block's amax with NaN passed over, |x * factor| > 6, and codes whose magnitude bits
// are 0 from x != 0 (not NaN). Blocks whose factor is NaN or infinite, and a row's short last
// block, run the scalar body and are counted by nvfp4_run_stats. With kShared (rounded to
// nearest), `shared` holds the groups prepared from block_amax_in (no own amax needed): they take
// those in place of their own preparation, the first row's scales copied, and their records
// only in the row whose scales they wrote.
template <bool kSr, bool kStats, DType::Id kSrc, bool kTileRecords = false, bool kShared = false>
MxStatsRun nvfp4_encode_as(const void* src, int64_t n, float tensor_scale,
                           const float* block_amax_in, uint64_t seed, uint64_t offset, int64_t row,
                           int64_t first_col, uint8_t* codes, uint8_t* scales,
                           const FloatSharedGroups* shared = nullptr) {
  const DType dtype{kSrc};
  const int64_t blocks = n / kNvfp4Block, full = blocks * kNvfp4Block;
  std::optional<SrWords8> sr;
  if constexpr (kSr) sr.emplace(seed);
  Nvfp4LaneStats8 st = Nvfp4LaneStats8::zero();
  MxStatsRun run;
  auto scalar_block = [&](int64_t b, int64_t len) {
    nvfp4_scalar_block<kSr, kStats>(src, dtype, tensor_scale, block_amax_in, seed, offset, row,
                                    first_col, codes, scales, b, len, run);
  };
  const Nvfp4ScaleCodeThresholds& sc = nvfp4_scale_code_thresholds(tensor_scale);
  auto group = [&](const void* x, const float* amax_in, int64_t b, uint8_t* c, uint8_t* s) {
    if constexpr (kSr)
      return encode_sr_group8<kStats, kSrc>(x, amax_in, tensor_scale, sc, &*sr, offset,
                                            static_cast<uint64_t>(row), first_col + b * kNvfp4Block,
                                            c, s, &st);
    return encode_group8<kSr, kStats, kSrc>(x, amax_in, tensor_scale, sc, sr ? &*sr : nullptr,
                                            offset, static_cast<uint64_t>(row),
                                            first_col + b * kNvfp4Block, c, s, &st);
  };
  // Each group's amax and factors taken a group ahead, so that their chain (a reduction, the
  // scale codes' compares) hides behind the blocks before. Given the blocks' amax, their own are
  // taken only for the statistics' records, and not from the tiles' own.
  constexpr bool kGivenOnly = !kStats || kTileRecords;
  auto prepare = [&](int64_t b, FloatGroup & g) __attribute__((always_inline)) {
    prepare_group8<kSrc, kGivenOnly>(at(src, dtype, b * kNvfp4Block),
                                     block_amax_in ? block_amax_in + b : nullptr, tensor_scale, sc,
                                     scales + b, g);
  };
  const int64_t groups = blocks / 8;
  const E2m1StepTable table;
  FloatGroup ahead[2];
  const bool records = !kShared || shared->scales == scales;
  if (groups > 0 && !kShared) prepare(0, ahead[0]);
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const void* x = at(src, dtype, b * kNvfp4Block);
    uint8_t* c = codes + b * kNvfp4Block / 2;
    const int64_t q = b / 8;
    const FloatGroup& g = kShared ? shared->group[q] : ahead[q & 1];
    // The group's 8 lines 4 KiB on (kernels/cpu/common/fetch_ahead.h).
    if constexpr (!kSr) fetch_group_lines_ahead(x);
    if (!kShared && q + 1 < groups) prepare(b + 8, ahead[(q + 1) & 1]);
    if (!records) std::memcpy(scales + b, shared->scales + b, 8);
    unsigned nan;
    if constexpr (kSr) {
      nan = encode_sr_prepared8<kStats, kSrc>(x, g, &*sr, offset, static_cast<uint64_t>(row),
                                              first_col + b * kNvfp4Block, c, &st);
    } else {
      if constexpr (kSrc == DType::Id::f32) {
        if (g.to_scalar == 0) {
          encode_f32_table8<kStats>(static_cast<const float*>(x), g, table, c, &st, records);
          continue;
        }
      }
      nan = encode_prepared8<kSr, kStats, kSrc>(x, g, nullptr, 0, 0, 0, c, &st);
    }
    for (; nan; nan &= nan - 1) scalar_block(b + std::countr_zero(nan), kNvfp4Block);
  }
  if (b < blocks) {
    nvfp4_last_blocks(
        src, dtype, block_amax_in, b, blocks, codes, scales,
        [&](const unsigned char* x, const float* in, uint8_t* c, uint8_t* s) {
          return group(x, in, b, c, s);
        },
        [&](int64_t blk) { scalar_block(blk, kNvfp4Block); });
  }
  if (full < n) scalar_block(blocks, n - full);
  if constexpr (kStats) nvfp4_add_lane_stats(st, blocks, run);
  return run;
}

// kTileRecords: block_amax_in are the source's own tiles' (MxKernels::nvfp4_encode_stats).
template <bool kSr, bool kStats, bool kTileRecords = false>
MxStatsRun nvfp4_encode_body(const void* src, DType dtype, int64_t n, float tensor_scale,
                             const float* block_amax_in, uint64_t seed, uint64_t offset,
                             int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  if (dtype == kFloat32)
    return nvfp4_encode_as<kSr, kStats, DType::Id::f32, kTileRecords>(
        src, n, tensor_scale, block_amax_in, seed, offset, row, first_col, codes, scales);
  if constexpr (kSr)
    return nvfp4_encode_as<kSr, kStats, DType::Id::bf16>(src, n, tensor_scale, block_amax_in, seed,
                                                         offset, row, first_col, codes, scales);
  else
    return avx2::nvfp4_encode_bf16(static_cast<const uint16_t*>(src), n, tensor_scale,
                                   block_amax_in, kStats, kTileRecords, false, codes, scales);
}

}  // namespace

namespace avx2 {

// mxfp4_sr.h's cast on 8 lanes: each 1x32 block's E8M0 floor scale, then the stochastic rounding
// of x * 2^-e * 3/4 with the column's random byte (n and first_col multiples of 32).
void mxfp4_encode_sr(const void* src, DType dtype, int64_t n, uint64_t seed, uint64_t offset,
                     int64_t row, int64_t first_col, uint8_t* codes, uint8_t* scales) {
  SrWords8 sr(seed);
  const StochasticCodeConstants8 sr_constants;
  const __m256 prescale = _mm256_set1_ps(kMxfp4SrPrescale), zero = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += kMxBlock) {
    const int64_t col = first_col + i;
    sr.need(offset, static_cast<uint64_t>(row), col, col);
    const auto& words = sr.words(col);
    __m256 x[4], m = zero;
    bool nan = false;
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      x[q] = load8(src, dtype, i + 8 * q);
      nan |= any_nan(x[q]);
      m = _mm256_max_ps(abs8(x[q]), m);
    }
    const uint8_t s = nan ? kE8m0Nan : e8m0_floor(hmax(m), element_limits(Element::kE2m1).max_pow2);
    scales[i / kMxBlock] = s;
    const __m256 r = _mm256_set1_ps(floor_reciprocal(s));
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      // Column c's lane c % 16 of the group's blocks: half (c >> 3) & 1 of the word's lanes.
      const auto c = static_cast<uint64_t>(col + 8 * q);
      const __m256i random =
          random_bytes(words[(c >> 3) & 1][sr_word_index(c)], sr_byte_index(c), sr_constants);
      store_e2m1(codes + i / 2 + 4 * q,
                 e2m1_codes_stochastic(_mm256_mul_ps(_mm256_mul_ps(x[q], r), prescale), random,
                                       sr_constants));
    }
  }
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
                              const float* block_amax_in, bool tile_records, bool stochastic,
                              uint64_t seed, uint64_t offset, int64_t row, int64_t first_col,
                              uint8_t* codes, uint8_t* scales) {
  if (stochastic)
    return nvfp4_encode_body<true, true>(src, dtype, n, tensor_scale, block_amax_in, seed, offset,
                                         row, first_col, codes, scales);
  if (tile_records && block_amax_in)
    return nvfp4_encode_body<false, true, true>(src, dtype, n, tensor_scale, block_amax_in, 0, 0, 0,
                                                0, codes, scales);
  return nvfp4_encode_body<false, true>(src, dtype, n, tensor_scale, block_amax_in, 0, 0, 0, 0,
                                        codes, scales);
}

MxStatsRun nvfp4_encode_f32_tile_rows(const float* src, int64_t rows, int64_t n, int64_t ld,
                                      float tensor_scale, const float* tile_amax, bool stats,
                                      bool tile_records, uint8_t* codes, int64_t code_ld,
                                      uint8_t* scales, int64_t scale_ld) {
  return nvfp4_with_stats(stats, tile_records, [&]<bool kStats, bool kTileRecords>() {
    // Rows whose statistics need their blocks' own amax, or longer than the groups hold, go one at
    // a time.
    auto row = [&](int64_t r, const FloatSharedGroups* shared) {
      return shared ? nvfp4_encode_as<false, kStats, DType::Id::f32, kTileRecords, true>(
                          src + r * ld, n, tensor_scale, tile_amax, 0, 0, 0, 0, codes + r * code_ld,
                          scales + r * scale_ld, shared)
                    : nvfp4_encode_as<false, kStats, DType::Id::f32, kTileRecords>(
                          src + r * ld, n, tensor_scale, tile_amax, 0, 0, 0, 0, codes + r * code_ld,
                          scales + r * scale_ld);
    };
    return nvfp4_tile_rows<FloatSharedGroups>(
        rows, (!kStats || kTileRecords) && n <= 8 * kNvfp4Block * FloatSharedGroups::kMaxGroups,
        [&](int64_t r) { return row(r, nullptr); },
        [&](FloatSharedGroups& shared) {
          const Nvfp4ScaleCodeThresholds& sc = nvfp4_scale_code_thresholds(tensor_scale);
          nvfp4_share_groups(shared, n / kNvfp4Block / 8, scales, [&](int64_t q, FloatGroup& g) {
            prepare_group8<DType::Id::f32, true>(src + 8 * q * kNvfp4Block, tile_amax + 8 * q,
                                                 tensor_scale, sc, scales + 8 * q, g);
          });
        },
        [&](int64_t r, const FloatSharedGroups& shared) { return row(r, &shared); });
  });
}

void nvfp4_decode(const uint8_t* codes, const uint8_t* scales, int64_t n, float tensor_scale,
                  float* out) {
  const int64_t full = n / kNvfp4Block * kNvfp4Block;
  for (int64_t i = 0; i < full; i += kNvfp4Block) {
    const __m256 s = _mm256_set1_ps(tensor_scale * e4m3_value(scales[i / kNvfp4Block]));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(e2m1_values(codes + i / 2), s));
    _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(e2m1_values(codes + i / 2 + 4), s));
  }
  if (full < n)
    kScalarKernels.nvfp4_decode(codes + full / 2, scales + full / kNvfp4Block, n - full,
                                tensor_scale, out + full);
}

// max |x| by integer maxima of the magnitude bits, 16 bfloat16 or 8 float32 lanes a vector (a
// NaN's bits lie above infinity's).
float amax(const void* src, DType dtype, int64_t n) {
  __m256i m0 = _mm256_setzero_si256(), m1 = m0;
  int64_t full;
  uint32_t bits;
  if (dtype == kBFloat16) {
    const auto* p = static_cast<const uint16_t*>(src);
    const __m256i magnitude = _mm256_set1_epi16(0x7FFF);
    full = n / 32 * 32;
    for (int64_t i = 0; i < full; i += 32) {
      m0 = _mm256_max_epu16(
          m0,
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), magnitude));
      m1 = _mm256_max_epu16(
          m1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 16)),
                               magnitude));
    }
    const __m256i h = _mm256_max_epu16(m0, m1);
    __m128i q = _mm_max_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    // The largest of 8 16-bit lanes: the smallest of their complements.
    q = _mm_minpos_epu16(_mm_xor_si128(q, _mm_set1_epi16(-1)));
    bits = static_cast<uint32_t>(~_mm_extract_epi16(q, 0) & 0xFFFF) << 16;
  } else {
    const auto* p = static_cast<const float*>(src);
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
    full = n / 16 * 16;
    for (int64_t i = 0; i < full; i += 16) {
      m0 = _mm256_max_epu32(
          m0,
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), magnitude));
      m1 = _mm256_max_epu32(
          m1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)),
                               magnitude));
    }
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_max_epu32(m0, m1));
    bits = *std::max_element(lanes, lanes + 8);
  }
  if (bits > 0x7F800000u) return float_of(kQuietNan);
  const float vec = float_of(bits);
  const float tail = kScalarKernels.amax(at(src, dtype, full), dtype, n - full);
  return tail != tail ? tail : (tail > vec ? tail : vec);
}

}  // namespace avx2

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
