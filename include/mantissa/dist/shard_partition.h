#pragma once
// How the ZeRO strategies (zero1, zero2; docs/distributed.md) split the optimizer's parameters
// over the ranks. The parameters are laid end to end as one flat run of elements (each tensor
// flattened, in the optimizer's order) and every rank owns one contiguous part of it, about
// 1/N of the elements; a part may begin or end inside a tensor.
//
// Where a boundary may fall inside a tensor is set per tensor: at multiples of an alignment
// counted from the tensor's first element, or nowhere (the tensor stays whole). The 8-bit
// optimizers' state is blockwise with blocks counted from each tensor's start, so with their
// block size as the alignment every block, its absmax and its codes lie on one rank and are
// the unsharded run's.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mantissa::dist {

// The alignment of a tensor that no boundary may split.
inline constexpr int64_t kWholeTensor = 0;

// world_size + 1 offsets into the flat elements: rank r owns [cuts[r], cuts[r + 1]).
// cuts[0] = 0 and cuts[world_size] = the total. Inner cut r starts at floor(r * total / N) and
// moves to the nearest place allowed there (a tensor's start or end, or a multiple of the
// tensor's alignment from its start; the earlier on a tie), never before cut r - 1. Each part
// therefore holds total / N elements give or take one alignment unit at each end (a whole
// tensor for kWholeTensor ones); a part may be empty (more ranks than elements).
// Throws for world_size < 1, a negative count or alignment, or sizes that differ.
std::vector<int64_t> partition_flat(const std::vector<int64_t>& numels,
                                    const std::vector<int64_t>& alignments, int world_size);

// Elements [begin, end) of tensor `tensor` (flattened).
struct ShardPiece {
  size_t tensor = 0;
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const ShardPiece&) const = default;
};

// The pieces of the flat range [first, last): one per tensor it covers elements of, in order.
std::vector<ShardPiece> pieces_of(const std::vector<int64_t>& numels, int64_t first, int64_t last);

}  // namespace mantissa::dist
