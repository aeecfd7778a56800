#pragma once
// Internal: the block recipe's 128x128 group walk (fp8_block.h, detail::block_groups_*_e4m3_*),
// one walk for bfloat16 and float32 sources over lane traits L that the source's and level's file
// defines (fp8_block_avx2.cpp, fp8_block_f32_avx2.cpp, fp8_block_groups_avx512.cpp). A file
// includes this header after its `#pragma GCC target`, so that the walk takes its target; L lives
// in the file's unnamed namespace, so each instantiation is the file's own.
//
// A block's codes need its amax, so each group of blocks is read twice: a pass over its rows in
// memory order for the blocks' maxima, then the casts. The walk runs the second pass of a group
// together with the first pass of the group after it, row by row: row r of group i + 1 is folded
// into its maxima while row r of group i is cast (on rows read one group ago, from L2 and L3).
// The next group comes from memory through the hardware prefetchers, which follow the folds'
// demand loads (a run of up to 2 MiB): no software prefetch, as a walk that cast a group and then
// read the next one with its prefetches issued during the casts spent more time on them than they
// saved (at 4096 x 4096 float32, the maxima pass alone 0.11 ns a value, with the prefetch loop
// 0.16-0.18). Codes past the caches' size are written with streaming stores
// (common/stream_codes.h), which spares a line read for each line written: together, 0.26-0.30
// -> 0.22-0.23 ns a value at 4096 x 4096 float32 on one thread.
//
// What L gives:
//   Src                the source's element
//   Top, Counts        the folded bits of a block (a vector); the casts' saturated and flushed
//                      counts (LaneCounts or BlockCastStats, zero when value-initialized)
//   Lanes              a block's constants for its casts (its scale's lanes)
//   kInfBits           infinity's magnitude bits (a NaN's lie above)
//   fold(p, top)       top with the magnitude bits of 128 values at p folded in (a lane-wise
//                      maximum; a NaN's bits lie above infinity's)
//   top_bits(top)      the largest of top's lanes
//   amax_of(bits)      the float of magnitude bits
//   lanes_of(amax, scale) -> Lanes
//                      the constants of a block's casts under its scale
//   cast<kStream>(p, d, lanes, counts)
//                      the codes of 128 values at p into d, the saturated and flushed counted;
//                      the common codes written with streaming stores where kStream (d 32-byte
//                      aligned), the rare ones with ordinary stores
//   nan_block(src, ld, rows, dst, ldd, scale_inv, for_inf, power_2, epsilon, amax_max, top_max,
//             counts)  a block holding a NaN, whole: its amax with each NaN passed over, its
//                      scale, its codes
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_block_columns.h"
#include "kernels/cpu/fp8/fp8_block_scales_avx2.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/float8.h"

