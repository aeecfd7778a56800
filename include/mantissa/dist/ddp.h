#pragma once
// DistributedDataParallel's gradient reducer (torch DDP's Reducer, docs/distributed.md): every
// rank computes gradients on its own batch, and this averages them so that all ranks step with
// the same gradient and keep the same weights.
//
// - Buckets: the parameters, in reverse registration order (roughly the order backward
//   produces their gradients), are grouped into buckets of about bucket_cap_bytes of float32.
// - Overlap: a post-accumulate-grad hook (autograd/grad_hooks.h) on every parameter marks its
//   gradient ready; a bucket whose gradients are all ready starts its all-reduce at once
//   (Communicator::all_reduce_async, MPI_Iallreduce) while backward still runs. Buckets start
//   in index order on every rank (a collective must be issued in the same order everywhere);
//   later hooks poll the ones in flight so that MPI makes progress.
// - finish_backward() starts what is left (a parameter no gradient reached contributes
//   zeros), waits, divides the float32 sums by the world size and writes the averages into
//   the parameters' .grad (in their dtype).
// - no_sync: prepare_for_backward(false) leaves gradients local (they accumulate in .grad);
//   the next prepare_for_backward(true) reduces the accumulated sum, as torch's no_sync().
// - reduce_dtype bfloat16 (torch's bf16_compress_hook, FSDP's MixedPrecision reduce_dtype):
//   the buckets travel as bfloat16, half the bytes; the reduction combines in float32 and
//   rounds once per step, and the average is taken in float32 after decompressing.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mantissa/autograd/grad_hooks.h"
#include "mantissa/dist/communicator.h"

namespace mantissa::dist {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct DDPOptions {
  int64_t bucket_cap_bytes = int64_t{1} << 20;  // float32 bytes per bucket (torch: 25 MiB)
  // The dtype gradients travel in while they are reduced over the ranks (ddp, zero1, zero2):
  // float32, or bfloat16 (half the bytes; each rank's gradient rounded to bfloat16 and every
  // combining step of the sum rounded once; docs/distributed.md states the bound).
  DType reduce_dtype = kFloat32;
  // fsdp: the all-gather of the unit that runs next is started (non-blocking) before the
  // current unit runs, in forward order in a forward and in reverse order in a backward, so
  // that it travels while the current unit computes (torch FSDP's forward_prefetch and
  // backward_prefetch BACKWARD_PRE). Off: each gather blocks where its unit starts. The same
  // bytes reach the parameters either way.
  bool fsdp_prefetch = true;
  // fsdp: the dtype the units' float32 parameters travel in when they are all-gathered
  // (FSDP's MixedPrecision param_dtype): float32, or the mixed precision's compute dtype,
  // bfloat16 or float16 (half the bytes; the gathered parameter holds its value rounded to
  // that dtype; docs/distributed.md states what changes).
  DType fsdp_param_dtype = kFloat32;
};

// Throws, naming the valid values, unless `dtype` is one gradients can be reduced in.
void check_reduce_dtype(DType dtype);

// Measured per reducing backward pass, summed over the passes since construction.
struct DDPStats {
  int64_t reductions = 0;           // backward passes whose gradients were reduced
  double comm_seconds = 0;          // wall time with at least one bucket in flight
  double overlapped_seconds = 0;    // the part of comm_seconds before backward ended
  double exposed_seconds = 0;       // finish_backward: starting, waiting, averaging, writing back
  int64_t bytes_per_reduction = 0;  // payload bytes one rank sends into the all-reduces
};

// Throws on every rank, naming the first tensor whose name, dtype or shape differs from rank
// 0's, when the ranks do not hold the same list (a model built differently on some rank).
void check_same_tensors(const NamedTensors& tensors, Communicator& comm, const std::string& what);
// Copies rank `root`'s values of every tensor (contiguous) to all ranks, in place.
void broadcast_tensors(const NamedTensors& tensors, Communicator& comm, int root = 0);

class DistributedDataParallel {
 public:
  // `parameters`: the trainable parameters (requires_grad leaves); registers a hook on each.
  DistributedDataParallel(NamedTensors parameters, std::shared_ptr<Communicator> comm,
                          DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Before each backward: sync = false is no_sync (gradients stay local and accumulate).
  void prepare_for_backward(bool sync);
  // After backward: completes the reduction started by prepare_for_backward(true) (nothing
  // after a no_sync pass).
  void finish_backward();

  // Bucket sizes in float32 bytes, in the order they are reduced.
  std::vector<int64_t> bucket_bytes() const;
  const DDPStats& stats() const { return stats_; }
  Communicator& communicator() { return *comm_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    Tensor param;
    int64_t offset = 0;  // in the bucket's buffer, elements
    int64_t numel = 0;
    bool ready = false;
  };
  struct Bucket {
    std::vector<size_t> slots;
    int64_t numel = 0;
    int64_t pending = 0;
    bool launched = false;
    bool done = false;
    std::vector<float> buffer;     // float32 sums
    std::vector<uint16_t> packed;  // the bfloat16 payload under reduce_dtype bfloat16
    std::unique_ptr<Work> work;
    Clock::time_point started, finished;
  };

  void on_grad_ready(size_t slot);
  void launch_ready_buckets(bool force);
  void launch(Bucket& b);
  void poll();

  std::shared_ptr<Communicator> comm_;
  DDPOptions options_;
  std::vector<Slot> slots_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  std::vector<autograd::GradHookHandle> hooks_;
  size_t next_launch_ = 0;
  bool syncing_ = false;
  Clock::time_point backward_started_;
  DDPStats stats_;
};

}  // namespace mantissa::dist
