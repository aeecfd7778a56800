// zero1 (DDPStrategy with strategy "zero1"): the optimizer state sharded over the ranks.
//
// Every rank still holds every parameter and, after the gradient all-reduce, every averaged
// gradient, so the loss scaler's inf check and gradient clipping (a global norm) run on all of
// them exactly as under ddp. Right before the update, each rank frees the gradients of the
// parameters other ranks own: its optimizer skips those (a parameter without a gradient is not
// updated) and never makes state for them. After the update each shard's parameters are
// broadcast from their owner. The update of a parameter reads only its own gradient and state,
// so every parameter gets the bits ddp's update gives it.
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/dist/shard_partition.h"
#include "mantissa/train/ddp_strategy.h"
#include "train/tensor_list_bytes.h"

namespace mantissa::train {

namespace {

// The parameter index of an optimizer state key "state.<i>.<buffer>", or of a "state" entry
// of its meta ("<i>").
size_t state_index(const std::string& key) {
  const size_t start = key.starts_with("state.") ? 6 : 0;
  return static_cast<size_t>(std::stoull(key.substr(start, key.find('.', start) - start)));
}

// An optimizer state as bytes: the meta JSON's length, the meta (with the tensor names), the
// tensors (tensor_list_bytes.h).
std::string state_to_bytes(const optim::OptimizerState& state) {
  nlohmann::json meta = state.meta;
  std::vector<Tensor> tensors;
  meta["tensor_names"] = nlohmann::json::array();
  for (const auto& [key, t] : state.tensors) {
    meta["tensor_names"].push_back(key);
    tensors.push_back(t);
  }
  const std::string text = meta.dump();
  const uint64_t length = text.size();
  std::string bytes(sizeof length, '\0');
  std::memcpy(bytes.data(), &length, sizeof length);
  return bytes + text + detail::tensor_list_to_bytes(tensors);
}

optim::OptimizerState state_from_bytes(const std::string& bytes) {
  uint64_t length = 0;
  MANTISSA_CHECK(bytes.size() >= sizeof length, "zero1", "truncated optimizer state shard");
  std::memcpy(&length, bytes.data(), sizeof length);
  MANTISSA_CHECK(length <= bytes.size() - sizeof length, "zero1",
                 "truncated optimizer state shard");
  optim::OptimizerState state;
  state.meta = nlohmann::json::parse(bytes.substr(sizeof length, length));
  const std::vector<Tensor> tensors =
      detail::tensor_list_from_bytes(std::string_view(bytes).substr(sizeof length + length));
  const nlohmann::json names = state.meta["tensor_names"];
  state.meta.erase("tensor_names");
  MANTISSA_CHECK(names.size() == tensors.size(), "zero1",
                 "optimizer state shard has {} names for {} tensors", names.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    state.tensors[names[i].get<std::string>()] = tensors[i];
  return state;
}

}  // namespace

void DDPStrategy::partition_for(const optim::Optimizer& optimizer) {
  const std::vector<Tensor> params = optimizer.parameters();
  if (sharded_optimizer_ == &optimizer && shard_bounds_.back() == params.size()) return;
  std::vector<int64_t> numels;
  for (const Tensor& p : params) numels.push_back(p.numel());
  shard_bounds_ = dist::partition_by_elements(numels, comm_->world_size());
  sharded_optimizer_ = &optimizer;
}

void DDPStrategy::before_optimizer_update(optim::Optimizer& optimizer) {
  if (!shards_optimizer_ || comm_->world_size() <= 1) return;
  partition_for(optimizer);
  const std::vector<Tensor> params = optimizer.parameters();
  const size_t first = shard_bounds_[comm_->rank()];
  const size_t last = shard_bounds_[comm_->rank() + 1];
  for (size_t i = 0; i < params.size(); ++i) {
    if (i >= first && i < last) continue;
    Tensor p = params[i];
    p.reset_grad();
    // State of another rank's parameter: loaded from a whole checkpoint on resume.
    if (const optim::ParamState* s = optimizer.state(p); s != nullptr && !s->empty())
      optimizer.release_state(p);
  }
}

void DDPStrategy::after_optimizer_update(optim::Optimizer& optimizer) {
  if (!shards_optimizer_ || comm_->world_size() <= 1) return;
  partition_for(optimizer);
  const std::vector<Tensor> params = optimizer.parameters();
  NoGradGuard no_grad;
  for (int owner = 0; owner < comm_->world_size(); ++owner) {
    dist::NamedTensors shard;
    for (size_t i = shard_bounds_[owner]; i < shard_bounds_[owner + 1]; ++i)
      shard.emplace_back(fmt::format("optimizer parameter {}", i), params[i]);
    dist::broadcast_tensors(shard, *comm_, owner);
  }
}

std::vector<optim::OptimizerState> DDPStrategy::complete_optimizer_states(
    const std::vector<std::shared_ptr<optim::Optimizer>>& optimizers) {
  if (!shards_optimizer_ || comm_->world_size() <= 1) return {};
  std::vector<optim::OptimizerState> complete;
  for (const auto& opt : optimizers) {
    optim::OptimizerState mine = opt->state_dict();
    // Before the first update every rank holds the same (unsharded) state.
    if (opt.get() != sharded_optimizer_) {
      complete.push_back(std::move(mine));
      continue;
    }
    // Rank 0 keeps its own entries for its shard and receives each other rank's for theirs;
    // an entry of a parameter the sender does not own (a half parameter's master copy made
    // at construction) is not taken.
    optim::OptimizerState merged;
    merged.meta = mine.meta;
    merged.meta["state"] = nlohmann::json::object();
    for (int root = 0; root < comm_->world_size(); ++root) {
      optim::OptimizerState part;
      if (root == 0) {
        part = mine;
      } else {
        std::string bytes = root == comm_->rank() ? state_to_bytes(mine) : std::string();
        int64_t size = static_cast<int64_t>(bytes.size());
        comm_->broadcast(&size, sizeof size, root);
        bytes.resize(static_cast<size_t>(size));
        comm_->broadcast(bytes.data(), size, root);
        if (comm_->rank() != 0) continue;
        part = state_from_bytes(bytes);
      }
      if (comm_->rank() != 0) continue;
      for (const auto& [key, t] : part.tensors)
        if (dist::shard_owner(shard_bounds_, state_index(key)) == root)
          merged.tensors[key] = t.clone();
      for (const auto& [key, entry] : part.meta["state"].items())
        if (dist::shard_owner(shard_bounds_, state_index(key)) == root)
          merged.meta["state"][key] = entry;
    }
    complete.push_back(std::move(merged));
  }
  return comm_->rank() == 0 ? complete : std::vector<optim::OptimizerState>{};
}

}  // namespace mantissa::train
