#pragma once
// One rank's part of an optimizer under the ZeRO strategies (zero1, zero2; docs/distributed.md).
//
// The optimizer the module configured (the "whole" optimizer) keeps its parameters, groups and
// options, and the schedulers, hooks and checkpoints keep working on it; it holds no state.
// The rank's updates run in a shard optimizer of the same kind and options whose parameter i
// is a 1-D tensor holding this rank's slice of the whole's parameter i (empty where the rank
// owns none of it), so the parameter numbering, and the state dict's, is the whole's. The
// slices are the rank's part of dist::partition_flat: about 1/N of the elements, cut on the
// 8-bit optimizers' quantization blocks, and never inside a half parameter whose group rounds
// stochastically (its random stream is keyed by the parameter's index and element offsets).
//
// Every update is element-wise (the state of an element is read and written only with its own
// gradient and parameter), so the shard updates each element exactly as the whole optimizer
// would, bit for bit.
#include <memory>
#include <vector>

#include "mantissa/dist/communicator.h"
#include "mantissa/dist/shard_partition.h"
#include "mantissa/optim/optimizer.h"

namespace mantissa::train::detail {

class ChunkedGradientReduce;

class OptimizerShard {
 public:
  // The partition of `whole`'s parameters over comm's ranks and this rank's shard optimizer,
  // its state taken from the whole's (take_state_from_whole). Throws for an optimizer kind it
  // cannot build a shard of (SGD, Adam, AdamW, Adam8bit and AdamW8bit it can) and for
  // parameters not on the CPU.
  OptimizerShard(optim::Optimizer& whole, dist::Communicator& comm);

  // The whole's parameters, in its order (the numbering of slices and indices here).
  const std::vector<Tensor>& parameters() const { return params_; }
  // Whether this shard was built for `whole` as it is (the same parameters).
  bool is_for(const optim::Optimizer& whole) const;
  // Flat element offsets of each rank's part (world_size + 1, dist::partition_flat).
  const std::vector<int64_t>& cuts() const { return cuts_; }
  // This rank's pieces of the whole's parameters, in order.
  const std::vector<dist::ShardPiece>& pieces() const { return pieces_; }
  // The shard's parameter for whole parameter `index` (1-D; empty when not this rank's).
  const Tensor& slice(size_t index) const { return slices_[index]; }
  const optim::Optimizer& optimizer() const { return *shard_; }
  optim::Optimizer& optimizer() { return *shard_; }
  // Bytes of optimizer state this rank holds (the shard's; the whole holds none).
  int64_t state_bytes() const;

  // Moves the state the whole optimizer holds into the shard, which keeps this rank's slices
  // of it, and frees it in the whole: after a checkpoint was loaded into the whole, and at
  // construction (the fp32 masters the whole made for half parameters). No-op when the whole
  // holds none.
  void take_state_from_whole();
  // Before an update: the whole's group options (learning rates and momenta a scheduler set)
  // and the current values of this rank's parameter slices into the shard.
  void sync_from_whole();
  // zero1: this rank's slices of the whole's (averaged) gradients become the shard's
  // gradients, and the whole's gradients are freed.
  void take_gradient_slices();
  // zero2: the whole's gradients summed over the ranks by reduce-scatters over the flat
  // elements (in `reduce_dtype`, float32 or bfloat16, at most `chunk_bytes` / 4 elements at a
  // time), this rank keeping its part: averaged (times 1/N in float32) and converted to each
  // parameter's dtype as ddp's reducer does, they become the shard's gradients, and the
  // whole's gradients are freed. A parameter without a gradient contributes zeros. A
  // collective.
  void reduce_scatter_gradients(int64_t chunk_bytes, DType reduce_dtype = kFloat32);
  // The same with the chunks of `reduce` (built over parameters() and cuts()), some of them
  // started during backward (ChunkedGradientReduce::arm_hooks): waits for them all.
  void take_reduced_gradients(ChunkedGradientReduce& reduce);
  // Bytes this rank sent into the last reduce_scatter_gradients (its payload, every chunk).
  int64_t reduced_bytes() const { return reduced_bytes_; }
  // zero2: the 2-norm of all the ranks' gradient slices together, as clip_grad_norm_ computes
  // it over the whole gradients (a norm per parameter, rounded to float32 or, with a float64
  // gradient, float64; then the norm of those): each rank sums the squares of its slices per
  // parameter in float64, and one all-reduce adds them up. A collective.
  Tensor global_gradient_norm() const;
  // The shard's parameters (the slices), for clipping their gradients.
  const std::vector<Tensor>& slices() const { return slices_; }
  // fsdp: the slices are the parameters' current values (the whole parameters are released
  // between uses), so sync_from_whole copies no values into them.
  void set_slices_hold_values(bool on) { slices_hold_values_ = on; }
  // fsdp: all-gathers whole parameters `indices` (in the whole's order, ascending) from every
  // rank's slices into their storage (which must be allocated), one all-gather of their bytes.
  // `wire` float32: the values as they are; bfloat16 or float16: float32 parameters travel
  // rounded to it (nearest even) and are widened back exactly, so they hold the rounded
  // values (FSDP's MixedPrecision param_dtype; other dtypes travel as they are). A collective.
  void gather_parameters(const std::vector<size_t>& indices, DType wire = kFloat32);
  // fsdp's prefetch: gather_parameters in two halves. start_gather_parameters packs this
  // rank's slices' elements of `indices` and starts the all-gather (non_blocking: returns at
  // once; the parameters' storage need not be allocated yet); finish_gather_parameters waits
  // for it and copies every rank's elements into the parameters (allocated by then): the same
  // bytes in the same places as gather_parameters. Every rank starts and finishes the same
  // gathers in the same order.
  struct PendingGather {
    std::vector<std::vector<dist::ShardPiece>> parts;  // every rank's pieces, in rank order
    std::vector<char> mine, all;                       // the send and receive buffers
    DType wire = kFloat32;
    std::unique_ptr<dist::Work> work;  // null: done (a blocking gather)
  };
  std::unique_ptr<PendingGather> start_gather_parameters(const std::vector<size_t>& indices,
                                                         DType wire, bool non_blocking = true);
  void finish_gather_parameters(PendingGather& gather);
  // Bytes every rank's gather_parameters and start_gather_parameters received, in total.
  int64_t gathered_bytes() const { return gathered_bytes_; }
  // fsdp: reduce_scatter_gradients over whole parameters `indices` only (ascending), in one
  // reduce-scatter: each rank receives the sums of its slices of them, which become the
  // slices' gradients (averaged as there); those parameters' whole gradients are freed.
  // Parameters without a gradient contribute zeros. A collective.
  void reduce_scatter_gradients_of(const std::vector<size_t>& indices, DType reduce_dtype);
  // Steps the shard optimizer alone, turning a refusal over a non-finite gradient into one
  // naming the whole's parameter, and frees the slices' gradients.
  void step_shard();
  // Steps the shard optimizer (step_shard), then all-gathers every rank's updated slices into the
  // whole's parameters, at most `chunk_bytes` / 4 flat elements at a time. A collective.
  void step_and_gather(int64_t chunk_bytes);
  // The whole optimizer's state as one process would hold it, assembled on rank 0 from every
  // rank's shard state (other ranks get an empty state). A collective.
  optim::OptimizerState gather_state() const;

