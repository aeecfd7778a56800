// partition_by_elements: contiguous, element-balanced shards of whole tensors.
#include "mantissa/dist/shard_partition.h"

#include <cstdlib>

#include "mantissa/core/error.h"

namespace mantissa::dist {

std::vector<size_t> partition_by_elements(const std::vector<int64_t>& numels, int world_size) {
  MANTISSA_CHECK(world_size >= 1, "shard_partition", "world_size must be at least 1, got {}",
                 world_size);
  // starts[i]: the flattened offset of tensor i's first element; starts.back(): the total.
  std::vector<int64_t> starts{0};
  for (size_t i = 0; i < numels.size(); ++i) {
    MANTISSA_CHECK(numels[i] >= 0, "shard_partition", "parameter {} has {} elements", i, numels[i]);
    starts.push_back(starts.back() + numels[i]);
  }
  const int64_t total = starts.back();
  std::vector<size_t> bounds{0};
  for (int r = 1; r < world_size; ++r) {
    // The ideal cut, r/N of the elements, rounded to the nearest tensor start at or after the
    // previous boundary (so the shards stay contiguous and in order).
    const double target = static_cast<double>(total) * r / world_size;
    size_t best = bounds.back();
    for (size_t i = bounds.back(); i < starts.size(); ++i) {
      if (std::abs(static_cast<double>(starts[i]) - target) <
          std::abs(static_cast<double>(starts[best]) - target))
        best = i;
    }
    bounds.push_back(best);
  }
  bounds.push_back(numels.size());
  return bounds;
}

int shard_owner(const std::vector<size_t>& bounds, size_t index) {
  for (size_t r = 0; r + 1 < bounds.size(); ++r)
    if (index >= bounds[r] && index < bounds[r + 1]) return static_cast<int>(r);
  fail("shard_partition", "parameter {} is in no shard (the partition covers {})", index,
       bounds.empty() ? 0 : bounds.back());
}

}  // namespace mantissa::dist
