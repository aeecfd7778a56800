// The ZeRO strategies' partition (dist::partition_flat): contiguous parts of the flattened
// parameters, about 1/N of the elements each, cut inside tensors only on their alignment; and
// the property zero1's equality with ddp rests on: a rank's OptimizerShard, stepping its slices
// of the averaged gradients, leaves exactly the unsharded optimizer's parameters and state
// (8-bit codes and absmaxes included) for its elements.
#include <gtest/gtest.h>

#include <cstring>

#include "mantissa/dist/shard_partition.h"
#include "mantissa/mantissa.h"
#include "mantissa/optim/adam8bit.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/sgd.h"
#include "train/optimizer_shard.h"

using namespace mantissa;

namespace {

using Cuts = std::vector<int64_t>;

}  // namespace

TEST(ShardPartition, CutsOnTheQuantizationBlocks) {
  // 300 + 5000 + 4100 elements, blocks of 256: half (4700) lies in the second tensor, 4400
  // elements in; the nearest block edge there is 17 blocks in (4652).
  EXPECT_EQ(dist::partition_flat({300, 5000, 4100}, {256, 256, 256}, 2), (Cuts{0, 4652, 9400}));
  // 4 ranks over one tensor of 4096: every part 1024 elements, 4 blocks.
  EXPECT_EQ(dist::partition_flat({4096}, {256}, 4), (Cuts{0, 1024, 2048, 3072, 4096}));
  // A target nearer the tensor's end than its last block edge: the end (a partial block stays
  // whole).
  EXPECT_EQ(dist::partition_flat({600, 600}, {256, 256}, 2), (Cuts{0, 600, 1200}));
  EXPECT_EQ(dist::partition_flat({1000}, {256}, 2), (Cuts{0, 512, 1000}));
}

TEST(ShardPartition, EachPartHoldsItsShareWithinOneAlignmentUnit) {
  const std::vector<int64_t> numels = {200704, 256, 2560, 10, 7, 65536, 1};
  const int64_t total = 200704 + 256 + 2560 + 10 + 7 + 65536 + 1;
  for (int n : {2, 3, 4, 7}) {
    const Cuts cuts = dist::partition_flat(numels, std::vector<int64_t>(numels.size(), 16), n);
    ASSERT_EQ(cuts.size(), static_cast<size_t>(n + 1));
    EXPECT_EQ(cuts.front(), 0);
    EXPECT_EQ(cuts.back(), total);
    for (int r = 0; r < n; ++r) {
      const int64_t share = cuts[r + 1] - cuts[r];
      EXPECT_LE(std::abs(share - total / n), 16 + 1) << "rank " << r << " of " << n;
    }
  }
}

TEST(ShardPartition, TotalsThatNDoesNotDivide) {
  EXPECT_EQ(dist::partition_flat({10}, {1}, 3), (Cuts{0, 3, 6, 10}));
  EXPECT_EQ(dist::partition_flat({10}, {1}, 4), (Cuts{0, 2, 5, 7, 10}));
  // 7 elements in 3 tensors, cut anywhere: parts of 2, 2, 3.
  EXPECT_EQ(dist::partition_flat({3, 1, 3}, {1, 1, 1}, 3), (Cuts{0, 2, 4, 7}));
}

TEST(ShardPartition, TinyTensorsAndMoreRanksThanElements) {
  // Tensors smaller than the alignment are cut only at their edges.
  EXPECT_EQ(dist::partition_flat({1, 1, 1}, {16, 16, 16}, 2), (Cuts{0, 1, 3}));
  // 2 elements over 4 ranks: some parts are empty, none overlaps, all elements owned.
  EXPECT_EQ(dist::partition_flat({2}, {1}, 4), (Cuts{0, 0, 1, 1, 2}));
  EXPECT_EQ(dist::partition_flat({2}, {16}, 4), (Cuts{0, 0, 0, 0, 2}));
  EXPECT_EQ(dist::partition_flat({}, {}, 3), (Cuts{0, 0, 0, 0}));
  EXPECT_EQ(dist::partition_flat({0, 5, 0}, {1, 1, 1}, 1), (Cuts{0, 5}));
}

TEST(ShardPartition, WholeTensorsStayWhole) {
  using dist::kWholeTensor;
  EXPECT_EQ(dist::partition_flat({100, 100, 100, 100}, {0, 0, 0, 0}, 4),
            (Cuts{0, 100, 200, 300, 400}));
  // The middle start (8193) is the tensor edge nearest to half.
  EXPECT_EQ(dist::partition_flat({8192, 1, 8192, 1},
                                 {kWholeTensor, kWholeTensor, kWholeTensor, kWholeTensor}, 2),
            (Cuts{0, 8193, 16386}));
  // One whole tensor among splittable ones.
  EXPECT_EQ(dist::partition_flat({1000, 1000}, {kWholeTensor, 1}, 2), (Cuts{0, 1000, 2000}));
  EXPECT_EQ(dist::partition_flat({1000, 1000}, {kWholeTensor, 1}, 4),
            (Cuts{0, 0, 1000, 1500, 2000}));
}

