// CUDA graphs (mantissa/core/cuda_graph.h) and graphed training steps
// (mantissa/train/graphed_step.h): replays equal eager runs, the private pool keeps its blocks,
// what a graph cannot hold is refused with a clear error. The GPU tests skip without a GPU; the
// refusals without one run everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/core/cuda_graph.h"
#include "mantissa/core/generator.h"
#include "mantissa/models/gpt.h"
#include "mantissa/models/mlp.h"
#include "mantissa/ops/dropout.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/embedding.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/graphed_step.h"

namespace mantissa {
namespace {
using cuda_test::kGpu;
using cuda_test::randn_cpu;

std::vector<float> values(const Tensor& t) { return t.to(kCPU).to(kFloat32).to_vector<float>(); }

// The bit patterns of every parameter, in order.
std::vector<uint32_t> param_bits(const std::vector<Tensor>& params) {
  std::vector<uint32_t> bits;
  for (const Tensor& p : params) {
    for (float v : values(p)) {
      uint32_t b;
      std::memcpy(&b, &v, 4);
      bits.push_back(b);
    }
  }
  return bits;
}

// ---------------------------------------------------------------------------------------
// Without a GPU (every CI machine): the refusals
// ---------------------------------------------------------------------------------------

TEST(CudaGraphRefusals, CapturingWithoutAGpuSaysWhy) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present: the GPU tests below run instead";
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  cuda::CUDAGraph graph;
  try {
    graph.capture_begin();
    FAIL() << "capture_begin() without a GPU did not throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find(cuda::unavailable_reason()) != std::string::npos) << msg;
  }
  EXPECT_FALSE(graph.is_captured());
  try {
    graph.replay();
    FAIL() << "replay() of an empty graph did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no capture"), std::string::npos) << e.what();
  }
}