namespace mantissa::kernels::fp8::detail::groups {

// The casts' counts into st.
inline void add_counts(const LaneCounts& counts, BlockCastStats& st) {
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}
inline void add_counts(const BlockCastStats& counts, BlockCastStats& st) {
  st.saturated += counts.saturated;
  st.flushed += counts.flushed;
}

// A block's scale from its amax: scale_inv written, its amax and amax * scale into the running
// maxima; the constants of its casts.
template <class L>
[[gnu::always_inline]] inline typename L::Lanes block_lanes(float amax, float for_inf, bool power_2,
                                                            float epsilon, float* scale_inv,
                                                            float& amax_max, double& top_max) {
  const float scale = block_scale(amax, Float8E4M3::kMax, for_inf, power_2, epsilon);
  *scale_inv = block_scale_inverse(scale);
  amax_max = std::max(amax_max, amax);
  fold_top(amax, scale, top_max);
  return L::lanes_of(amax, scale);
}

// A block's constants for its casts, and whether it holds a NaN (then nothing else is set).
template <class L>
struct Block {
  typename L::Lanes lanes;
  bool nan;
};

// A block's scale from its folded bits (block_lanes); nothing of a block holding a NaN, which
// nan_block finds again with each NaN passed over.
template <class L>
[[gnu::always_inline]] inline Block<L> block_of(const typename L::Top& top, float for_inf,
                                                bool power_2, float epsilon, float* scale_inv,
                                                float& amax_max, double& top_max) {
  const uint32_t bits = L::top_bits(top);
  if (bits > L::kInfBits) return {typename L::Lanes{}, true};
  return {block_lanes<L>(L::amax_of(bits), for_inf, power_2, epsilon, scale_inv, amax_max, top_max),
          false};
}

template <class L, bool kStream>
inline void block_groups(const BlockGroup* groups, int64_t n, int64_t ld, int64_t ldd,
                         float for_inf, bool power_2, float epsilon, BlockCastStats& st) {
  using Src = typename L::Src;
  constexpr int64_t kMaxCount = kBlockGroupBytes / (sizeof(Src) * kBlockLen);
  // The folded bits of the group being cast and of the group after it.
  using Top = typename L::Top;
  Top top_a[kMaxCount], top_b[kMaxCount];
  Top* top = top_a;
  Top* top_next = top_b;
  const auto src_of = [](const BlockGroup& g) { return static_cast<const Src*>(g.src); };
  if (n > 0) {
    const Src* s = src_of(groups[0]);
    for (int64_t j = 0; j < groups[0].count; ++j) top[j] = Top{};
    for (int64_t r = 0; r < groups[0].rows; ++r)
      for (int64_t j = 0; j < groups[0].count; ++j)
        top[j] = L::fold(s + r * ld + j * kBlockLen, top[j]);
  }
  typename L::Counts counts{};
  float amax_max = st.amax;
  double top_max = 0.0;
  Block<L> blocks[kMaxCount];
  for (int64_t i = 0; i < n; ++i) {
    const BlockGroup& g = groups[i];
    const Src* s = src_of(g);
    for (int64_t j = 0; j < g.count; ++j)
      blocks[j] =
          block_of<L>(top[j], for_inf, power_2, epsilon, g.scale_inv + j, amax_max, top_max);
    const BlockGroup* next = i + 1 < n ? &groups[i + 1] : nullptr;
    const int64_t next_rows = next != nullptr ? next->rows : 0;
    const int64_t next_count = next != nullptr ? next->count : 0;
    for (int64_t j = 0; j < next_count; ++j) top_next[j] = Top{};
    for (int64_t r = 0; r < std::max(g.rows, next_rows); ++r) {
      const int64_t folds = r < next_rows ? next_count : 0;
      const int64_t casts = r < g.rows ? g.count : 0;
      const int64_t both = std::min(folds, casts);
      const Src* row = s + r * ld;
      uint8_t* d = g.dst + r * ldd;
      const Src* next_row = folds > 0 ? src_of(*next) + r * ld : nullptr;
      for (int64_t j = 0; j < both; ++j) {
        top_next[j] = L::fold(next_row + j * kBlockLen, top_next[j]);
        if (!blocks[j].nan)
          L::template cast<kStream>(row + j * kBlockLen, d + j * kBlockLen, blocks[j].lanes,
                                    counts);
      }
      for (int64_t j = both; j < folds; ++j)
        top_next[j] = L::fold(next_row + j * kBlockLen, top_next[j]);
      for (int64_t j = both; j < casts; ++j)
        if (!blocks[j].nan)
          L::template cast<kStream>(row + j * kBlockLen, d + j * kBlockLen, blocks[j].lanes,
                                    counts);
    }
    for (int64_t j = 0; j < g.count; ++j)
      if (blocks[j].nan)
        L::nan_block(s + j * kBlockLen, ld, g.rows, g.dst + j * kBlockLen, ldd, g.scale_inv + j,
                     for_inf, power_2, epsilon, amax_max, top_max, counts);
    std::swap(top, top_next);
  }
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / Float8E4M3::kMax);
  add_counts(counts, st);
}

// block_groups with streaming stores where `stream` (dst and ldd multiples of 32).
template <class L>
inline void block_groups(const BlockGroup* groups, int64_t n, int64_t ld, int64_t ldd,
                         float for_inf, bool power_2, float epsilon, bool stream,
                         BlockCastStats& st) {
  if (stream) {
    block_groups<L, true>(groups, n, ld, ldd, for_inf, power_2, epsilon, st);
    _mm_sfence();
  } else {
    block_groups<L, false>(groups, n, ld, ldd, for_inf, power_2, epsilon, st);
  }
}

}  // namespace mantissa::kernels::fp8::detail::groups
