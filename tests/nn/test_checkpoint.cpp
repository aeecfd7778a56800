// Activation checkpointing (nn/checkpoint.h): gradients equal, bit for bit, to the unchecked
// run's under fp32 and autocast, with dropout from the default and from the layers' own
// generators, for frozen inputs, nested and sequential checkpoints; BatchNorm counts a batch
// once; the random streams go on as without checkpointing; the memory it saves; and the errors.
#include <gtest/gtest.h>

#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/allocator.h"
#include "mantissa/core/generator.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/batchnorm.h"
#include "mantissa/nn/checkpoint.h"
#include "mantissa/nn/dropout.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/nn/transformer.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using testing::expect_error;
using testing::rnd;

enum class Mode { kPlain, kCheckpoint };

// What one forward + backward leaves: the loss, the input's gradient, every parameter's
// gradient in named_parameters() order, and the next number of the default generator.
struct Outcome {
  std::vector<float> loss, input_grad;
  std::vector<std::vector<float>> param_grads;
  uint64_t next_random = 0;
};

std::vector<float> floats(const Tensor& t) {
  return t.defined() ? t.to(kFloat32).to_vector<float>() : std::vector<float>{};
}

void zero_grads(nn::Module& m) {
  for (const Tensor& p : m.parameters()) p.reset_grad();
}

// loss = sum(forward(x) * weights), with x requiring grad unless `frozen_input`.
Outcome run(nn::Module& m, Mode mode, bool autocast, bool frozen_input = false) {
  zero_grads(m);
  manual_seed(7);
  Tensor x = rnd({2, 8, 32}, kFloat32, 1);
  if (!frozen_input) x.set_requires_grad(true);
  const Tensor w = rnd({2, 8, 32}, kFloat32, 2);
  Tensor loss;
  {
    amp::autocast ac(DeviceType::kCPU, kBFloat16, autocast);
    const Tensor y = mode == Mode::kCheckpoint ? nn::checkpoint(m, x) : m.forward(x);
    loss = sum(mul(y.to(kFloat32), w));
  }
  loss.backward();
  Outcome o;
  o.loss = floats(loss);
  o.input_grad = floats(x.grad());
  for (const auto& [name, p] : m.named_parameters()) o.param_grads.push_back(floats(p.grad()));
  o.next_random = default_generator().next_u64();
  return o;
}

void expect_same(const Outcome& a, const Outcome& b) {
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.input_grad, b.input_grad);
  ASSERT_EQ(a.param_grads.size(), b.param_grads.size());
  for (size_t i = 0; i < a.param_grads.size(); ++i) {
    ASSERT_FALSE(a.param_grads[i].empty()) << "parameter " << i << " got no gradient";
    EXPECT_EQ(a.param_grads[i], b.param_grads[i]) << "parameter " << i;
  }
  EXPECT_EQ(a.next_random, b.next_random);
}

std::shared_ptr<nn::TransformerBlock> block(double dropout, Generator* gen = nullptr) {
  manual_seed(3);
  nn::TransformerBlockOptions o;
  o.embed_dim = 32;
  o.num_heads = 4;
  o.dropout = dropout;
  o.causal = true;
  o.gen = gen;
  return std::make_shared<nn::TransformerBlock>(o);
}

TEST(ActivationCheckpoint, TransformerBlockGradientsAreTheUncheckedRunsBitForBit) {
  auto b = block(0.0);
  const Outcome plain = run(*b, Mode::kPlain, false);
  const Outcome ckpt = run(*b, Mode::kCheckpoint, false);
  expect_same(plain, ckpt);
  EXPECT_FALSE(plain.input_grad.empty());
}

TEST(ActivationCheckpoint, AutocastIsReplayedWithTheForwardsDtype) {
  // The forward ran under bf16 autocast, backward outside it: the replay must run the block's
  // matmuls in bf16 again, or its gradients would differ from the unchecked run's.
  auto b = block(0.0);
  const Outcome plain = run(*b, Mode::kPlain, true);
  const Outcome ckpt = run(*b, Mode::kCheckpoint, true);
  expect_same(plain, ckpt);
  const Outcome fp32 = run(*b, Mode::kPlain, false);
  EXPECT_NE(plain.input_grad, fp32.input_grad);  // autocast did change the numbers
}