TEST(GraphedStepRefusals, ParametersOnTheCpuAndNoWarmupAreRefused) {
  Tensor w = randn_cpu({4, 3}, 1).requires_grad_(true);
  const auto loss_fn = [&](const std::vector<Tensor>& in) { return sum(mul(in[0], w)); };
  try {
    train::GraphedStep step(std::vector<Tensor>{w}, loss_fn);
    FAIL() << "a CPU parameter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs every parameter on one GPU"), std::string::npos)
        << e.what();
  }
  try {
    train::GraphedStep step(std::vector<Tensor>{w}, loss_fn, {.warmup_steps = 0});
    FAIL() << "warmup_steps 0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("warmup_steps must be >= 1"), std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------------------------------
// CUDAGraph
// ---------------------------------------------------------------------------------------

TEST(CudaGraph, ReplayRunsTheCapturedKernelsOnTheInputsOfTheMoment) {
  MANTISSA_REQUIRE_GPU();
  Tensor x = tensor_of(std::vector<double>{1, 2, 3, 4}, {4}, kFloat32).to(kGpu);
  Tensor y;
  cuda::CUDAGraph graph;
  graph.capture([&] { y = mul(add(x, 1.0), 2.0); });
  ASSERT_TRUE(graph.is_captured());
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  graph.replay();
  EXPECT_EQ(values(y), (std::vector<float>{4, 6, 8, 10}));
  x.copy_(tensor_of(std::vector<double>{-1, 0.5, 10, 100}, {4}, kFloat32));
  graph.replay();
  EXPECT_EQ(values(y), (std::vector<float>{0, 3, 22, 202}));
}

TEST(CudaGraph, BlocksFreedDuringTheCaptureAreNotHandedOutWhileTheGraphLives) {
  MANTISSA_REQUIRE_GPU();
  const int64_t n = 1 << 16;
  Tensor x = full({n}, 3.0, kFloat32, kGpu);
  Tensor y;
  const void* scratch = nullptr;
  cuda::CUDAGraph graph;
  graph.capture([&] {
    const Tensor t = add(x, 1.0);  // freed at the end of the capture, written by every replay
    scratch = t.device_ptr();
    y = mul(t, 2.0);
  });
  // An eager tensor of the same size must not get the scratch block: the replay would write it.
  Tensor z = full({n}, 7.0, kFloat32, kGpu);
  EXPECT_NE(z.device_ptr(), scratch);
  graph.replay();
  EXPECT_EQ(values(y)[n - 1], 8.0f);
  for (float v : values(z)) ASSERT_EQ(v, 7.0f);
  // Once the graph is gone its blocks serve everyone again.
  graph.reset();
  EXPECT_FALSE(graph.is_captured());
}

TEST(CudaGraph, AHostCopyInsideTheCaptureIsRefusedAndTheGpuStaysUsable) {
  MANTISSA_REQUIRE_GPU();
  const Tensor x = full({8}, 2.0, kFloat32, kGpu);
  cuda::CUDAGraph graph;
  try {
    graph.capture([&] { (void)sum(mul(x, 3.0)).item(); });
    FAIL() << "item() inside a capture was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be captured in a CUDA graph"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(graph.is_captured());
  EXPECT_FALSE(cuda::is_current_stream_capturing());
  EXPECT_EQ(sum(mul(x, 3.0)).item(), 48.0);  // eager work runs as before
}

TEST(CudaGraph, DropoutInsideTheCaptureIsRefused) {
  MANTISSA_REQUIRE_GPU();
  const Tensor x = full({64}, 1.0, kFloat32, kGpu);
  cuda::CUDAGraph graph;
  try {
    graph.capture([&] { (void)dropout(x, 0.5, /*training=*/true); });
    FAIL() << "dropout inside a capture was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dropout"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(cuda::is_current_stream_capturing());
}

TEST(CudaGraph, CrossEntropyAndEmbeddingCheckOnTheGpuWhatTheHostCannotRead) {
  MANTISSA_REQUIRE_GPU();
  // Inside a capture the targets are not read by the host: the mean's count comes from the GPU
  // (ignored targets left out), and a target or index out of range gives NaN, not a wild read.
  const Tensor logits = randn_cpu({6, 5}, 3).to(kGpu).requires_grad_(true);
  Tensor target = tensor_of(std::vector<double>{0, 4, -100, 2, -100, 1}, {6}, kInt64).to(kGpu);
  const Tensor eager = cross_entropy(logits, target);
  eager.backward();
  const std::vector<float> eager_grad = values(logits.grad());
  logits.reset_grad();
  Tensor loss;
  cuda::CUDAGraph graph;
  graph.capture([&] {
    loss = cross_entropy(logits, target);
    loss.backward();
  });
  graph.replay();
  EXPECT_EQ(values(loss), values(eager));  // the same division by 4, bit for bit
  EXPECT_EQ(values(logits.grad()), eager_grad);
  target.copy_(tensor_of(std::vector<double>{0, 4, -100, 5, -100, 1}, {6}, kInt64));
  graph.replay();
  EXPECT_TRUE(std::isnan(values(loss)[0]));

  const Tensor table = randn_cpu({4, 3}, 4).to(kGpu);
  Tensor idx = tensor_of(std::vector<double>{3, 0}, {2}, kInt64).to(kGpu);
  Tensor rows;
  cuda::CUDAGraph gather;
  gather.capture([&] { rows = embedding(table, idx); });
  idx.copy_(tensor_of(std::vector<double>{1, 9}, {2}, kInt64));
  gather.replay();
  const std::vector<float> got = values(rows), want = values(table);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(got[j], want[3 + j]);  // row 1
    EXPECT_TRUE(std::isnan(got[3 + j]));
  }
}

// ---------------------------------------------------------------------------------------
// GraphedStep
// ---------------------------------------------------------------------------------------

struct Batch {
  Tensor x, y;
};
std::vector<Batch> mlp_batches(int count, int64_t rows) {
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) {
    Generator gen(100 + i);
    out.push_back({randn({rows, 32}, kFloat32, &gen).to(kGpu),
                   randint(0, 10, {rows}, kInt64, &gen).to(kGpu)});
  }
  return out;
}

// Losses and final parameter bits of AdamW steps on an MLP, eager or through a GraphedStep.
struct TrainRun {
  std::vector<float> losses;
  std::vector<uint32_t> bits;
  int64_t replays = 0;
};
TrainRun train_mlp(const std::string& precision, bool graphed, const std::vector<Batch>& batches) {
  manual_seed(5);
  auto net = models::make_mlp(32, {64, 64}, 10, kFloat32);
  net->to(kGpu);
  optim::AdamW opt(net->parameters(), 1e-2);
  amp::GradScaler scaler;
  const bool fp16 = precision == "16-mixed";
  const auto loss_fn = [&](const std::vector<Tensor>& in) {
    return cross_entropy(net->forward(in[0]), in[1]);
  };
  std::optional<train::GraphedStep> step;
  if (graphed)
    step.emplace(net->parameters(), loss_fn, train::GraphedStepOptions{.warmup_steps = 2});
  TrainRun r;
  for (const Batch& b : batches) {
    opt.zero_grad();
    Tensor loss;
    {
      std::optional<amp::autocast> ac;
      if (precision != "32-true") ac.emplace(DeviceType::kCUDA, fp16 ? kFloat16 : kBFloat16);
      if (step) {
        loss = step->run({b.x, b.y}, fp16 ? &scaler : nullptr);
      } else {
        loss = loss_fn({b.x, b.y});
        (fp16 ? scaler.scale(loss) : loss).backward();
      }
    }
    if (fp16) {
      scaler.step(opt);
      scaler.update();
    } else {
      opt.step();
    }
    r.losses.push_back(static_cast<float>(loss.item()));
  }
  r.bits = param_bits(net->parameters());
  if (step) {
    r.replays = step->replays();
    EXPECT_TRUE(step->is_graphed()) << step->fallback_reason();
  }
  return r;
}

TEST(GraphedStep, MlpStepsEqualTheEagerStepsBitForBit) {
  MANTISSA_REQUIRE_GPU();
  // Three batches, seen three times each: the loss of a batch falls as it is learnt.
  std::vector<Batch> batches;
  for (int i = 0; i < 3; ++i)
    for (const Batch& b : mlp_batches(3, 48)) batches.push_back(b);
  for (const std::string precision : {"32-true", "16-mixed", "bf16-mixed"}) {
    SCOPED_TRACE(precision);
    const TrainRun eager = train_mlp(precision, false, batches);
    const TrainRun graphed = train_mlp(precision, true, batches);
    EXPECT_EQ(graphed.replays, 7);  // 2 warm-up steps, then the capture and a replay per step
    EXPECT_EQ(graphed.losses, eager.losses);
    EXPECT_TRUE(graphed.bits == eager.bits) << "the parameters differ after 9 steps";
    EXPECT_LT(eager.losses[8], eager.losses[2]);  // the third batch, learnt
  }
}

// A 32-16-10 MLP on the GPU and a GraphedStep over its cross-entropy, one warm-up step.
struct GraphedMlp {
  std::shared_ptr<nn::Sequential> net;
  std::unique_ptr<train::GraphedStep> step;
  explicit GraphedMlp(uint64_t seed) {
    manual_seed(seed);
    net = models::make_mlp(32, {16}, 10, kFloat32);
    net->to(kGpu);
    step = std::make_unique<train::GraphedStep>(
        net->parameters(),
        [n = net](const std::vector<Tensor>& in) {
          return cross_entropy(n->forward(in[0]), in[1]);
        },
        train::GraphedStepOptions{.warmup_steps = 1});
  }
};

TEST(GraphedStep, ABatchOfAnotherShapeRunsEagerlyAndTheGraphResumesAfter) {
  MANTISSA_REQUIRE_GPU();
  GraphedMlp m(6);
  auto& net = m.net;
  train::GraphedStep& step = *m.step;
  const std::vector<Batch> full_size = mlp_batches(3, 40), last = mlp_batches(1, 8);
  (void)step.run({full_size[0].x, full_size[0].y});  // warm-up
  (void)step.run({full_size[1].x, full_size[1].y});  // capture + replay
  ASSERT_TRUE(step.is_graphed()) << step.fallback_reason();
  const Tensor small_loss = step.run({last[0].x, last[0].y});
  EXPECT_EQ(step.eager_steps(), 2);
  // The eager batch's gradient, not the graph's buffers: compare with a plain backward.
  const std::vector<float> grad_small = values(net->parameters()[0].grad());
  net->zero_grad();
  cross_entropy(net->forward(last[0].x), last[0].y).backward();
  EXPECT_EQ(grad_small, values(net->parameters()[0].grad()));
  const Tensor loss = step.run({full_size[2].x, full_size[2].y});
  EXPECT_EQ(step.replays(), 2);
  EXPECT_TRUE(std::isfinite(loss.item()) && std::isfinite(small_loss.item()));
}

TEST(GraphedStep, GptFollowsTheEagerRunAndDropoutFallsBackWithTheReason) {
  MANTISSA_REQUIRE_GPU();
  const models::GPTConfig cfg{.context = 32, .layers = 2, .width = 64, .heads = 4};
  Generator gen(9);
  const Tensor tokens = randint(0, cfg.vocab, {4, cfg.context + 1}, kInt64, &gen).to(kGpu);
  const Tensor x = tokens.narrow(1, 0, cfg.context).contiguous();
  const Tensor y = tokens.narrow(1, 1, cfg.context).contiguous();
  auto train_gpt = [&](bool graphed, double dropout, std::string* reason) {
    manual_seed(3);
    models::GPTConfig c = cfg;
    c.dropout = dropout;
    models::GPT gpt(c);
    gpt.to(kGpu);
    optim::AdamW opt(gpt.parameters(), 1e-3);
    const auto loss_fn = [&](const std::vector<Tensor>& in) {
      return models::GPT::loss(gpt.forward(in[0]), in[1]);
    };
    std::optional<train::GraphedStep> step;
    if (graphed)
      step.emplace(gpt.parameters(), loss_fn, train::GraphedStepOptions{.warmup_steps = 2});
    std::vector<double> losses;
    for (int i = 0; i < 8; ++i) {
      opt.zero_grad();
      Tensor loss;
      {
        amp::autocast ac(DeviceType::kCUDA, kBFloat16);
        if (step) {
          loss = step->run({x, y});
        } else {
          loss = loss_fn({x, y});
          loss.backward();
        }
      }
      opt.step();
      losses.push_back(loss.item());
    }
    if (step && reason != nullptr) *reason = step->fallback_reason();
    if (step) EXPECT_EQ(step->is_graphed(), dropout == 0.0);
    return losses;
  };
  const std::vector<double> eager = train_gpt(false, 0.0, nullptr);
  const std::vector<double> graphed = train_gpt(true, 0.0, nullptr);
  ASSERT_EQ(graphed.size(), eager.size());
  // The embeddings' gradients are sums by atomics: equal up to their order.
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_NEAR(graphed[i], eager[i], 1e-4 * eager[i]);
  EXPECT_LT(graphed.back(), graphed.front());

  std::string reason;
  const std::vector<double> with_dropout = train_gpt(true, 0.1, &reason);
  EXPECT_NE(reason.find("dropout"), std::string::npos) << reason;
  for (double l : with_dropout) EXPECT_TRUE(std::isfinite(l));
}

TEST(GraphedStep, AParameterMovedAfterTheCaptureIsRefused) {
  MANTISSA_REQUIRE_GPU();
  GraphedMlp m(8);
  auto& net = m.net;
  train::GraphedStep& step = *m.step;
  const std::vector<Batch> batches = mlp_batches(2, 16);
  (void)step.run({batches[0].x, batches[0].y});
  (void)step.run({batches[1].x, batches[1].y});
  ASSERT_TRUE(step.is_graphed()) << step.fallback_reason();
  net->to(kCPU);
  net->to(kGpu);
  try {
    (void)step.run({batches[0].x, batches[0].y});
    FAIL() << "a moved parameter was not noticed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moved or replaced since the capture"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mantissa
