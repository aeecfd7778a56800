#pragma once
// zero2's gradient reduction (docs/distributed.md, "How zero2 works"): the whole gradients of
// the optimizer's parameters, flattened end to end, are summed over the ranks by one
// reduce-scatter per chunk of at most chunk_bytes / 4 elements, each rank receiving the sums
// of its part of the partition `cuts` (OptimizerShard::cuts).
//
// Overlap: after arm_hooks(), a post-accumulate-grad hook on every parameter marks its
// gradient ready, and a chunk whose parameters are all ready starts its reduce-scatter
// (Communicator::reduce_scatter_async) while backward still runs, as ddp's buckets start their
// all-reduces. Chunks start from the last to the first, the order backward produces gradients
// in, on every rank the same (collectives are matched by their order). A parameter's whole
// gradient is freed once every chunk holding part of it is packed, and at most two chunks
// travel at once (a third waits for the first), so neither the whole gradients nor their
// packed copies ever exist all at once, as under ZeRO-2. finish() starts what is left (a
// parameter no gradient reached contributes zeros) and waits.
//
// A chunk's sums are those of the blocking reduce-scatter of the same chunk, so the result is
// the same bits however many chunks started during backward.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "mantissa/autograd/grad_hooks.h"
#include "mantissa/core/tensor.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/dist/shard_partition.h"

namespace mantissa::train::detail {

class ChunkedGradientReduce {
 public:
  // `params`: the optimizer's parameters in its order; `cuts`: world_size + 1 flat offsets.
  // `reduce_dtype` float32 or bfloat16 (the chunks travel and are summed in it).
  ChunkedGradientReduce(const std::vector<Tensor>& params, const std::vector<int64_t>& cuts,
                        dist::Communicator& comm, int64_t chunk_bytes, DType reduce_dtype);
  ~ChunkedGradientReduce();
  ChunkedGradientReduce(const ChunkedGradientReduce&) = delete;
  ChunkedGradientReduce& operator=(const ChunkedGradientReduce&) = delete;

  // Chunks start from the parameters' hooks during the backward that follows.
  void arm_hooks();
  // Starts the chunks not started yet, waits for all, and returns this rank's float32 sums
  // (its part, end to end). The hooks are removed.
  std::vector<float>& finish();
  // Bytes this rank sent (every chunk's payload).
  int64_t sent_bytes() const { return sent_bytes_; }
  // Chunks started by the hooks, before finish().
  int64_t started_in_backward() const { return started_in_backward_; }

 private:
  struct Chunk {
    std::vector<dist::ShardPiece> pieces;
    std::vector<size_t> tensors;  // the parameters with elements in it
    int64_t pending = 0;          // of them, not ready yet
    std::vector<float> send;
    std::vector<uint16_t> send_bf16, mine_bf16;
    std::vector<int64_t> counts;  // per rank
    float* out = nullptr;         // where this rank's sums go
    std::unique_ptr<dist::Work> work;
  };
  static constexpr size_t kMaxInFlight = 2;
  void on_ready(size_t tensor);
  void start_ready(bool force);
  void start(size_t chunk);
  // Waits for the chunk started first of those in flight and frees its send buffers.
  void complete_oldest();

  std::vector<Tensor> params_;
  dist::Communicator& comm_;
  DType reduce_dtype_;
  std::vector<Chunk> chunks_;
  std::vector<std::vector<size_t>> chunks_of_;  // per parameter: the chunks holding it
  std::vector<int64_t> unpacked_;               // per parameter: its chunks not packed yet
  std::vector<bool> ready_;
  std::vector<float> mine_;
  std::deque<size_t> in_flight_;  // started, not known done; in the order they started
  int64_t next_ = -1;             // the next chunk to start (they start from the last)
  bool armed_ = false;
  int64_t sent_bytes_ = 0;
  int64_t started_in_backward_ = 0;
  std::vector<autograd::GradHookHandle> hooks_;
};

}  // namespace mantissa::train::detail
