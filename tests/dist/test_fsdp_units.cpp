// The fsdp strategy's units (src/train/fsdp_units.h) in one process (a world of one rank, so
// a gather copies the slices back and a reduce-scatter keeps every gradient): the units are
// the Sequential's layers with parameters after the first; between uses their storage is
// released (the tensor byte counter drops by their bytes); forward and backward through the
// wrappers give the unwrapped model's outputs and gradients bit for bit, the gradients landing
// in the shard's slices; names and state-dict keys do not change; unwrap puts the layers back
// with their values. Prefetching (the next unit's gather started before the current unit
// runs) changes none of the bytes; gathering in bfloat16 (param_dtype) sends half the bytes
// and computes with the values rounded to bfloat16, while a checkpoint's gather and unwrap
// get the exact values. A ModuleList's blocks are units each, and a frozen parameter outside
// the optimizer stays whole.
#include <gtest/gtest.h>

#include <cstring>

#include "mantissa/mantissa.h"
#include "mantissa/optim/adamw.h"
#include "train/fsdp_units.h"
#include "train/optimizer_shard.h"

using namespace mantissa;

namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint8_t> out(static_cast<size_t>(c.numel()) * c.dtype().itemsize());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

std::shared_ptr<nn::Sequential> make_net() {
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(std::make_shared<nn::Linear>(8, 16, true, kFloat32));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::Linear>(16, 16, true, kFloat32));
  net->push_back(std::make_shared<nn::ReLU>());
  net->push_back(std::make_shared<nn::Linear>(16, 4, true, kFloat32));
  return net;
}

Tensor loss_of(nn::Module& net, const Tensor& x) {
  const Tensor y = net.forward(x);
  return sum(mul(y, y));
}

}  // namespace

TEST(FsdpUnits, ReleasedBetweenUsesAndExactInForwardAndBackward) {
  Generator gen(3);
  const Tensor x = randn({5, 8}, kFloat32, &gen);
  auto ref = make_net();
  auto net = make_net();
  net->load_state_dict(ref->state_dict());
  const std::vector<std::string> keys = net->state_dict().keys();

  const Tensor ref_loss = loss_of(*ref, x);
  ref_loss.backward();

  optim::AdamW opt(net->parameters(), optim::AdamOptions{});
  dist::SingleProcessCommunicator comm;
  train::detail::OptimizerShard shard(opt, comm);
  shard.set_slices_hold_values(true);
  const int64_t before = memory_allocated();
  train::detail::FsdpUnits units(*net, shard, kFloat32);
  // Layers "2" and "4" (16x16 + 16 and 16x4 + 4 floats); "0", the first, stays in the root.
  EXPECT_EQ(units.unit_names(), (std::vector<std::string>{"2", "4"}));
  EXPECT_EQ(before - memory_allocated(), (16 * 16 + 16 + 16 * 4 + 4) * 4);
  const auto params = net->named_parameters();
  for (const auto& [name, p] : params) EXPECT_EQ(p.storage()->released(), name[0] != '0') << name;
  EXPECT_EQ(net->state_dict().keys(), keys);

  const Tensor loss = loss_of(*net, x);
  EXPECT_EQ(bytes_of(loss), bytes_of(ref_loss));
  for (const auto& [name, p] : params) EXPECT_EQ(p.storage()->released(), name[0] != '0') << name;
  units.before_backward(/*sync_gradients=*/true);
  loss.backward();
  units.after_backward();
  // Forward: unit "2" started "4"'s gather; backward: "4" started "2"'s. Every one was used.
  EXPECT_EQ(units.prefetches_started(), 2);
  EXPECT_EQ(units.prefetches_used(), 2);
  const auto ref_params = ref->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& name = params[i].first;
    EXPECT_TRUE(params[i].second.storage()->released() == (name[0] != '0')) << name;
    EXPECT_FALSE(params[i].second.grad().defined()) << name << ": the whole gradient is kept";
    // With one rank the slice is the whole parameter, its gradient the whole gradient.
    EXPECT_EQ(bytes_of(shard.slice(i).grad()), bytes_of(ref_params[i].second.grad())) << name;
  }

  units.unwrap();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_FALSE(params[i].second.storage()->released()) << params[i].first;
    EXPECT_EQ(bytes_of(params[i].second), bytes_of(ref_params[i].second)) << params[i].first;
  }
  for (const char* slot : {"2", "4"})
    EXPECT_NE(std::dynamic_pointer_cast<nn::Linear>(net->child(slot)), nullptr) << slot;
  EXPECT_EQ(bytes_of(loss_of(*net, x)), bytes_of(ref_loss));
}

