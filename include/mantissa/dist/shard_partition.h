#pragma once
// How ZeRO-style strategies (zero1, docs/distributed.md) split the optimizer's parameters over
// the ranks: each rank owns a contiguous run of the flattened parameter list, whole tensors
// only, balanced by element count. A boundary between shards is always a tensor's first
// element, which is also the first element of that tensor's first quantization block: the
// 8-bit optimizers' blockwise state (blocks counted from each tensor's start) is cut on block
// boundaries, so every block, its absmax and its codes are the unsharded run's.
#include <cstdint>
#include <vector>

namespace mantissa::dist {

// world_size + 1 parameter indices: rank r owns parameters [bounds[r], bounds[r + 1]).
// bounds[0] = 0 and bounds[world_size] = numels.size(); a rank may own none (more ranks than
// tensors). Each inner boundary is the tensor start whose element offset is nearest to r/N of
// the total (the earlier one on a tie). Throws for world_size < 1 or a negative count.
std::vector<size_t> partition_by_elements(const std::vector<int64_t>& numels, int world_size);

// The rank whose shard holds parameter `index` under `bounds`.
int shard_owner(const std::vector<size_t>& bounds, size_t index);

}  // namespace mantissa::dist
