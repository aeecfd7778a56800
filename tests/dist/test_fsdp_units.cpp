// The fsdp strategy's units (src/train/fsdp_units.h) in one process (a world of one rank, so
// a gather copies the slices back and a reduce-scatter keeps every gradient): the units are
// the Sequential's layers with parameters after the first; between uses their storage is
// released (the tensor byte counter drops by their bytes); forward and backward through the
// wrappers give the unwrapped model's outputs and gradients bit for bit, the gradients landing
// in the shard's slices; names and state-dict keys do not change; unwrap puts the layers back
// with their values.
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
