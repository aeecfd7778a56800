#pragma once
// Strategies (Lightning's strategies, docs/distributed.md): how a fit is spread over
// processes. The Trainer calls its strategy at a few points of the loop; the single-device
// strategy does nothing at any of them, DDPStrategy (ddp_strategy.h) makes the ranks of an
// MPI job train as one: sharded data, averaged gradients, one loss scale, rank 0 writing; under
// "zero1" it also shards the optimizer state (each rank updates its part of the parameters),
// under "zero2" the gradients too, under "fsdp" the parameters too.
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/data/dataloader.h"
#include "mantissa/dist/ddp.h"
#include "mantissa/optim/optimizer.h"
#include "mantissa/train/precision.h"

namespace mantissa::train {

class TrainModule;

// The data-parallel settings of TrainerOptions.
struct StrategyOptions {
  // "auto": "ddp" when the process is one of several ranks of an MPI job (mpirun -np N), or
  // when devices > 1; "single_device" otherwise. "ddp" and "single_device" force one. "zero1":
  // ddp whose optimizer state is sharded over the ranks; "zero2": the gradients too; "fsdp":
  // the parameters too, each layer gathered around its forward and backward
  // (docs/distributed.md).
  std::string strategy = "auto";
  // Ranks the run expects (Lightning's devices); -1: as many as the launcher started. With
  // more than one, the job must have been started with that many ranks (mpirun -np N, or
  // `mantissa train --devices N`, which starts mpirun itself).
  int64_t devices = -1;
  // Replace every BatchNorm2d by a SyncBatchNorm2d whose batch statistics cover all ranks
  // (default: each rank normalises with its own batch's statistics).
  bool sync_batchnorm = false;
  dist::DDPOptions ddp;  // bucket size, bf16 compression of the communicated gradients
  // Seconds a rank waits inside one collective for the others before it names the ranks that
  // have not arrived and ends the job (exit status 5, dist::Communicator::set_collective_timeout);
  // 0: forever. Generous by default: a collective waits for the slowest rank's step, and rank 0
  // writes checkpoints while the others wait.
  double collective_timeout_s = 600;
  // zero1 / zero2 / fsdp: each rank writes its own part of the optimizer state into a checkpoint
  // (docs/distributed.md, "Sharded checkpoints") instead of rank 0 gathering the whole.
  bool sharded_checkpoints = false;
};

// One rank's part of an optimizer's state, as a sharded checkpoint stores it: the rank's shard
// state (its parameters numbered as the whole optimizer's), the whole optimizer's state_dict
// meta without state (groups, options), and the partition (flat element cuts, world_size + 1
// of them, over the parameters of `shapes`; dist::partition_flat).
struct OptimizerStateShard {
  optim::OptimizerState state;
  nlohmann::json whole_meta;
  std::vector<int64_t> cuts;
  std::vector<std::vector<int64_t>> shapes;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const { return "single_device"; }
  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  bool is_global_zero() const { return rank() == 0; }

