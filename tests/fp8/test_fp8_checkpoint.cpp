// FP8 and FP4 layers inside activation checkpointing (nn::checkpoint, docs/guide.md
// "Activation checkpointing"): under every recipe whose replay computes the first forward's
// values, delayed scaling included (its replay casts with the first forward's scales), a few
// training steps of two micro-batches with a checkpointed segment give the bits of the same
// steps without one (losses, gradients, weights), the same statistics (amax histories, scales,
// cast counts) and the same stochastic rounding stream; mxfp4 with stochastic rounding is
// refused with its reason.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "mantissa/core/generator.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/fp8/nvfp4_scaling.h"
#include "mantissa/nn/checkpoint.h"
#include "mantissa/nn/functional.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/reduce.h"
#include "support/test_util.h"

namespace mantissa::fp8 {
namespace {

using testing::expect_error;
using testing::rnd;

constexpr int64_t kRows = 32, kIn = 64, kHidden = 128, kOut = 32;
// More steps than the shortest amax history below has rows, so that its window rolls over.
constexpr int kSteps = 6, kMicroBatches = 2;

std::vector<uint32_t> bits(const Tensor& t) {
  const std::vector<float> v = t.to(kFloat32).to_vector<float>();
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

// Linear, GELU, Linear (the checkpointed segment where asked), then a Linear outside it, so
// that the layer after the segment casts and draws between the segment's forward and replay.
struct Model {
  std::shared_ptr<Linear> fc1, fc2, head;
  explicit Model(DType dtype) {
    manual_seed(7);
    fc1 = std::make_shared<Linear>(kIn, kHidden, true, dtype, 1);
    fc2 = std::make_shared<Linear>(kHidden, kIn, true, dtype, 1);
    head = std::make_shared<Linear>(kIn, kOut, true, dtype, 1);
  }
  std::vector<Linear*> layers() { return {fc1.get(), fc2.get(), head.get()}; }
  std::vector<Tensor> parameters() {
    std::vector<Tensor> ps;
    for (Linear* l : layers())
      for (const Tensor& p : l->parameters()) ps.push_back(p);
    return ps;
  }
  Tensor forward(const Tensor& x, bool checkpointed) {
    const auto segment = [this](const std::vector<Tensor>& in) {
      return (*fc2)(nn::functional::gelu((*fc1)(in[0])));
    };
    nn::CheckpointOptions options;
    for (Linear* l : {fc1.get(), fc2.get()})
      for (const Tensor& p : l->parameters()) options.parameters.push_back(p);
    const Tensor h = checkpointed ? nn::checkpoint(segment, {x}, options) : segment({x});
    return (*head)(h);
  }
};

// What a run leaves: every step's loss, the last step's gradients, the weights after the
// steps, each layer's statistics and the stream.
struct TrainedRun {
  std::vector<uint32_t> losses;
  std::vector<std::vector<uint32_t>> grads, weights;
  std::vector<std::vector<float>> histories;
  std::vector<float> scales;
  std::vector<int64_t> counts;
  std::vector<double> peaks;
  SrStream stream;
};

// Each step accumulates the gradients of its micro-batches, each in an FP8 region of its own
// (so delayed scaling updates the forward scales between a micro-batch's forward and its
// backward, and the later micro-batches find the weight's cast cached).
TrainedRun train(const Recipe& recipe, bool checkpointed, DType dtype = kFloat32) {
  Model m(dtype);
  nvfp4_sr_stream() = {11, 0};
  TrainedRun r;
  for (int step = 0; step < kSteps; ++step) {
    for (Linear* l : m.layers()) l->zero_grad();
    for (int micro = 0; micro < kMicroBatches; ++micro) {
      const uint64_t seed = static_cast<uint64_t>(kMicroBatches * step + micro);
      const Tensor x = rnd({kRows, kIn}, dtype, 100 + seed);
      const Tensor target = rnd({kRows, kOut}, dtype, 200 + seed);
      Tensor loss;
      {
        const Fp8Autocast fp8_on(true, recipe);
        loss = mse_loss(m.forward(x, checkpointed), target);
      }
      loss.backward();
      r.losses.push_back(bits(loss)[0]);
    }
    if (step == kSteps - 1)
      for (const Tensor& p : m.parameters()) r.grads.push_back(bits(p.grad()));
    for (Tensor& p : m.parameters()) p.detach().copy_(sub(p.detach(), mul(p.grad(), 0.5)));
  }
  for (const Tensor& p : m.parameters()) r.weights.push_back(bits(p));
  for (Linear* l : m.layers()) {
    ScalingState& s = *l->fp8_state();
    for (int slot = 0; slot < kNumRoles; ++slot) {
      r.histories.push_back(s.history_of(slot));
      r.scales.push_back(s.scale_of(slot));
      const CastCounts c = s.take_counts(slot);
      r.counts.insert(r.counts.end(), {c.total, c.saturated, c.flushed});
      r.peaks.push_back(c.peak);
    }
  }
  r.stream = nvfp4_sr_stream();
  return r;
}

struct Case {
  std::string name;
  Recipe recipe;
  DType dtype = kFloat32;  // the layers' weights and activations
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

Recipe recipe_of(RecipeKind kind) {
  Recipe r;
  r.kind = kind;
  return r;
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  for (const RecipeKind k :
       {RecipeKind::kCurrent, RecipeKind::kRowwise, RecipeKind::kRowwiseGwHp, RecipeKind::kBlock,
        RecipeKind::kMxfp8, RecipeKind::kMxfp4, RecipeKind::kNvfp4})
    cs.push_back({recipe_kind_name(k), recipe_of(k)});
  Recipe mxfp4_rht = recipe_of(RecipeKind::kMxfp4);
  mxfp4_rht.enable_rht = true;
  cs.push_back({"mxfp4_rht", mxfp4_rht});
  Recipe nvfp4_plain = recipe_of(RecipeKind::kNvfp4);
  nvfp4_plain.disable_rht = nvfp4_plain.disable_stochastic_rounding = true;
  nvfp4_plain.disable_2d_quantization = true;
  cs.push_back({"nvfp4_round_to_nearest", nvfp4_plain});
  // Delayed scaling with TransformerEngine's default history (1024 rows) and with one that
  // rolls over within the steps, under both formats; and with bf16 and fp16 weights, as the
  // transformer-engine and transformer-engine-float16 precisions train.
  const Recipe delayed = recipe_of(RecipeKind::kDelayed);
  cs.push_back({"delayed", delayed});
  Recipe delayed_short = delayed;
  delayed_short.amax_history_len = 4;
  cs.push_back({"delayed_history_4", delayed_short});
  Recipe delayed_e4m3 = delayed_short;
  delayed_e4m3.fp8_format = Format::kE4M3;
  delayed_e4m3.amax_compute_algo = AmaxComputeAlgo::kMostRecent;
  cs.push_back({"delayed_history_4_e4m3_most_recent", delayed_e4m3});
  cs.push_back({"delayed_bfloat16", delayed_short, kBFloat16});
  cs.push_back({"delayed_float16", delayed_short, kFloat16});
  return cs;
}

class Fp8Checkpoint : public ::testing::TestWithParam<Case> {};

TEST_P(Fp8Checkpoint, StepsEqualThoseWithoutCheckpointingBitForBit) {
  const Recipe& recipe = GetParam().recipe;
  recipe.validate();
  const TrainedRun plain = train(recipe, false, GetParam().dtype);
  const TrainedRun ckpt = train(recipe, true, GetParam().dtype);
  EXPECT_EQ(ckpt.losses, plain.losses);
  EXPECT_EQ(ckpt.grads, plain.grads);
  EXPECT_EQ(ckpt.weights, plain.weights);
  EXPECT_EQ(ckpt.histories, plain.histories);
  EXPECT_EQ(ckpt.scales, plain.scales);
  EXPECT_EQ(ckpt.counts, plain.counts);
  EXPECT_EQ(ckpt.peaks, plain.peaks);
  EXPECT_EQ(ckpt.stream, plain.stream);
  // The casts were counted (the comparison is not between two empty sets of statistics).
  EXPECT_GT(plain.counts.front(), 0);
}

INSTANTIATE_TEST_SUITE_P(Recipes, Fp8Checkpoint, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.name;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Fp8CheckpointDelayed, ReplaysInABackwardInsideAnFp8RegionUpdateEachLayerOnce) {
  // Two checkpointed layers whose backward runs inside an enabled region: each replay is a
  // region of its own, so each backward updates its layers' grad_output scales once, as
  // without checkpointing (joined to the backward's region, the second replay's layers would
  // join the group the first one ran already).
  Recipe recipe = recipe_of(RecipeKind::kDelayed);
  recipe.amax_history_len = 4;
  const auto run = [&](bool checkpointed) {
    manual_seed(3);
    std::vector<std::shared_ptr<Linear>> layers;
    for (int i = 0; i < 3; ++i)
      layers.push_back(std::make_shared<Linear>(kIn, kIn, true, kFloat32));
    for (int step = 0; step < kSteps; ++step) {
      Tensor loss;
      {
        const Fp8Autocast fp8_on(true, recipe);
        Tensor h = rnd({kRows, kIn}, kFloat32, 300 + static_cast<uint64_t>(step));
        for (int i = 0; i < 2; ++i)
          h = checkpointed ? nn::checkpoint(*layers[i], h) : (*layers[i])(h);
        const Tensor y = (*layers[2])(h);
        loss = sum(mul(y, y));
      }
      const Fp8Autocast backward_in_fp8(true, recipe);
      loss.backward();
    }
    std::vector<std::vector<uint32_t>> out;
    for (const auto& l : layers) {
      out.push_back(bits(l->fp8_state()->scale));
      out.push_back(bits(l->weight.grad()));
    }
    return out;
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(Fp8CheckpointRefusal, Nvfp4DrawsTheStreamInBackwardOnly) {
  // The stream the nvfp4 run above compares moved: its gradients were rounded stochastically.
  const TrainedRun r = train(recipe_of(RecipeKind::kNvfp4), true);
  EXPECT_GT(r.stream.offset, 0u);
}

TEST(Fp8CheckpointRefusal, Mxfp4StochasticRoundingIsRefusedWithTheReason) {
  Recipe r = recipe_of(RecipeKind::kMxfp4);
  r.enable_stochastic_rounding = true;
  auto lin = std::make_shared<Linear>(32, 32, true, kFloat32, 1);
  const Tensor x = rnd({16, 32}, kFloat32, 1).set_requires_grad(true);
  const Fp8Autocast fp8_on(true, r);
  expect_error([&] { nn::checkpoint(*lin, x); },
               {"under the 'mxfp4' recipe", "leave --fp8-enable-stochastic-rounding off"});
}

TEST(Fp8CheckpointRefusal, AReplayOutsideAnFp8RegionComputesInHighPrecisionAsItsForward) {
  // The first forward ran outside any FP8 region: so does the replay, even when backward runs
  // inside one.
  auto lin = std::make_shared<Linear>(32, 32, true, kFloat32, 1);
  const Tensor x = rnd({16, 32}, kFloat32, 1);
  const Tensor y = nn::checkpoint(*lin, x);
  {
    const Fp8Autocast fp8_on(true, recipe_of(RecipeKind::kCurrent));
    sum(y).backward();
  }
  const Tensor dw = lin->weight.grad();
  lin->zero_grad();
  sum((*lin)(x)).backward();
  EXPECT_EQ(bits(dw), bits(lin->weight.grad()));
}

}  // namespace
}  // namespace mantissa::fp8