TEST(ShardPartition, PiecesOfARange) {
  using P = dist::ShardPiece;
  EXPECT_EQ(dist::pieces_of({300, 5000, 4100}, 0, 4652),
            (std::vector<P>{{0, 0, 300}, {1, 0, 4352}}));
  EXPECT_EQ(dist::pieces_of({300, 5000, 4100}, 4652, 9400),
            (std::vector<P>{{1, 4352, 5000}, {2, 0, 4100}}));
  EXPECT_EQ(dist::pieces_of({0, 3, 0, 2}, 1, 5), (std::vector<P>{{1, 1, 3}, {3, 0, 2}}));
  EXPECT_TRUE(dist::pieces_of({3}, 2, 2).empty());
}

TEST(ShardPartition, RefusesBadInput) {
  EXPECT_THROW(dist::partition_flat({1, 2}, {1, 1}, 0), Error);
  EXPECT_THROW(dist::partition_flat({1, -2}, {1, 1}, 2), Error);
  EXPECT_THROW(dist::partition_flat({1, 2}, {1}, 2), Error);
  EXPECT_THROW(dist::partition_flat({1, 2}, {1, -1}, 2), Error);
  EXPECT_THROW(dist::pieces_of({3}, 2, 4), Error);
}

namespace {

// One rank of a world of `world` ranks with no other rank behind it: collectives leave the
// other ranks' parts as they are (zeros), which is enough to check what this rank computes.
class OneRankOf final : public dist::Communicator {
 public:
  OneRankOf(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "test"; }
  void all_reduce(void*, int64_t, DType, dist::ReduceOp) override {}
  std::unique_ptr<dist::Work> all_reduce_async(void*, int64_t, DType, dist::ReduceOp) override {
    return nullptr;
  }
  void broadcast(void*, int64_t, int) override {}
  void all_gather_bytes(const void* mine, void* out, const std::vector<int64_t>& counts) override {
    int64_t at = 0;
    for (int r = 0; r < rank_; ++r) at += counts[r];
    std::memcpy(static_cast<char*>(out) + at, mine, static_cast<size_t>(counts[rank_]));
  }
  void reduce_scatter(const void*, void*, const std::vector<int64_t>&, DType) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  int rank_, world_;
};

std::vector<uint8_t> bytes_of(const Tensor& t, int64_t first = 0, int64_t count = -1) {
  const Tensor c = t.contiguous();
  if (count < 0) count = c.numel() - first;
  const size_t item = c.dtype().itemsize();
  std::vector<uint8_t> out(static_cast<size_t>(count) * item);
  if (count > 0)
    std::memcpy(out.data(), static_cast<const char*>(c.data_ptr()) + first * item, out.size());
  return out;
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Three steps of the same gradients through the whole optimizer, and through each rank's
// shard of it: every rank's slices of the parameters and of every state buffer are the whole
// run's bytes, and the ranks' state adds up to the whole's.
void expect_shards_equal_the_whole(const std::vector<Shape>& shapes, DType dtype, int world,
                                   const MakeOptimizer& make) {
  Generator gen(7);
  std::vector<Tensor> init, grads;
  for (const Shape& s : shapes) init.push_back(randn(s, kFloat32, &gen).to(dtype));
  for (int step = 0; step < 3; ++step)
    for (const Shape& s : shapes) grads.push_back(randn(s, kFloat32, &gen).to(dtype));
  auto fresh_params = [&] {
    std::vector<Tensor> params;
    for (const Tensor& t : init) params.push_back(t.clone().requires_grad_());
    return params;
  };
  auto set_grads = [&](const std::vector<Tensor>& params, int step) {
    for (size_t i = 0; i < params.size(); ++i)
      params[i].set_grad(grads[step * params.size() + i].clone());
  };
  const std::vector<Tensor> ref_params = fresh_params();
  const std::unique_ptr<optim::Optimizer> ref = make(ref_params);
  for (int step = 0; step < 3; ++step) {
    set_grads(ref_params, step);
    ref->step();
  }
  int64_t shard_bytes = 0;
  for (int rank = 0; rank < world; ++rank) {
    OneRankOf comm(rank, world);
    const std::vector<Tensor> params = fresh_params();
    const std::unique_ptr<optim::Optimizer> whole = make(params);
    train::detail::OptimizerShard shard(*whole, comm);
    for (int step = 0; step < 3; ++step) {
      set_grads(params, step);
      shard.sync_from_whole();
      shard.take_gradient_slices();
      whole->step();  // over no gradient
      shard.step_and_gather(/*chunk_bytes=*/400);
    }
    EXPECT_EQ(whole->state_bytes(), 0) << "the whole optimizer holds state";
    shard_bytes += shard.state_bytes();
    for (const dist::ShardPiece& piece : shard.pieces()) {
      const size_t i = piece.tensor;
      const int64_t n = piece.end - piece.begin;
      const std::string where = "rank " + std::to_string(rank) + " of " + std::to_string(world) +
                                ", parameter " + std::to_string(i);
      EXPECT_EQ(bytes_of(params[i], piece.begin, n), bytes_of(ref_params[i], piece.begin, n))
          << where;
      const optim::ParamState* mine = shard.optimizer().state(shard.slice(i));
      const optim::ParamState* full = ref->state(ref_params[i]);
      ASSERT_NE(mine, nullptr);
      EXPECT_EQ(mine->step, full->step) << where;
      ASSERT_EQ(mine->buffers.size(), full->buffers.size()) << where;
      for (const auto& [name, t] : full->buffers) {
        const bool blockwise = name == "absmax1" || name == "absmax2";
        const int64_t first = blockwise ? piece.begin / 256 : piece.begin;
        const int64_t count = blockwise ? (piece.end + 255) / 256 - first : n;
        EXPECT_EQ(bytes_of(mine->buffers.at(name)), bytes_of(t, first, count))
            << where << ", buffer " << name;
      }
    }
  }
  EXPECT_EQ(shard_bytes, ref->state_bytes());
}

}  // namespace

TEST(OptimizerShard, AdamW8bitCodesAndAbsmaxesAreTheUnshardedOnes) {
  // Blocks of 256 counted from each tensor's start, the small tensor with fp32 state.
  const std::vector<Shape> shapes = {{300}, {50, 100}, {41, 100}};
  for (int world : {2, 3, 4})
    expect_shards_equal_the_whole(shapes, kFloat32, world, [](std::vector<Tensor> p) {
      return std::make_unique<optim::AdamW8bit>(std::move(p));
    });
}

TEST(OptimizerShard, AdamWAndSgdSlicesAreTheUnshardedOnes) {
  const std::vector<Shape> shapes = {{37, 29}, {5}, {1}, {130}};
  for (int world : {2, 3, 4}) {
    expect_shards_equal_the_whole(shapes, kFloat32, world, [](std::vector<Tensor> p) {
      return std::make_unique<optim::AdamW>(std::move(p), 1e-2);
    });
    expect_shards_equal_the_whole(shapes, kFloat32, world, [](std::vector<Tensor> p) {
      return std::make_unique<optim::SGD>(std::move(p), 0.1, /*momentum=*/0.9);
    });
  }
}

TEST(OptimizerShard, HalfParametersWithMasterWeights) {
  const std::vector<Shape> shapes = {{37, 29}, {130}};
  for (int world : {2, 4})
    expect_shards_equal_the_whole(shapes, kBFloat16, world, [](std::vector<Tensor> p) {
      optim::AdamOptions o = optim::adamw_defaults();
      o.master_weights = true;
      return std::make_unique<optim::AdamW>(std::move(p), o);
    });
}

TEST(OptimizerShard, StochasticRoundingKeepsHalfTensorsWhole) {
  // The random stream is keyed by the parameter's index and element offset: tensors are not
  // split, and the bits are the unsharded run's.
  const std::vector<Shape> shapes = {{37, 29}, {130}, {64}};
  for (int world : {2, 3})
    expect_shards_equal_the_whole(shapes, kBFloat16, world, [](std::vector<Tensor> p) {
      optim::AdamOptions o = optim::adamw_defaults();
      o.stochastic_rounding = true;
      o.rounding_seed = 5;
      return std::make_unique<optim::AdamW>(std::move(p), o);
    });
}

TEST(OptimizerShard, ReleasedStateStartsAfresh) {
  Tensor p = ones({4}).requires_grad_();
  optim::Adam8bit opt({p}, optim::adamw8bit_defaults());
  p.set_grad(ones({4}));
  opt.step();
  ASSERT_GT(opt.state_bytes(), 0);
  opt.release_state(p);
  EXPECT_EQ(opt.state_bytes(), 0);
  EXPECT_TRUE(opt.state(p)->empty());
}
