// zero1 (DDPStrategy with strategy "zero1"): the optimizer state sharded over the ranks.
//
// Every rank still holds every parameter and, after the gradient all-reduce, every averaged
// gradient, so the loss scaler's inf check and gradient clipping (a global norm) run on all of
// them exactly as under ddp. Right before the update each rank moves its part of the averaged
// gradients into its OptimizerShard (optimizer_shard.h: about 1/N of the elements, tensors
// split where the part ends) and frees the whole gradients; the Trainer's optimizer then steps
// over no gradient (counting the step, so schedulers see it), and once it has, the shard steps
// and the updated slices are all-gathered into the parameters. The update of an element reads
// only its own gradient and state, so every element gets the bits ddp's update gives it.
//
// zero2 (strategy "zero2"): no bucketed all-reduce; during the backward of a step's last
// micro-batch the gradients are reduce-scattered in chunks of float32 (or bfloat16,
// ddp.reduce_dtype; ChunkedGradientReduce), each chunk started once its gradients are all
// accumulated and each whole gradient freed once its chunks are packed; after backward the
// rest start, and each rank keeps the averaged gradients of its part in its shard. The loss
// scaler unscales each rank's slices (the shard optimizer's gradients) and the inf flag is the
// maximum over the ranks; norm clipping scales the slices by the norm of all of them (one
// all-reduce of per-parameter sums of squares); value clipping is element-wise. With two ranks
// a reduce-scatter adds the same two numbers an all-reduce adds, so the weights are ddp's bit
// for bit.
#include "mantissa/nn/clip_grad.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/ddp_strategy.h"
#include "train/chunked_gradient_reduce.h"
#include "train/fsdp_units.h"
#include "train/optimizer_shard.h"

namespace mantissa::train {

detail::OptimizerShard& DDPStrategy::shard_for(optim::Optimizer& optimizer) {
  auto& shard = shards_[&optimizer];
  if (!shard || !shard->is_for(optimizer))
    shard = std::make_unique<detail::OptimizerShard>(optimizer, *comm_);
  return *shard;
}

void DDPStrategy::after_step_backward(optim::Optimizer& optimizer) {
  // fsdp reduce-scattered each unit's gradients during backward and the rest after it.
  if (!shards_gradients_ || comm_->world_size() <= 1 || fsdp_) return;
  detail::OptimizerShard& shard = shard_for(optimizer);
  shard.sync_from_whole();
  std::unique_ptr<detail::ChunkedGradientReduce> started = std::move(overlapped_reduce_);
  if (started && overlapped_shard_ == &shard) {
    shard.take_reduced_gradients(*started);
    return;
  }
  // Chunks started for another shard (the optimizer was replaced) are finished on every rank
  // alike and dropped.
  if (started) started->finish();
  shard.reduce_scatter_gradients(options_.ddp.bucket_cap_bytes, options_.ddp.reduce_dtype);
}

void DDPStrategy::check_inf_of_gradient_slices(optim::Optimizer& optimizer,
                                               amp::GradScaler& scaler) {
  // The plugin's unscale_ found no gradient on the configured optimizer (they are in the
  // shard): the shard's are unscaled, with the same arithmetic, and the flag reduced.
  optim::Optimizer& slices = shard_for(optimizer).optimizer();
  scaler.unscale_(slices);
  Tensor mine = scaler.found_inf(slices);
  const double flag = comm_->all_reduce(mine.defined() ? mine.item() : 0.0, dist::ReduceOp::kMax);
  if (mine.defined()) mine.data<float>()[0] = static_cast<float>(flag);
  scaler.record_found_inf(optimizer, scalar_tensor(flag, kFloat32));
}

bool DDPStrategy::clip_gradients(optim::Optimizer& optimizer, double clip_val,
                                 GradClipAlgorithm algorithm) {
  if (!shards_gradients_ || comm_->world_size() <= 1) return false;
  detail::OptimizerShard& shard = shard_for(optimizer);
  if (algorithm == GradClipAlgorithm::kValue) {
    nn::utils::clip_grad_value_(shard.slices(), clip_val);
  } else {
    nn::utils::clip_grads_with_norm_(shard.slices(), clip_val, shard.global_gradient_norm());
  }
  return true;
}

void DDPStrategy::before_optimizer_update(optim::Optimizer& optimizer) {
  if (!shards_optimizer_ || comm_->world_size() <= 1) return;
  detail::OptimizerShard& shard = shard_for(optimizer);
  if (!shards_gradients_) {
    shard.sync_from_whole();
    shard.take_gradient_slices();
  }
  if (fsdp_) shard.sync_from_whole();  // the options a scheduler set (the slices hold the values)
  steps_before_update_ = optimizer.step_count();
}

void DDPStrategy::after_optimizer_update(optim::Optimizer& optimizer) {
  if (!shards_optimizer_ || comm_->world_size() <= 1) return;
  // A step the loss scaler skipped (every rank agrees: the inf flag is reduced) changes
  // nothing.
  if (optimizer.step_count() == steps_before_update_) return;
  if (fsdp_) {
    shard_for(optimizer).step_shard();
    fsdp_->after_update();
    return;
  }
  shard_for(optimizer).step_and_gather(options_.ddp.bucket_cap_bytes);
}

std::vector<optim::OptimizerState> DDPStrategy::complete_optimizer_states(
    const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers) {
  if (!shards_optimizer_ || comm_->world_size() <= 1) return {};
  std::vector<optim::OptimizerState> complete;
  for (const auto& opt : optimizers) {
    auto it = shards_.find(opt.get());
    // Before its first update every rank holds the optimizer's whole (unsharded) state.
    if (it == shards_.end() || !it->second->is_for(*opt)) {
      complete.push_back(opt->state_dict());
      continue;
    }
    // A checkpoint loaded since the last update is still in the whole optimizer.
    it->second->take_state_from_whole();
    complete.push_back(it->second->gather_state());
  }
  return comm_->rank() == 0 ? complete : std::vector<optim::OptimizerState>{};
}

std::vector<OptimizerStateShard> DDPStrategy::optimizer_state_shards(
    const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers) {
  if (!shards_optimizer_ || !options_.sharded_checkpoints || comm_->world_size() <= 1) return {};
  std::vector<OptimizerStateShard> out;
  for (const auto& opt : optimizers) {
    // Made now when no update made it yet (its state then comes from the whole's).
    detail::OptimizerShard& shard = shard_for(*opt);
    shard.take_state_from_whole();  // a checkpoint loaded since the last update
    OptimizerStateShard s;
    s.state = shard.optimizer().state_dict();
    s.whole_meta = opt->state_dict().meta;
    s.whole_meta["state"] = nlohmann::json::object();
    s.cuts = shard.cuts();
    for (const Tensor& p : opt->parameters()) s.shapes.push_back(p.shape());
    out.push_back(std::move(s));
  }
  return out;
}

int64_t DDPStrategy::optimizer_state_bytes(const optim::Optimizer& optimizer) const {
  int64_t bytes = optimizer.state_bytes();
  if (auto it = shards_.find(&optimizer); it != shards_.end()) bytes += it->second->state_bytes();
  return bytes;
}

}  // namespace mantissa::train