TEST(FsdpUnits, ActivationCheckpointingRecomputesWithTheValues) {
  Generator gen(5);
  const Tensor x = randn({3, 8}, kFloat32, &gen).requires_grad_();
  auto ref = make_net();
  auto net = make_net();
  net->load_state_dict(ref->state_dict());
  const Tensor ref_loss = sum(nn::checkpoint(*ref, x));
  ref_loss.backward();

  optim::AdamW opt(net->parameters(), optim::AdamOptions{});
  dist::SingleProcessCommunicator comm;
  train::detail::OptimizerShard shard(opt, comm);
  shard.set_slices_hold_values(true);
  train::detail::FsdpUnits units(*net, shard, kFloat32);
  const Tensor xx = x.detach().requires_grad_();
  // The forward runs without a graph; backward recomputes it, the units gathered again.
  const Tensor loss = sum(nn::checkpoint(*net, xx));
  units.before_backward(true);
  loss.backward();
  units.after_backward();
  EXPECT_EQ(bytes_of(loss), bytes_of(ref_loss));
  EXPECT_EQ(bytes_of(xx.grad()), bytes_of(x.grad()));
  const auto ref_params = ref->parameters();
  for (size_t i = 0; i < ref_params.size(); ++i)
    EXPECT_EQ(bytes_of(shard.slice(i).grad()), bytes_of(ref_params[i].grad())) << i;
  units.unwrap();
}

// The same forward, backward and gradients without prefetching: every gather blocks.
TEST(FsdpUnits, WithoutPrefetchTheSameBytes) {
  Generator gen(4);
  const Tensor x = randn({5, 8}, kFloat32, &gen);
  std::vector<std::vector<uint8_t>> grads[2];
  std::vector<uint8_t> losses[2];
  for (int prefetch = 0; prefetch < 2; ++prefetch) {
    Generator init(9);
    auto net = make_net();
    for (auto& p : net->parameters()) {
      NoGradGuard g;
      p.copy_(randn(p.shape(), kFloat32, &init));
    }
    optim::AdamW opt(net->parameters(), optim::AdamOptions{});
    dist::SingleProcessCommunicator comm;
    train::detail::OptimizerShard shard(opt, comm);
    shard.set_slices_hold_values(true);
    train::detail::FsdpUnits units(*net, shard, kFloat32, prefetch == 1);
    const Tensor loss = loss_of(*net, x);
    units.before_backward(true);
    loss.backward();
    units.after_backward();
    EXPECT_EQ(units.prefetches_started(), prefetch == 1 ? 2 : 0);
    losses[prefetch] = bytes_of(loss);
    for (size_t i = 0; i < net->parameters().size(); ++i)
      grads[prefetch].push_back(bytes_of(shard.slice(i).grad()));
    units.unwrap();
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(grads[0], grads[1]);
}

// param_dtype bfloat16: the units' weights travel as bfloat16 (half the bytes of float32) and
// the forward computes with them rounded to bfloat16: its output is the reference net's whose
// unit weights were rounded so (the root's layer "0" keeps its float32 values). A checkpoint's
// gather (gather_all) and unwrap bring back the exact float32 values from the slices.
TEST(FsdpUnits, Bfloat16GathersCarryTheRoundedValuesAndCheckpointsTheExactOnes) {
  Generator gen(6);
  const Tensor x = randn({5, 8}, kFloat32, &gen);
  std::vector<uint8_t> outputs[2];
  int64_t bytes[2] = {0, 0};
  auto ref = make_net();
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    auto net = make_net();
    net->load_state_dict(ref->state_dict());
    optim::AdamW opt(net->parameters(), optim::AdamOptions{});
    dist::SingleProcessCommunicator comm;
    train::detail::OptimizerShard shard(opt, comm);
    shard.set_slices_hold_values(true);
    train::detail::FsdpUnits units(*net, shard, kFloat32, true, bf16 ? kBFloat16 : kFloat32);
    {
      NoGradGuard g;
      outputs[bf16] = bytes_of(net->forward(x));
    }
    bytes[bf16] = shard.gathered_bytes();
    units.gather_all();  // a checkpoint's view: the exact values
    const auto params = net->named_parameters();
    const auto ref_params = ref->named_parameters();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_EQ(bytes_of(params[i].second), bytes_of(ref_params[i].second)) << params[i].first;
    units.release_all();
    units.unwrap();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_EQ(bytes_of(params[i].second), bytes_of(ref_params[i].second)) << params[i].first;
  }
  // Units "2" and "4": 16*16 + 16 + 16*4 + 4 = 340 elements, 4 bytes each or 2.
  EXPECT_EQ(bytes[0], 340 * 4);
  EXPECT_EQ(bytes[1], 340 * 2);
  auto rounded = make_net();
  rounded->load_state_dict(ref->state_dict());
  for (const auto& [name, p] : rounded->named_parameters()) {
    if (name[0] == '0') continue;
    NoGradGuard g;
    Tensor(p).copy_(p.to(kBFloat16).to(kFloat32));
  }
  NoGradGuard g;
  EXPECT_EQ(outputs[1], bytes_of(rounded->forward(x)));
  EXPECT_NE(outputs[1], outputs[0]);
  EXPECT_EQ(outputs[0], bytes_of(ref->forward(x)));
}