  // After configure_model and the plugin's convert_module, once per module.
  virtual void setup_module(TrainModule& /*module*/) {}
  // Once per fit, after configure_optimizers and a checkpoint's restore, before the first
  // batch: fsdp shards the parameters here (each rank keeping its part; the layers are
  // all-gathered around their use from then on).
  virtual void setup_optimizers(TrainModule& /*module*/,
                                const std::vector<std::shared_ptr<optim::Optimizer>>& /*opts*/,
                                const Precision& /*plugin*/) {}
  // Around reading every parameter's value on every rank (a checkpoint's save): fsdp gathers
  // the whole parameters and releases them again. Collectives under fsdp.
  virtual void gather_full_parameters() {}
  virtual void release_full_parameters() {}
  // At the end of fit (also an interrupted one). fsdp keeps the module sharded, as torch's
  // FSDP does: a validate, test or predict after the fit gathers one unit at a time, and a
  // checkpoint's save gathers around it.
  virtual void teardown_module(TrainModule& /*module*/) {}
  // Where the whole module is needed after a fit (reading or writing its parameters directly,
  // a KV-cached sample): fsdp puts the layers back in their slots with their whole parameters
  // on every rank (a collective, on every rank; the next fit shards them again). Nothing
  // under the other strategies. A Trainer destroyed while its fsdp module is still sharded
  // leaves the sharded parameters NaN.
  virtual void unshard_module(TrainModule& /*module*/) {}
  // The loader fit iterates (this rank's shard under ddp). The result lives as long as the
  // strategy or until the next call.
  virtual const data::DataLoader& training_loader(const data::DataLoader& loader) { return loader; }
  // The loader a validation or test reads (Lightning shards these too): under ddp this rank's
  // part of it, every example on exactly one rank and none repeated
  // (DistributedSampler::unrepeated), so the ranks' sums add up to one process's. Lives as
  // long as the strategy or until the next call.
  virtual const data::DataLoader& evaluation_loader(const data::DataLoader& loader) {
    return loader;
  }
  // At the start of every validation and test: under ddp rank 0's buffers are copied to every
  // rank, so all ranks evaluate the model rank 0 checkpoints.
  virtual void before_evaluation() {}
  // Around every backward: sync_gradients is false inside an accumulation window (no_sync).
  virtual void before_backward(bool /*sync_gradients*/) {}
  virtual void after_backward() {}
  // After after_backward of an optimizer step's last micro-batch (automatic optimisation):
  // zero2 reduce-scatters the gradients here, each rank keeping its slice.
  virtual void after_step_backward(optim::Optimizer& /*optimizer*/) {}
  // Before on_before_optimizer_step and clipping (after the loss scaler's unscale_).
  virtual void before_optimizer_step(optim::Optimizer& /*optimizer*/, Precision& /*plugin*/) {}
  // In place of the precision plugin's gradient clipping (gradient_clip_val > 0); false when
  // the strategy leaves it to the plugin. zero2 clips its gradient slices by the norm of all
  // the ranks' slices together.
  virtual bool clip_gradients(optim::Optimizer& /*optimizer*/, double /*clip_val*/,
                              GradClipAlgorithm /*algorithm*/) {
    return false;
  }
  // Right before the optimizer updates (after the scaler's inf check and clipping, which see
  // every gradient): zero1 frees the gradients (and any state) of the parameters other ranks
  // update, so this rank's optimizer steps and keeps state for its shard alone.
  virtual void before_optimizer_update(optim::Optimizer& /*optimizer*/) {}
  // After the update, also one the scaler skipped: zero1 copies each shard's parameters from
  // the rank that updated them to every rank.
  virtual void after_optimizer_update(optim::Optimizer& /*optimizer*/) {}
  // On every rank before rank 0 collects a checkpoint. Under zero1, each optimizer's complete
  // state gathered from the ranks' shards (on rank 0; the other ranks get an empty list).
  // Empty where each optimizer's own state_dict() is complete.
  virtual std::vector<optim::OptimizerState> complete_optimizer_states(
      const std::vector<std::shared_ptr<optim::Optimizer>>& /*optimizers*/) {
    return {};
  }
  // With sharded_checkpoints under zero1 / zero2 / fsdp: this rank's part of each optimizer's
  // state, which every rank writes itself; empty otherwise (rank 0 writes one whole file).
  virtual std::vector<OptimizerStateShard> optimizer_state_shards(
      const std::vector<std::shared_ptr<optim::Optimizer>>& /*optimizers*/) {
    return {};
  }
  // Bytes of optimizer state this rank holds for `optimizer` (under zero1 its shard's).
  virtual int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const {
    return optimizer.state_bytes();
  }
  // The signal that stops the run (SIGINT, SIGTERM; 0: none) as every rank must see it: under
  // ddp the largest over the ranks, so all ranks stop after the same batch.
  virtual int agree_on_signal(int signal) { return signal; }
  // A per-rank number averaged over the ranks (the step loss of the global batch).
  virtual double mean_over_ranks(double value) { return value; }
  // Per-rank numbers summed (or averaged) over the ranks, element by element, in one
  // collective: an epoch's loss sums and sample counts, the step metrics the loggers get.
  // Every rank must call these with the same number of values.
  virtual void sum_over_ranks(std::vector<double>& /*values*/) {}
  // The lowest rank's non-empty message, the same on every rank ("" when every rank's is);
  // that rank in *from_rank.
  virtual std::string first_message_over_ranks(const std::string& message, int* from_rank) {
    if (from_rank != nullptr) *from_rank = 0;
    return message;
  }
  // The largest of a per-rank count over the ranks (the longest evaluation shard's batches).
  virtual int64_t max_over_ranks(int64_t value) { return value; }
  // The names any rank holds, sorted, the same list on every rank (what a validation logged:
  // a rank whose shard was empty logged nothing per batch).
  virtual std::vector<std::string> union_over_ranks(const std::vector<std::string>& names);
  // Every rank's list of tensors, in rank order (rank 0's first), the same on every rank: how
  // predict under ddp hands each rank the batches the others predicted. Tensors from other
  // ranks come back contiguous on the CPU.
  virtual std::vector<std::vector<Tensor>> gather_over_ranks(const std::vector<Tensor>& mine) {
    return {mine};
  }
  void mean_over_ranks(std::vector<double>& values) {
    sum_over_ranks(values);
    for (double& v : values) v /= world_size();
  }
  // fit ends with this exception on this rank: under ddp the job is aborted with a message
  // naming the rank, since the other ranks would wait for it forever.
  virtual void on_exception(const std::exception& /*error*/) {}
  // The gradient reducer under ddp (statistics for benchmarks), nullptr otherwise.
  virtual const dist::DistributedDataParallel* reducer() const { return nullptr; }
};

// The strategy for the options; throws for an unknown name, devices < -1 or 0, a world size
// that is not `devices`, and ddp without MPI in the build (naming what to install).
std::shared_ptr<Strategy> make_strategy(const StrategyOptions& options);

}  // namespace mantissa::train
