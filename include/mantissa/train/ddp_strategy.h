#pragma once
// DDPStrategy (Lightning's DDPStrategy on MPI, docs/distributed.md): every rank of the job
// runs the same fit on its shard of the data and keeps identical weights.
//
// - setup_module: checks that every rank built the same parameters and buffers (names, dtypes,
//   shapes), copies rank 0's values to all ranks, optionally converts batch norms to
//   SyncBatchNorm2d, registers the gradient reducer and the FP8 amax reduction.
// - training_loader: the loader with a DistributedSampler (padding, the loader's shuffle and
//   seed), so batch b of the N ranks together is batch b of one process with batch N*B.
// - evaluation_loader: validation and test loaders sharded without repeats (every example on
//   one rank), whose sums the modules and the Trainer add up over the ranks.
// - backward: gradients averaged in buckets while backward runs; no_sync inside accumulation.
// - before_optimizer_step: the loss scaler's found-inf flag is all-reduced (max), so all ranks
//   skip an overflowing step together and keep the same scale.
// - zero1 (strategy "zero1", ddp_strategy_zero.cpp): the same, except that the optimizer's
//   flattened parameters are split into contiguous parts of about 1/N of the elements
//   (dist::partition_flat); each rank updates and keeps state for its part only, the updated
//   parts are all-gathered into every rank's parameters, and a checkpoint gathers the state to
//   rank 0 (one ordinary file).
// - zero2 (strategy "zero2"): zero1 whose gradients are reduce-scattered in chunks instead of
//   all-reduced in buckets, each chunk started during backward once its gradients are all
//   there (from the second step on: the first makes the shard), each rank keeping the
//   averaged gradients of its part only; the loss scaler's inf check and norm clipping reduce
//   over the ranks' parts.
// - fsdp (strategy "fsdp", ddp_strategy_fsdp.cpp, fsdp_units.h): zero2 whose parameters are
//   sharded too: between uses each rank holds only its part's values (the shard's slices),
//   each unit (a child module) is all-gathered before its forward and again before its
//   backward and released after each, and its gradients are reduce-scattered as soon as its
//   backward is done.
#include <map>
#include <memory>
#include <optional>

#include "mantissa/dist/communicator.h"
#include "mantissa/dist/ddp.h"
#include "mantissa/train/strategy.h"

namespace mantissa::train {

namespace detail {
class OptimizerShard;
class FsdpUnits;
class ChunkedGradientReduce;
}  // namespace detail

class DDPStrategy final : public Strategy {
 public:
  DDPStrategy(std::shared_ptr<dist::Communicator> comm, StrategyOptions options);
  ~DDPStrategy() override;

  std::string name() const override {
    return shards_parameters_  ? "fsdp"
           : shards_gradients_ ? "zero2"
           : shards_optimizer_ ? "zero1"
                               : "ddp";
  }
  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->world_size(); }
  void setup_module(TrainModule& module) override;
  void setup_optimizers(TrainModule& module,
                        const std::vector<std::shared_ptr<optim::Optimizer>>& opts,
                        const Precision& plugin) override;
  void gather_full_parameters() override;
  void release_full_parameters() override;
  void teardown_module(TrainModule& module) override;
  void unshard_module(TrainModule& module) override;
  const data::DataLoader& training_loader(const data::DataLoader& loader) override;
  const data::DataLoader& evaluation_loader(const data::DataLoader& loader) override;
  void before_evaluation() override;
  void before_backward(bool sync_gradients) override;
  void after_backward() override;
  void after_step_backward(optim::Optimizer& optimizer) override;
  void before_optimizer_step(optim::Optimizer& optimizer, Precision& plugin) override;
  bool clip_gradients(optim::Optimizer& optimizer, double clip_val,
                      GradClipAlgorithm algorithm) override;
  void before_optimizer_update(optim::Optimizer& optimizer) override;
  void after_optimizer_update(optim::Optimizer& optimizer) override;
  std::vector<optim::OptimizerState> complete_optimizer_states(
      const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers) override;
  std::vector<OptimizerStateShard> optimizer_state_shards(
      const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers) override;
  int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) const override;
  int agree_on_signal(int signal) override;
  double mean_over_ranks(double value) override;
  void sum_over_ranks(std::vector<double>& values) override;
  int64_t max_over_ranks(int64_t value) override;
  std::string first_message_over_ranks(const std::string& message, int* from_rank) override;
  std::vector<std::string> union_over_ranks(const std::vector<std::string>& names) override;
  std::vector<std::vector<Tensor>> gather_over_ranks(const std::vector<Tensor>& mine) override;
  using Strategy::mean_over_ranks;
  void on_exception(const std::exception& error) override;
  const dist::DistributedDataParallel* reducer() const override { return reducer_.get(); }
  dist::Communicator& communicator() { return *comm_; }

 private:
  std::shared_ptr<dist::Communicator> comm_;
  StrategyOptions options_;
  TrainModule* module_ = nullptr;
  std::unique_ptr<dist::DistributedDataParallel> reducer_;
  std::optional<data::DataLoader> sharded_;
  std::optional<data::DataLoader> eval_sharded_;  // apart: validation runs inside fit
  // zero1 and zero2: each optimizer's shard on this rank, made at its first update (zero2: its
  // first reduce-scatter).
  bool shards_optimizer_ = false;
  bool shards_gradients_ = false;            // zero2, fsdp
  bool shards_parameters_ = false;           // fsdp
  std::unique_ptr<detail::FsdpUnits> fsdp_;  // fsdp: made by setup_optimizers
  std::map<const optim::Optimizer*, std::unique_ptr<detail::OptimizerShard>> shards_;
  // zero2: the reduce-scatter whose chunks start during this backward, and the shard it was
  // built for (the only one: a module with one optimizer).
  std::unique_ptr<detail::ChunkedGradientReduce> overlapped_reduce_;
  detail::OptimizerShard* overlapped_shard_ = nullptr;
  int64_t steps_before_update_ = 0;
  double previous_timeout_s_ = 0;  // the communicator's, restored when the strategy ends
  detail::OptimizerShard& shard_for(optim::Optimizer& optimizer);
  void check_inf_of_gradient_slices(optim::Optimizer& optimizer, amp::GradScaler& scaler);
};

}  // namespace mantissa::train