namespace {

// A block whose first Linear trains and whose second is frozen and outside the optimizer (as a
// norm's weight beside QLoRA's adapters).
std::shared_ptr<nn::Sequential> make_block() {
  auto block = std::make_shared<nn::Sequential>();
  block->push_back(std::make_shared<nn::Linear>(8, 8, true, kFloat32));
  auto frozen = std::make_shared<nn::Linear>(8, 8, false, kFloat32);
  frozen->weight.requires_grad_(false);
  block->push_back(frozen);
  return block;
}

// Laid out as a Hugging Face causal LM: an input layer, a ModuleList of blocks its forward
// calls one by one (the list itself has no forward), a final layer.
class ListModel : public nn::Module {
 public:
  ListModel() : nn::Module("ListModel") {
    register_module("embed", std::make_shared<nn::Linear>(8, 8, true, kFloat32));
    auto layers = register_module("layers", std::make_shared<nn::ModuleList>());
    layers->push_back(make_block());
    layers->push_back(make_block());
    register_module("norm", std::make_shared<nn::Linear>(8, 8, true, kFloat32));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = child("embed")->forward(x);
    for (const auto& [name, layer] : child("layers")->child_slots()) h = layer->forward(h);
    return child("norm")->forward(h);
  }
};

std::vector<Tensor> trainable(nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

}  // namespace

// The blocks of a ModuleList are units of their own (a whole list would be bypassed: its
// owner calls the blocks, not the list), and a frozen parameter the optimizer does not hold
// stays whole in its block's unit.
TEST(FsdpUnits, ModuleListBlocksAreUnitsAndFrozenParametersStayWhole) {
  Generator gen(7);
  const Tensor x = randn({4, 8}, kFloat32, &gen);
  auto ref = std::make_shared<ListModel>();
  auto net = std::make_shared<ListModel>();
  net->load_state_dict(ref->state_dict());
  const Tensor ref_loss = loss_of(*ref, x);
  ref_loss.backward();

  optim::AdamW opt(trainable(*net), optim::AdamOptions{});
  dist::SingleProcessCommunicator comm;
  train::detail::OptimizerShard shard(opt, comm);
  shard.set_slices_hold_values(true);
  train::detail::FsdpUnits units(*net, shard, kFloat32);
  EXPECT_EQ(units.unit_names(), (std::vector<std::string>{"layers.0", "layers.1", "norm"}));
  const auto params = net->named_parameters();
  auto released_between_uses = [](const std::string& name) {
    return name.starts_with("norm.") || name.find(".0.weight") != std::string::npos ||
           name.find(".0.bias") != std::string::npos;
  };
  for (const auto& [name, p] : params)
    EXPECT_EQ(p.storage()->released(), released_between_uses(name)) << name;

  const Tensor loss = loss_of(*net, x);
  EXPECT_EQ(bytes_of(loss), bytes_of(ref_loss));
  units.before_backward(/*sync_gradients=*/true);
  loss.backward();
  units.after_backward();
  const std::vector<Tensor> ref_trainable = trainable(*ref);
  const std::vector<Tensor>& sharded = shard.parameters();
  ASSERT_EQ(sharded.size(), ref_trainable.size());
  for (size_t i = 0; i < sharded.size(); ++i)
    EXPECT_EQ(bytes_of(shard.slice(i).grad()), bytes_of(ref_trainable[i].grad())) << i;
  for (const auto& [name, p] : params)
    EXPECT_EQ(p.storage()->released(), released_between_uses(name)) << name;

  units.unwrap();
  const auto ref_params = ref->named_parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(bytes_of(params[i].second), bytes_of(ref_params[i].second)) << params[i].first;
  EXPECT_EQ(bytes_of(loss_of(*net, x)), bytes_of(ref_loss));
}
