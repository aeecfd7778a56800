// zero1's shard partition (dist::partition_by_elements): contiguous runs of whole tensors,
// balanced by element count; and the property the 8-bit optimizers' equality rests on: a rank
// that steps only its shard (the other parameters' gradients freed) holds exactly the state,
// codes and absmaxes of the unsharded optimizer for those parameters, and none for the rest.
#include <gtest/gtest.h>

#include <cstring>

#include "mantissa/dist/shard_partition.h"
#include "mantissa/mantissa.h"
#include "mantissa/optim/adam8bit.h"

using namespace mantissa;

TEST(ShardPartition, SplitsTheElementsEvenlyAtTensorStarts) {
  // 2 ranks over 8192 + 1 + 8192 + 1 elements: the middle start (8193) is nearest to half.
  EXPECT_EQ(dist::partition_by_elements({8192, 1, 8192, 1}, 2), (std::vector<size_t>{0, 2, 4}));
  // 4 ranks over four equal tensors: one each.
  EXPECT_EQ(dist::partition_by_elements({100, 100, 100, 100}, 4),
            (std::vector<size_t>{0, 1, 2, 3, 4}));
  // An MLP 784-256-10 (weights and biases): rank 0 the first weight, rank 1 the rest.
  EXPECT_EQ(dist::partition_by_elements({256 * 784, 256, 10 * 256, 10}, 2),
            (std::vector<size_t>{0, 1, 4}));
  // One process owns everything.
  EXPECT_EQ(dist::partition_by_elements({5, 7}, 1), (std::vector<size_t>{0, 2}));
}

TEST(ShardPartition, MoreRanksThanTensorsLeaveEmptyShards) {
  const std::vector<size_t> b = dist::partition_by_elements({10, 10}, 4);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(b.front(), 0u);
  EXPECT_EQ(b.back(), 2u);
  for (size_t r = 0; r + 1 < b.size(); ++r) EXPECT_LE(b[r], b[r + 1]);
  // Every tensor has exactly one owner.
  EXPECT_EQ(dist::shard_owner(b, 0) != dist::shard_owner(b, 1), true);
  EXPECT_EQ(dist::partition_by_elements({}, 3), (std::vector<size_t>{0, 0, 0, 0}));
}

TEST(ShardPartition, RefusesBadInput) {
  EXPECT_THROW(dist::partition_by_elements({1, 2}, 0), Error);
  EXPECT_THROW(dist::partition_by_elements({1, -2}, 2), Error);
  EXPECT_THROW(dist::shard_owner({0, 1, 2}, 2), Error);
}

namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint8_t> out(static_cast<size_t>(c.nbytes()));
  std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

}  // namespace

TEST(ShardPartition, ShardedAdamW8bitStateEqualsTheUnshardedCodes) {
  // Tensors of 300, 5000 and 4100 elements: blocks of 256 counted from each tensor's start,
  // the small one with fp32 state; 3 steps of the same gradients.
  const std::vector<Shape> shapes = {{300}, {50, 100}, {41, 100}};
  Generator gen(7);
  std::vector<Tensor> init, grads;
  for (const Shape& s : shapes) init.push_back(randn(s, kFloat32, &gen));
  for (int step = 0; step < 3; ++step)
    for (const Shape& s : shapes) grads.push_back(randn(s, kFloat32, &gen));
  std::vector<int64_t> numels;
  for (const Tensor& t : init) numels.push_back(t.numel());
  const std::vector<size_t> bounds = dist::partition_by_elements(numels, 2);
  ASSERT_EQ(bounds, (std::vector<size_t>{0, 2, 3}));

  // The unsharded optimizer, then each "rank" with its shard's gradients only.
  auto run = [&](int rank) {
    std::vector<Tensor> params;
    for (const Tensor& t : init) params.push_back(t.clone().requires_grad_());
    auto opt = std::make_unique<optim::Adam8bit>(params, optim::adamw8bit_defaults());
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < params.size(); ++i) {
        if (rank >= 0 && dist::shard_owner(bounds, i) != rank)
          params[i].reset_grad();
        else
          params[i].set_grad(grads[step * params.size() + i].clone());
      }
      opt->step();
    }
    return std::make_pair(params, std::move(opt));
  };
  auto [full_params, full] = run(-1);
  int64_t sharded_bytes = 0;
  for (int rank = 0; rank < 2; ++rank) {
    auto [params, opt] = run(rank);
    sharded_bytes += opt->state_bytes();
    for (size_t i = 0; i < params.size(); ++i) {
      const optim::ParamState* s = opt->state(params[i]);
      ASSERT_NE(s, nullptr);
      if (dist::shard_owner(bounds, i) != rank) {
        EXPECT_TRUE(s->empty()) << "rank " << rank << " holds state of parameter " << i;
        continue;
      }
      const optim::ParamState* f = full->state(full_params[i]);
      EXPECT_EQ(s->step, f->step);
      ASSERT_EQ(s->buffers.size(), f->buffers.size());
      for (const auto& [name, t] : f->buffers)
        EXPECT_EQ(bytes_of(s->buffers.at(name)), bytes_of(t))
            << "parameter " << i << " buffer " << name;
      EXPECT_EQ(bytes_of(params[i]), bytes_of(full_params[i])) << "parameter " << i;
    }
  }
  // Together the shards hold exactly the unsharded state.
  EXPECT_EQ(sharded_bytes, full->state_bytes());
}

TEST(ShardPartition, ReleasedStateStartsAfresh) {
  Tensor p = ones({4}).requires_grad_();
  optim::Adam8bit opt({p}, optim::adamw8bit_defaults());
  p.set_grad(ones({4}));
  opt.step();
  ASSERT_GT(opt.state_bytes(), 0);
  opt.release_state(p);
  EXPECT_EQ(opt.state_bytes(), 0);
  EXPECT_TRUE(opt.state(p)->empty());
}