 private:
  optim::Optimizer& whole_;
  dist::Communicator& comm_;
  std::vector<Tensor> params_;  // the whole's parameters, in order
  std::vector<int64_t> numels_;
  std::vector<int64_t> cuts_;
  std::vector<dist::ShardPiece> pieces_;
  std::vector<int64_t> begins_;  // per whole parameter: its slice's first element
  std::vector<Tensor> slices_;   // per whole parameter: the shard's parameter
  std::unique_ptr<optim::Optimizer> shard_;
  // Per group: the whole's options last copied into the shard (and the shard-only fields).
  std::vector<nlohmann::json> synced_options_;
  std::vector<nlohmann::json> shard_only_options_;
  int64_t reduced_bytes_ = 0;
  bool slices_hold_values_ = false;
  void sync_group_options();
  // The pieces of rank r's part that lie in whole parameters `indices` (ascending).
  std::vector<dist::ShardPiece> pieces_in(int r, const std::vector<size_t>& indices) const;
  // Every rank's pieces (`parts`, in rank order) of the parameters in one all-gather of their
  // bytes: this rank sends its slices' elements, and every rank's land in the parameters.
  // `mine` and `all` are the send and receive buffers, kept by callers that gather in chunks.
  // The reduce-scattered float32 sums of this rank's `pieces` (end to end in `sums`) divided by
  // the world size and set as the gradients of its slices, in their dtypes.
  void set_averaged_gradients(const std::vector<dist::ShardPiece>& pieces,
                              std::vector<float>& sums);
  void all_gather_pieces(const std::vector<std::vector<dist::ShardPiece>>& parts,
                         std::vector<char>& mine, std::vector<char>& all);
  // all_gather_pieces' halves: this rank's elements of `parts` into `mine` (returning every
  // rank's byte count), and every rank's bytes (end to end in `all`) into the parameters.
  // Each float32 element travels as `wire`, the other dtypes as they are (wire_dtype).
  std::vector<int64_t> pack_pieces(const std::vector<std::vector<dist::ShardPiece>>& parts,
                                   std::vector<char>& mine, DType wire) const;
  void unpack_pieces(const std::vector<std::vector<dist::ShardPiece>>& parts,
                     const std::vector<char>& all, DType wire) const;
  DType wire_dtype(size_t index, DType wire) const;
  int64_t gathered_bytes_ = 0;
};

// The whole optimizer's state from every rank's shard state (`parts`, in rank order) of the
// partition `cuts` (world_size + 1 flat offsets) over parameters of `shapes`: `whole_meta` (the
// whole's state_dict meta: groups, options) with each parameter's state, and each state buffer
// put together from the ranks' slices. Throws when a part does not fit its slice (a rank without
// a buffer the others have, a wrong length or dtype).
optim::OptimizerState assemble_optimizer_state(const nlohmann::json& whole_meta,
                                               const std::vector<std::vector<int64_t>>& shapes,
                                               const std::vector<int64_t>& cuts,
                                               const std::vector<optim::OptimizerState>& parts);

}  // namespace mantissa::train::detail