TEST(ActivationCheckpoint, DropoutMasksFromTheDefaultGeneratorAreReplayed) {
  auto b = block(0.25);
  const Outcome plain = run(*b, Mode::kPlain, true);
  const Outcome ckpt = run(*b, Mode::kCheckpoint, true);
  expect_same(plain, ckpt);
  // Without the generator's state restored the replay draws other masks.
  zero_grads(*b);
  manual_seed(7);
  Tensor x = rnd({2, 8, 32}, kFloat32, 1).set_requires_grad(true);
  nn::CheckpointOptions no_rng;
  no_rng.preserve_rng_state = false;
  for (const Tensor& p : b->parameters()) no_rng.parameters.push_back(p);
  const Tensor y =
      nn::checkpoint([&](const std::vector<Tensor>& in) { return b->forward(in[0]); }, {x}, no_rng);
  sum(mul(y, rnd({2, 8, 32}, kFloat32, 2))).backward();
  EXPECT_NE(floats(x.grad()), plain.input_grad);
}

TEST(ActivationCheckpoint, DropoutMasksFromTheLayersOwnGeneratorAreReplayed) {
  Generator gen(11);
  auto b = block(0.25, &gen);
  gen.manual_seed(11);
  const Outcome plain = run(*b, Mode::kPlain, false);
  const uint64_t plain_next = gen.next_u64();
  gen.manual_seed(11);
  const Outcome ckpt = run(*b, Mode::kCheckpoint, false);
  expect_same(plain, ckpt);
  EXPECT_EQ(gen.next_u64(), plain_next);
}

TEST(ActivationCheckpoint, AFrozenInputStillTrainsTheParametersInside) {
  // LoRA behind a frozen embedding: no input requires grad, the block's parameters do.
  auto b = block(0.0);
  const Outcome plain = run(*b, Mode::kPlain, false, /*frozen_input=*/true);
  const Outcome ckpt = run(*b, Mode::kCheckpoint, false, /*frozen_input=*/true);
  expect_same(plain, ckpt);
  EXPECT_TRUE(ckpt.input_grad.empty());
}

TEST(ActivationCheckpoint, NestedCheckpointsGiveTheSameGradients) {
  auto inner = block(0.0);
  auto outer = std::make_shared<nn::Sequential>();
  outer->push_back(inner);
  outer->push_back(std::make_shared<nn::LayerNorm>(std::vector<int64_t>{32}));
  class Nested : public nn::Module {
   public:
    explicit Nested(std::shared_ptr<nn::Sequential> s) : Module("Nested") {
      seq_ = register_module("seq", std::move(s));
    }
    Tensor forward(const Tensor& x) override {
      return nn::checkpoint(*(*seq_)[1], nn::checkpoint(*(*seq_)[0], x));
    }

   private:
    std::shared_ptr<nn::Sequential> seq_;
  };
  Nested nested(outer);
  const Outcome plain = run(*outer, Mode::kPlain, true);
  const Outcome ckpt = run(nested, Mode::kCheckpoint, true);
  expect_same(plain, ckpt);
}

TEST(ActivationCheckpoint, SequentialSegmentsGiveTheSameGradients) {
  manual_seed(5);
  auto seq = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 5; ++i) {
    seq->push_back(std::make_shared<nn::Linear>(32, 32));
    seq->push_back(std::make_shared<nn::GELU>());
  }
  class Segments : public nn::Module {
   public:
    Segments(std::shared_ptr<nn::Sequential> s, int64_t n) : Module("Segments"), n_(n) {
      s_ = register_module("seq", std::move(s));
    }
    Tensor forward(const Tensor& x) override { return nn::checkpoint_sequential(*s_, n_, x); }

   private:
    std::shared_ptr<nn::Sequential> s_;
    int64_t n_;
  };
  const Outcome plain = run(*seq, Mode::kPlain, true);
  for (int64_t segments : {1, 3, 4, 10}) {
    Segments seg(seq, segments);
    expect_same(plain, run(seg, Mode::kPlain, true));
  }
  Segments zero(seq, 0), eleven(seq, 11);
  const Tensor x = rnd({2, 32}, kFloat32, 1);
  expect_error([&] { zero.forward(x); },
               "segments must be between 1 and the number of modules (10), got 0");
  expect_error([&] { eleven.forward(x); },
               "segments must be between 1 and the number of modules (10), got 11");
}

TEST(ActivationCheckpoint, BatchNormCountsTheBatchOnceInItsRunningStatistics) {
  auto run_bn = [](bool checkpointed) {
    manual_seed(1);
    auto bn = std::make_shared<nn::BatchNorm2d>(3);
    Tensor x = rnd({4, 3, 5, 5}, kFloat32, 4).set_requires_grad(true);
    const Tensor y = checkpointed ? nn::checkpoint(*bn, x) : bn->forward(x);
    sum(mul(y, rnd({4, 3, 5, 5}, kFloat32, 5))).backward();
    return std::vector<std::vector<float>>{floats(bn->running_mean), floats(bn->running_var),
                                           floats(bn->num_batches_tracked), floats(x.grad()),
                                           floats(bn->weight.grad())};
  };
  const auto plain = run_bn(false);
  const auto ckpt = run_bn(true);
  EXPECT_EQ(plain, ckpt);
  EXPECT_EQ(ckpt[2], std::vector<float>{1.0f});
}

