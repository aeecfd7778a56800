// partition_flat: contiguous, element-balanced parts of the flattened parameters, cut on
// each tensor's alignment.
#include "mantissa/dist/shard_partition.h"

#include <algorithm>

#include "mantissa/core/error.h"

namespace mantissa::dist {

namespace {

// starts[i]: the flat offset of tensor i's first element; starts.back(): the total.
std::vector<int64_t> flat_starts(const std::vector<int64_t>& numels) {
  std::vector<int64_t> starts{0};
  for (size_t i = 0; i < numels.size(); ++i) {
    MANTISSA_CHECK(numels[i] >= 0, "shard_partition", "tensor {} has {} elements", i, numels[i]);
    starts.push_back(starts.back() + numels[i]);
  }
  return starts;
}

}  // namespace

std::vector<int64_t> partition_flat(const std::vector<int64_t>& numels,
                                    const std::vector<int64_t>& alignments, int world_size) {
  MANTISSA_CHECK(world_size >= 1, "shard_partition", "world_size must be at least 1, got {}",
                 world_size);
  MANTISSA_CHECK(alignments.size() == numels.size(), "shard_partition",
                 "{} alignments for {} tensors", alignments.size(), numels.size());
  for (size_t i = 0; i < alignments.size(); ++i)
    MANTISSA_CHECK(alignments[i] >= 0, "shard_partition", "tensor {} has alignment {}", i,
                   alignments[i]);
  const std::vector<int64_t> starts = flat_starts(numels);
  const int64_t total = starts.back();
  std::vector<int64_t> cuts{0};
  for (int r = 1; r < world_size; ++r) {
    // The ideal cut, in 128-bit arithmetic so r * total cannot overflow.
    const auto target =
        static_cast<int64_t>(static_cast<__int128>(total) * r / static_cast<__int128>(world_size));
    // The tensor holding element `target` (the last one whose start is at or before it).
    const size_t i = static_cast<size_t>(
        std::upper_bound(starts.begin(), starts.end() - 1, target) - starts.begin() - 1);
    std::vector<int64_t> candidates = {starts[i], starts[i + 1]};
    if (i < numels.size() && alignments[i] > 0) {
      const int64_t below = starts[i] + (target - starts[i]) / alignments[i] * alignments[i];
      candidates.push_back(below);
      candidates.push_back(std::min(below + alignments[i], starts[i + 1]));
    }
    int64_t best = candidates[0];
    for (int64_t c : candidates) {
      const int64_t d = c > target ? c - target : target - c;
      const int64_t best_d = best > target ? best - target : target - best;
      if (d < best_d || (d == best_d && c < best)) best = c;
    }
    cuts.push_back(std::max(best, cuts.back()));
  }
  cuts.push_back(total);
  return cuts;
}

std::vector<ShardPiece> pieces_of(const std::vector<int64_t>& numels, int64_t first, int64_t last) {
  const std::vector<int64_t> starts = flat_starts(numels);
  MANTISSA_CHECK(0 <= first && first <= last && last <= starts.back(), "shard_partition",
                 "range [{}, {}) is outside the {} elements", first, last, starts.back());
  std::vector<ShardPiece> pieces;
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t begin = std::max(first, starts[i]);
    const int64_t end = std::min(last, starts[i + 1]);
    if (begin < end) pieces.push_back({i, begin - starts[i], end - starts[i]});
  }
  return pieces;
}

}  // namespace mantissa::dist
