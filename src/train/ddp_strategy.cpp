#include "mantissa/train/ddp_strategy.h"

#include <fmt/format.h>

#include <new>
#include <set>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/dist/sync_batchnorm.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/train_module.h"
#include "mantissa/train/trainer.h"
#include "train/chunked_gradient_reduce.h"
#include "train/fault_injection.h"
#include "train/fsdp_units.h"
#include "train/optimizer_shard.h"
#include "train/tensor_list_bytes.h"

namespace mantissa::train {

DDPStrategy::DDPStrategy(std::shared_ptr<dist::Communicator> comm, StrategyOptions options)
    : comm_(std::move(comm)),
      options_(std::move(options)),
      shards_optimizer_(options_.strategy == "zero1" || options_.strategy == "zero2" ||
                        options_.strategy == "fsdp"),
      shards_gradients_(options_.strategy == "zero2" || options_.strategy == "fsdp"),
      shards_parameters_(options_.strategy == "fsdp") {
  previous_timeout_s_ = comm_->collective_timeout();
  comm_->set_collective_timeout(options_.collective_timeout_s);
  // FP8 scales follow the amaxes of every rank (TransformerEngine's reduce_amax).
  if (comm_->world_size() > 1) {
    std::weak_ptr<dist::Communicator> weak = comm_;
    fp8::set_amax_reducer([weak](float* amaxes, int64_t n) {
      if (auto c = weak.lock()) c->all_reduce(amaxes, n, kFloat32, dist::ReduceOp::kMax);
    });
  }
}

DDPStrategy::~DDPStrategy() {
  comm_->set_collective_timeout(previous_timeout_s_);
  if (comm_->world_size() > 1) fp8::set_amax_reducer(nullptr);
}

void DDPStrategy::setup_module(TrainModule& module) {
  if (module_ == &module) return;
  // The sharded update runs in the Trainer's automatic optimisation step.
  MANTISSA_CHECK(!shards_optimizer_ || module.automatic_optimization, "Trainer",
                 "strategy '{}' shards the optimizer the Trainer steps; {} steps its optimizers "
                 "itself (automatic_optimization = false): use strategy 'ddp'",
                 name(), module.name());
  module_ = &module;
  if (options_.sync_batchnorm) dist::convert_sync_batchnorm(module, comm_);
  const auto params = module.named_parameters();
  const auto buffers = module.named_buffers();
  dist::check_same_tensors(params, *comm_, "parameters");
  dist::check_same_tensors(buffers, *comm_, "buffers");
  {
    NoGradGuard no_grad;
    dist::broadcast_tensors(params, *comm_, 0);
    dist::broadcast_tensors(buffers, *comm_, 0);
  }
  // zero2 reduces in after_step_backward instead of the reducer's buckets.
  if (!shards_gradients_)
    reducer_ = std::make_unique<dist::DistributedDataParallel>(params, comm_, options_.ddp);
}

const data::DataLoader& DDPStrategy::training_loader(const data::DataLoader& loader) {
  if (loader.sampler() != nullptr) return loader;  // the caller sharded it already
  sharded_.emplace(loader);
  sharded_->set_sampler(std::make_shared<data::DistributedSampler>(
      loader.dataset().size(), comm_->world_size(), comm_->rank(), loader.shuffle(), loader.seed(),
      /*drop_last=*/false));
  return *sharded_;
}

const data::DataLoader& DDPStrategy::evaluation_loader(const data::DataLoader& loader) {
  if (loader.sampler() != nullptr) return loader;  // the caller sharded it already
  // Unrepeated, unlike training's: DistributedSampler's padding would count up to N - 1
  // examples twice in the metrics (Lightning reads them twice; here the sums are exact).
  eval_sharded_.emplace(loader);
  eval_sharded_->set_sampler(std::make_shared<data::DistributedSampler>(
      data::DistributedSampler::unrepeated(loader.dataset().size(), comm_->world_size(),
                                           comm_->rank(), loader.shuffle(), loader.seed())));
  return *eval_sharded_;
}

void DDPStrategy::before_evaluation() {
  if (module_ == nullptr || comm_->world_size() <= 1) return;
  // Batch norm's running statistics are each rank's own (without sync_batchnorm): every rank
  // evaluating its shard with its own would report a mix of N models, none of them the one
  // rank 0 checkpoints (it moved the CNN's test loss by 1e-4). torch's DDP broadcasts rank
  // 0's buffers before every forward (broadcast_buffers); here before every evaluation.
  NoGradGuard no_grad;
  dist::broadcast_tensors(module_->named_buffers(), *comm_, 0);
}

void DDPStrategy::before_backward(bool sync_gradients) {
  detail::fault_point("backward", comm_->rank());
  if (reducer_) reducer_->prepare_for_backward(sync_gradients);
  if (fsdp_) fsdp_->before_backward(sync_gradients);
  // zero2: the step's gradients reduce-scatter chunk by chunk while its last backward runs.
  if (shards_gradients_ && !shards_parameters_ && sync_gradients && comm_->world_size() > 1 &&
      shards_.size() == 1) {
    // One a backward that threw left behind is finished on every rank alike and dropped.
    if (overlapped_reduce_) overlapped_reduce_->finish();
    overlapped_shard_ = shards_.begin()->second.get();
    overlapped_reduce_ = std::make_unique<detail::ChunkedGradientReduce>(
        overlapped_shard_->parameters(), overlapped_shard_->cuts(), *comm_,
        options_.ddp.bucket_cap_bytes, options_.ddp.reduce_dtype);
    overlapped_reduce_->arm_hooks();
  }
}

void DDPStrategy::after_backward() {
  if (reducer_) reducer_->finish_backward();
  if (fsdp_) fsdp_->after_backward();
}

void DDPStrategy::before_optimizer_step(optim::Optimizer& optimizer, Precision& plugin) {
  // Apex's fp16 steps update fp32 masters and copy them into the model inside the plugin's
  // step, before zero1 could broadcast the masters of other ranks' shards.
  MANTISSA_CHECK(!shards_optimizer_ || plugin.precision().rfind("apex", 0) != 0, "Trainer",
                 "strategy '{}' does not support the apex precision '{}' (its fp32 master "
                 "weights are copied into the model inside its step); use strategy 'ddp' or "
                 "another precision",
                 name(), plugin.precision());
  amp::GradScaler* scaler = plugin.scaler();
  if (scaler == nullptr) return;
  if (shards_gradients_ && comm_->world_size() > 1) {
    check_inf_of_gradient_slices(optimizer, *scaler);
    return;
  }
  Tensor found = scaler->found_inf(optimizer);
  // Every rank unscaled the same averaged gradients, so the flags already agree; reducing them
  // makes "skip on every rank together" hold whatever the gradients held.
  double flag = found.defined() ? found.item() : 0.0;
  flag = comm_->all_reduce(flag, dist::ReduceOp::kMax);
  if (found.defined()) found.data<float>()[0] = static_cast<float>(flag);
}

int DDPStrategy::agree_on_signal(int signal) {
  return static_cast<int>(comm_->all_reduce(static_cast<double>(signal), dist::ReduceOp::kMax));
}

double DDPStrategy::mean_over_ranks(double value) {
  return comm_->all_reduce(value, dist::ReduceOp::kSum) / comm_->world_size();
}

void DDPStrategy::sum_over_ranks(std::vector<double>& values) {
  if (values.empty() || comm_->world_size() <= 1) return;
  comm_->all_reduce(values.data(), static_cast<int64_t>(values.size()), kFloat64,
                    dist::ReduceOp::kSum);
}

int64_t DDPStrategy::max_over_ranks(int64_t value) {
  return static_cast<int64_t>(comm_->all_reduce(static_cast<double>(value), dist::ReduceOp::kMax));
}

namespace {

// Every rank's byte string, in rank order, on every rank: each rank broadcasts its length and
// then its bytes in turn (N small broadcasts; the strings here are names and predictions).
std::vector<std::string> each_ranks_bytes(dist::Communicator& comm, const std::string& mine) {
  std::vector<std::string> all;
  for (int root = 0; root < comm.world_size(); ++root) {
    int64_t bytes = root == comm.rank() ? static_cast<int64_t>(mine.size()) : 0;
    comm.broadcast(&bytes, sizeof bytes, root);
    std::string text = root == comm.rank() ? mine : std::string(static_cast<size_t>(bytes), '\0');
    if (bytes > 0) comm.broadcast(text.data(), bytes, root);
    all.push_back(std::move(text));
  }
  return all;
}

}  // namespace

std::vector<std::string> DDPStrategy::union_over_ranks(const std::vector<std::string>& names) {
  if (comm_->world_size() <= 1) return Strategy::union_over_ranks(names);
  // Each rank's names as one '\n'-joined text.
  std::string mine;
  for (const std::string& n : names) mine += n + '\n';
  std::set<std::string> all(names.begin(), names.end());
  for (const std::string& text : each_ranks_bytes(*comm_, mine)) {
    size_t start = 0;
    for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
      all.insert(text.substr(start, end - start));
  }
  return {all.begin(), all.end()};
}

std::vector<std::vector<Tensor>> DDPStrategy::gather_over_ranks(const std::vector<Tensor>& mine) {
  if (comm_->world_size() <= 1) return Strategy::gather_over_ranks(mine);
  std::vector<std::vector<Tensor>> lists;
  const std::vector<std::string> bytes =
      each_ranks_bytes(*comm_, detail::tensor_list_to_bytes(mine));
  for (int r = 0; r < comm_->world_size(); ++r)
    lists.push_back(r == comm_->rank() ? mine : detail::tensor_list_from_bytes(bytes[r]));
  return lists;
}

std::string DDPStrategy::first_message_over_ranks(const std::string& message, int* from_rank) {
  if (from_rank != nullptr) *from_rank = comm_->rank();
  if (comm_->world_size() <= 1) return message;
  const int world = comm_->world_size();
  const int root = static_cast<int>(comm_->all_reduce(
      static_cast<double>(message.empty() ? world : comm_->rank()), dist::ReduceOp::kMin));
  if (root >= world) return "";
  if (from_rank != nullptr) *from_rank = root;
  int64_t bytes = static_cast<int64_t>(message.size());
  comm_->broadcast(&bytes, sizeof bytes, root);
  std::string text = root == comm_->rank() ? message : std::string(static_cast<size_t>(bytes), ' ');
  comm_->broadcast(text.data(), bytes, root);
  return text;
}

void DDPStrategy::on_exception(const std::exception& error) {
  if (comm_->world_size() <= 1) return;
  // Every rank is throwing it (the ranks agreed on a divergence or a failed checkpoint): the
  // job ends as one process does, each rank returning from fit, rank 0 writing the metrics.
  if (const auto* a = dynamic_cast<const RankAgreedError*>(&error); a && a->every_rank()) return;
  fmt::print(stderr, "mantissa: rank {} of {} failed: {}; aborting the job\n", comm_->rank(),
             comm_->world_size(), error.what());
  std::fflush(stderr);
  // The exit status of one process with this error (apps/main.cpp): 2 for mantissa's own errors
  // and running out of memory, 3 for anything else.
  const bool expected = dynamic_cast<const Error*>(&error) != nullptr ||
                        dynamic_cast<const std::bad_alloc*>(&error) != nullptr;
  comm_->abort(expected ? 2 : 3);
}

}  // namespace mantissa::train