TEST(ActivationCheckpoint, WithoutGradModeTheFunctionSimplyRuns) {
  auto b = block(0.25);
  const Tensor x = rnd({2, 8, 32}, kFloat32, 1).set_requires_grad(true);
  manual_seed(7);
  Tensor plain;
  {
    const NoGradGuard no_grad;
    plain = b->forward(x);
  }
  manual_seed(7);
  Tensor ckpt;
  {
    const NoGradGuard no_grad;
    ckpt = nn::checkpoint(*b, x);
  }
  EXPECT_EQ(floats(plain), floats(ckpt));
  EXPECT_FALSE(ckpt.requires_grad());
  // Nothing to train at all: a plain function of a frozen input records no graph either.
  const Tensor frozen = rnd({3}, kFloat32, 1);
  const Tensor y =
      nn::checkpoint([](const std::vector<Tensor>& in) { return mul(in[0], 2.0); }, {frozen});
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(floats(y), floats(mul(frozen, 2.0)));
}

TEST(ActivationCheckpoint, AnIdentityFunctionPassesTheGradientThrough) {
  Tensor x = rnd({4}, kFloat32, 1).set_requires_grad(true);
  const Tensor y = nn::checkpoint([](const std::vector<Tensor>& in) { return in[0]; }, {x});
  sum(mul(y, 3.0)).backward();
  EXPECT_EQ(floats(x.grad()), std::vector<float>(4, 3.0f));
}

TEST(ActivationCheckpoint, HoldsOneInputPerBlockInsteadOfEveryActivation) {
  // Eight blocks of width 64 over 16 x 32 tokens: between forward and backward the unchecked
  // stack holds every block's activations, the checkpointed one each block's input.
  manual_seed(2);
  nn::Sequential stack;
  for (int i = 0; i < 8; ++i) {
    nn::TransformerBlockOptions o;
    o.embed_dim = 64;
    o.num_heads = 4;
    stack.push_back(std::make_shared<nn::TransformerBlock>(o));
  }
  auto held_after_forward = [&](bool checkpointed) {
    const Tensor x = rnd({16, 32, 64}, kFloat32, 1).set_requires_grad(true);
    const int64_t before = memory_allocated();
    Tensor y = x;
    for (size_t i = 0; i < stack.size(); ++i)
      y = checkpointed ? nn::checkpoint(*stack[i], y) : stack[i]->forward(y);
    const int64_t held = memory_allocated() - before;
    sum(y).backward();
    zero_grads(stack);
    return held;
  };
  const int64_t plain = held_after_forward(false);
  const int64_t ckpt = held_after_forward(true);
  const int64_t one_activation = 16 * 32 * 64 * 4;
  // Each block's input plus the output, nothing else.
  EXPECT_EQ(ckpt, 8 * one_activation);
  EXPECT_GT(plain, 8 * ckpt);
}

TEST(ActivationCheckpoint, AnInputWrittenInPlaceBeforeBackwardIsRefused) {
  auto lin = std::make_shared<nn::Linear>(4, 4);
  Tensor x = rnd({2, 4}, kFloat32, 1).set_requires_grad(true);
  Tensor h = mul(x, 1.0);
  const Tensor y = nn::checkpoint(*lin, h);
  {
    const NoGradGuard no_grad;
    h.fill_(0.0);
  }
  expect_error([&] { sum(y).backward(); }, "CheckpointBackward");
}

TEST(ActivationCheckpoint, AnEmptyFunctionOrNoOutputIsAnError) {
  const Tensor x = rnd({3}, kFloat32, 1).set_requires_grad(true);
  expect_error([&] { nn::checkpoint(nn::CheckpointFunction(), {x}); },
               "the function to checkpoint is empty");
  expect_error([&] { nn::checkpoint([](const std::vector<Tensor>&) { return Tensor(); }, {x}); },
               "the checkpointed function returned no tensor");
}

TEST(ActivationCheckpoint, InCheckpointIsTrueInTheForwardAndTheReplay) {
  Tensor x = rnd({3}, kFloat32, 1).set_requires_grad(true);
  std::vector<bool> seen;
  EXPECT_FALSE(nn::in_checkpoint());
  const Tensor y = nn::checkpoint(
      [&](const std::vector<Tensor>& in) {
        seen.push_back(nn::in_checkpoint());
        return mul(in[0], in[0]);
      },
      {x});
  sum(y).backward();
  EXPECT_EQ(seen, (std::vector<bool>{true, true}));
  EXPECT_FALSE(nn::in_checkpoint());
  EXPECT_EQ(floats(x.grad()), floats(mul(x.detach(), 2.0)));
}

}  // namespace
}  // namespace mantissa
