// The CNN's and ViT's ops on a GPU against the CPU: conv2d (cuDNN) with stride, padding,
// dilation and groups (depthwise included), non-contiguous operands, full fp32 under "highest"
// and autocast, max/avg/adaptive pooling, batch_norm in training and eval mode
// (with its running statistics), cat, and a few SGD steps of the reference CNN and a small ViT
// from the same weights on both devices.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "../train/tiny_module.h"
#include "cuda_op_check.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/models/cnn.h"
#include "mantissa/models/image_classifier.h"
#include "mantissa/models/vit.h"
#include "mantissa/ops/batch_norm.h"
#include "mantissa/ops/conv.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/matmul_precision.h"
#include "mantissa/ops/pool.h"
#include "mantissa/ops/shape_ops.h"
#include "mantissa/optim/sgd.h"
#include "mantissa/train/trainer.h"

namespace mantissa {
namespace {
using cuda_test::check_op;
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::rel_error;
using cuda_test::tol_of;
using V = std::vector<Tensor>;

// Looser than one rounding: the GPU rounds the convolution before adding the bias, and sums in
// another order than the CPU.
double conv_tol(DType dt) {
  if (dt == kBFloat16) return 5e-2;
  if (dt == kFloat16) return 1e-2;
  if (dt == kFloat64) return 1e-10;
  return 1e-4;
}

struct ConvCase {
  std::string name;
  Shape x, w;
  Size2 stride, padding, dilation;
  bool bias;
  int64_t groups = 1;
  bool transposed = false;  // x and the output as transposed (non-contiguous) views
};

// conv2d on the CPU and the GPU from the same inputs: the output and the gradients of x, w and
// (when there is one) the bias.
void check_conv(const ConvCase& c, DType dt) {
  const Tensor x = randn_cpu(c.x, 1).to(dt);
  const Tensor w = randn_cpu(c.w, 2, 0.3).to(dt);
  const Tensor b = randn_cpu({c.w[0]}, 3).to(dt);
  const std::string what = std::string(dt.name()) + " " + c.name;
  const ConvCase cc = c;
  auto f = [cc](const V& v) {
    // transposed: x [N, C, W, H] read through .transpose(2, 3), and the output handed back
    // transposed, so its gradient reaches the convolution as a transposed view too.
    const Tensor x = cc.transposed ? v[0].transpose(2, 3) : v[0];
    const Tensor y =
        conv2d(x, v[1], cc.bias ? v[2] : Tensor(), cc.stride, cc.padding, cc.dilation, cc.groups);
    return cc.transposed ? y.transpose(2, 3) : y;
  };
  const Tensor xin = c.transposed ? x.transpose(2, 3).contiguous() : x;
  if (c.bias) {
    check_op(what, {xin, w, b}, f, conv_tol(dt));
  } else {
    check_op(what, {xin, w}, f, conv_tol(dt));
  }
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {"3x3 pad 1", {3, 5, 11, 9}, {4, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1}, true},
      {"3x3 stride 2 pad 1", {3, 5, 11, 9}, {4, 5, 3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
      {"dilated, uneven", {3, 5, 11, 9}, {6, 5, 3, 3}, {2, 1}, {0, 2}, {2, 1}, false},
      {"2x3 stride 3 (unread inputs)", {2, 3, 10, 11}, {4, 3, 2, 3}, {3, 3}, {0, 0}, {1, 1}, true},
      {"1x1", {3, 7, 5, 4}, {2, 7, 1, 1}, {1, 1}, {0, 0}, {1, 1}, true},
      {"patches 7x7 stride 7", {2, 1, 28, 28}, {8, 1, 7, 7}, {7, 7}, {0, 0}, {1, 1}, true},
      {"groups 2, stride 2, pad, dilation 2, odd",
       {3, 6, 13, 11},
       {8, 3, 3, 3},
       {2, 2},
       {2, 1},
       {2, 2},
       true,
       2},
      {"groups 3, 1x1", {2, 9, 5, 7}, {6, 3, 1, 1}, {1, 1}, {0, 0}, {1, 1}, true, 3},
      {"depthwise 3x3 pad 1", {2, 6, 9, 7}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, true, 6},
      {"depthwise x2, stride 2, dilation 2",
       {2, 4, 12, 11},
       {8, 1, 3, 3},
       {2, 2},
       {2, 2},
       {2, 2},
       false,
       4},
      {"non-contiguous x and gradient",
       {2, 4, 9, 12},
       {6, 4, 3, 3},
       {2, 1},
       {1, 1},
       {1, 2},
       true,
       1,
       true},
      {"non-contiguous, groups 2",
       {2, 4, 9, 12},
       {6, 2, 3, 3},
       {1, 2},
       {1, 0},
       {2, 1},
       true,
       2,
       true},
  };
  return cases;
}

TEST(CudaConv2d, ForwardAndGradientsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16})
    for (const ConvCase& c : conv_cases()) check_conv(c, dt);
}

// Grouped convolutions (refused on a GPU before cuDNN) give the CPU's values: each group's
// output channels read only their own input channels.
TEST(CudaConv2d, GroupedAndDepthwiseMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  const Tensor x = randn_cpu({2, 4, 7, 6}, 4);
  const Tensor w = randn_cpu({4, 2, 3, 3}, 5);
  const Tensor y = conv2d(x.to(kGpu), w.to(kGpu), Tensor(), {1, 1}, {1, 1}, {1, 1}, 2);
  EXPECT_EQ(y.shape(), (Shape{2, 4, 7, 6}));
  EXPECT_LE(rel_error(y, conv2d(x, w, Tensor(), {1, 1}, {1, 1}, {1, 1}, 2)), 1e-5);
  // Group 0's outputs (channels 0, 1) do not move when group 1's inputs (channels 2, 3) do.
  const Tensor x2 = cat({x.narrow(1, 0, 2), mul(x.narrow(1, 2, 2), 3.0)}, 1);
  const Tensor y2 = conv2d(x2.to(kGpu), w.to(kGpu), Tensor(), {1, 1}, {1, 1}, {1, 1}, 2);
  EXPECT_LE(rel_error(y2.narrow(1, 0, 2), y.narrow(1, 0, 2)), 1e-6);
  EXPECT_GT(rel_error(y2.narrow(1, 2, 2), y.narrow(1, 2, 2)), 0.1);
  // Depthwise: groups = C.
  const Tensor wd = randn_cpu({4, 1, 3, 3}, 6);
  EXPECT_LE(rel_error(conv2d(x.to(kGpu), wd.to(kGpu), Tensor(), {2, 2}, {1, 1}, {1, 1}, 4),
                      conv2d(x, wd, Tensor(), {2, 2}, {1, 1}, {1, 1}, 4)),
            1e-5);
}

// x rounded as TF32 tensor cores read it: 10 explicit mantissa bits, to nearest even.
Tensor round_tf32(const Tensor& t) {
  std::vector<float> v = t.to(kCPU).to(kFloat32).to_vector<float>();
  for (float& f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits = (bits + 0xFFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
    std::memcpy(&f, &bits, 4);
  }
  return tensor_of(std::vector<double>(v.begin(), v.end()), t.shape(), kFloat64);
}

// The full-fp32 case: sizes where TF32 is visible. Terms per output (C*KH*KW = 288), per input
// gradient (OC*KH*KW = 432) and per weight gradient (N*OH*OW = 572): each at least 256, where
// TF32's rounding of the operands (10 mantissa bits) is far above fp32's error.
struct Fp32Case {
  Shape xs{4, 32, 13, 11}, ws{48, 32, 3, 3}, ys{4, 48, 13, 11};
  Tensor x = randn_cpu(xs, 11), w = randn_cpu(ws, 12, 0.3);
  Tensor b = randn_cpu({ws[0]}, 13), r = randn_cpu(ys, 14);
  struct Result {
    Tensor y, gx, gw, gb;
  };
  // conv2d (stride 1, padding 1) of leaves made from x, w, b, and its gradients for the upstream
  // gradient r.
  static Result run(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
    Tensor xl = x.detach().clone(), wl = w.detach().clone(), bl = b.detach().clone();
    xl.requires_grad_(true);
    wl.requires_grad_(true);
    bl.requires_grad_(true);
    const Tensor y = conv2d(xl, wl, bl, {1, 1}, {1, 1}, {1, 1});
    sum(mul(y, r)).backward();
    return Result{y.detach(), xl.grad(), wl.grad(), bl.grad()};
  }
  // The exact result (float64 on the CPU) of the fp32 values.
  Result exact() const {
    return run(x.to(kFloat64), w.to(kFloat64), b.to(kFloat64), r.to(kFloat64));
  }
  Result on(const Device& d) const { return run(x.to(d), w.to(d), b.to(d), r.to(d)); }
};

// Without a GPU: the sizes make TF32 visible (its rounding of the operands misses the exact
// result by more than 1e-4), while fp32 (the CPU's, under "highest") stays within 1e-5: the GPU
// test below would fail if the GPU convolution used TF32 under "highest".
TEST(ConvFullFp32, TheGpuTestsSizesSeparateTf32FromFp32) {
  const Fp32Case c;
  ASSERT_GE(c.xs[1] * c.ws[2] * c.ws[3], 256);
  ASSERT_GE(c.ws[0] * c.ws[2] * c.ws[3], 256);
  ASSERT_GE(c.xs[0] * c.ys[2] * c.ys[3], 256);
  const Fp32Case::Result exact = c.exact();
  const Fp32Case::Result tf32_like =
      Fp32Case::run(round_tf32(c.x), round_tf32(c.w), c.b.to(kFloat64), round_tf32(c.r));
  EXPECT_GT(rel_error(tf32_like.y, exact.y), 1e-4) << "forward";
  EXPECT_GT(rel_error(tf32_like.gx, exact.gx), 1e-4) << "input gradient";
  EXPECT_GT(rel_error(tf32_like.gw, exact.gw), 1e-4) << "weight gradient";
  Float32MatmulPrecisionGuard highest(Float32MatmulPrecision::kHighest);
  const Fp32Case::Result cpu = c.on(kCPU);
  EXPECT_LE(rel_error(cpu.y, exact.y), 1e-5) << "forward";
  EXPECT_LE(rel_error(cpu.gx, exact.gx), 1e-5) << "input gradient";
  EXPECT_LE(rel_error(cpu.gw, exact.gw), 1e-5) << "weight gradient";
  EXPECT_LE(rel_error(cpu.gb, exact.gb), 1e-5) << "bias gradient";
}

// Under float32_matmul_precision "highest" the GPU convolution is full fp32 (cuDNN restricted to
// FMA kernels): within 1e-5 of the exact result, which TF32 would miss (the test above). Under
// "high" TF32 is allowed.
TEST(CudaConv2d, Float32IsFullPrecisionUnderHighest) {
  MANTISSA_REQUIRE_GPU();
  const Fp32Case c;
  const Fp32Case::Result exact = c.exact();
  {
    Float32MatmulPrecisionGuard highest(Float32MatmulPrecision::kHighest);
    const Fp32Case::Result gpu = c.on(kGpu);
    ASSERT_TRUE(gpu.y.is_cuda());
    EXPECT_EQ(gpu.y.dtype(), kFloat32);
    EXPECT_LE(rel_error(gpu.y, exact.y), 1e-5) << "forward";
    EXPECT_LE(rel_error(gpu.gx, exact.gx), 1e-5) << "input gradient";
    EXPECT_LE(rel_error(gpu.gw, exact.gw), 1e-5) << "weight gradient";
    EXPECT_LE(rel_error(gpu.gb, exact.gb), 1e-5) << "bias gradient";
    // A second call (the cached algorithm) gives the same values.
    const Fp32Case::Result again = c.on(kGpu);
    EXPECT_LE(rel_error(again.y, gpu.y), 0.0);
  }
  {
    // TF32 allowed: at most TF32's error (whether cuDNN takes tensor cores is its choice).
    Float32MatmulPrecisionGuard high(Float32MatmulPrecision::kHigh);
    const Fp32Case::Result gpu = c.on(kGpu);
    EXPECT_LE(rel_error(gpu.y, exact.y), 5e-3) << "forward";
    EXPECT_LE(rel_error(gpu.gx, exact.gx), 5e-3) << "input gradient";
    EXPECT_LE(rel_error(gpu.gw, exact.gw), 5e-3) << "weight gradient";
  }
}

// Under CUDA autocast conv2d runs in the autocast dtype on the GPU (float16 by default, bfloat16
// when asked), and the float32 leaves get float32 gradients.
TEST(CudaConv2d, AutocastRunsInTheHalfDtype) {
  MANTISSA_REQUIRE_GPU();
  const Tensor x = randn_cpu({2, 6, 9, 8}, 21), w = randn_cpu({8, 3, 3, 3}, 22, 0.3);
  const Tensor b = randn_cpu({8}, 23);
  const Tensor ref = conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 2);
  std::vector<std::pair<std::optional<DType>, DType>> modes = {{std::nullopt, kFloat16},
                                                               {kFloat16, kFloat16}};
  if (cuda::is_bf16_supported()) modes.emplace_back(kBFloat16, kBFloat16);
  for (const auto& [asked, expected] : modes) {
    SCOPED_TRACE(expected.name());
    Tensor xg = x.to(kGpu), wg = w.to(kGpu), bg = b.to(kGpu);
    xg.requires_grad_(true);
    wg.requires_grad_(true);
    bg.requires_grad_(true);
    Tensor y;
    {
      amp::autocast ac(DeviceType::kCUDA, asked);
      y = conv2d(xg, wg, bg, {1, 1}, {1, 1}, {1, 1}, 2);
    }
    ASSERT_TRUE(y.is_cuda());
    EXPECT_EQ(y.dtype(), expected);
    EXPECT_LE(rel_error(y, ref), expected == kBFloat16 ? 5e-2 : 1e-2);
    sum(y).backward();
    for (const Tensor* t : {&xg, &wg, &bg}) {
      ASSERT_TRUE(t->grad().defined());
      EXPECT_TRUE(t->grad().is_cuda());
      EXPECT_EQ(t->grad().dtype(), kFloat32);
    }
  }
}

TEST(CudaPool, MaxAverageAndAdaptiveMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double tol = 2 * tol_of(dt);
    const Tensor x = randn_cpu({3, 5, 11, 9}, 11).to(dt);
    const Tensor even = randn_cpu({3, 5, 12, 8}, 12).to(dt);
    const std::string n = std::string(dt.name()) + " ";
    check_op(
        n + "max 2x2", {even},
        [](const V& v) {
          return max_pool2d(v[0], {2, 2});
        },
        0, true, tol);
    check_op(
        n + "max 2x2 odd", {x},
        [](const V& v) {
          return max_pool2d(v[0], {2, 2});
        },
        0, true, tol);
    check_op(
        n + "max 3x3 s2 p1", {x},
        [](const V& v) {
          return max_pool2d(v[0], {3, 3}, {2, 2}, {1, 1});
        },
        0, true, tol);
    check_op(
        n + "max 2x2 s1 (overlapping)", {x},
        [](const V& v) {
          return max_pool2d(v[0], {2, 2}, {1, 1});
        },
        0, true, tol);
    check_op(
        n + "max dilated", {x},
        [](const V& v) {
          return max_pool2d(v[0], {3, 2}, {2, 1}, {1, 1}, {2, 3});
        },
        0, true, tol);
    check_op(
        n + "avg 2x2", {even},
        [](const V& v) {
          return avg_pool2d(v[0], {2, 2});
        },
        tol);
    check_op(
        n + "avg 3x3 s2 p1", {x},
        [](const V& v) {
          return avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1}, true);
        },
        tol);
    check_op(
        n + "avg 3x3 s2 p1 no pad count", {x},
        [](const V& v) {
          return avg_pool2d(v[0], {3, 3}, {2, 2}, {1, 1}, false);
        },
        tol);
    check_op(
        n + "avg 3x2 s1x2 p1", {x},
        [](const V& v) {
          return avg_pool2d(v[0], {3, 2}, {1, 2}, {1, 1}, false);
        },
        tol);
    for (Size2 out : {Size2{1, 1}, Size2{3, 2}, Size2{7, 6}, Size2{11, 9}}) {
      check_op(
          n + "adaptive " + std::to_string(out[0]) + "x" + std::to_string(out[1]), {x},
          [out](const V& v) { return adaptive_avg_pool2d(v[0], out); }, tol);
    }
  }
}

// batch_norm with fresh running statistics on the input's device (the op updates them).
Tensor bn_train(const V& v, bool affine) {
  const int64_t c = v[0].size(1);
  const Tensor rm = zeros({c}, kFloat32, v[0].device());
  const Tensor rv = ones({c}, kFloat32, v[0].device());
  return batch_norm(v[0], rm, rv, affine ? v[1] : Tensor(), affine ? v[2] : Tensor(), true, 0.1,
                    1e-5);
}

TEST(CudaBatchNorm, TrainingAndEvalMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double tol = dt == kFloat32 ? 1e-4 : 2 * tol_of(dt);
    const std::string n = std::string(dt.name()) + " ";
    const Tensor x = add(mul(randn_cpu({3, 5, 11, 9}, 21), 2.0), 3.0).to(dt);
    const Tensor w = randn_cpu({5}, 22).to(dt);
    const Tensor b = randn_cpu({5}, 23).to(dt);
    check_op(
        n + "training affine", {x, w, b}, [](const V& v) { return bn_train(v, true); }, tol, true,
        4 * tol);
    check_op(
        n + "training plain", {x}, [](const V& v) { return bn_train(v, false); }, tol, true,
        4 * tol);
    check_op(
        n + "training 2-D", {randn_cpu({7, 5}, 24).to(dt), w, b},
        [](const V& v) { return bn_train(v, true); }, tol, true, 4 * tol);
    check_op(
        n + "eval", {x, w, b},
        [](const V& v) {
          const Tensor rm = randn_cpu({5}, 25).to(v[0].device());
          const Tensor rv = add(abs(randn_cpu({5}, 26)), 0.5).to(v[0].device());
          return batch_norm(v[0], rm, rv, v[1], v[2], false, 0.1, 1e-5);
        },
        tol, true, 4 * tol);
  }
}

TEST(CudaBatchNorm, RunningStatisticsFollowTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    Tensor rm[2], rv[2];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d == 0 ? Device(kCPU) : kGpu;
      rm[d] = zeros({5}, kFloat32, dev);
      rv[d] = ones({5}, kFloat32, dev);
      for (uint32_t step = 0; step < 2; ++step) {
        const Tensor x = add(mul(randn_cpu({4, 5, 7, 3}, 30 + step), 1.5), 0.7).to(dt).to(dev);
        (void)batch_norm(x, rm[d], rv[d], Tensor(), Tensor(), true, 0.1, 1e-5);
      }
    }
    EXPECT_TRUE(rm[1].is_cuda());
    EXPECT_LE(rel_error(rm[1], rm[0]), 1e-5);
    EXPECT_LE(rel_error(rv[1], rv[0]), 1e-5);
  }
}

TEST(CudaCat, StaysOnTheGpu) {
  MANTISSA_REQUIRE_GPU();
  check_op(
      "cat dim 1", {randn_cpu({3, 1, 6}, 40), randn_cpu({3, 4, 6}, 41)},
      [](const V& v) {
        return cat({v[0], v[1]}, 1);
      },
      0);
  check_op(
      "expanded class token", {randn_cpu({1, 1, 6}, 42), randn_cpu({3, 4, 6}, 43)},
      [](const V& v) {
        return cat({v[0].expand({3, 1, 6}), v[1]}, 1);
      },
      0, true, 1e-6);
  EXPECT_THROW((void)cat({randn_cpu({2, 3}, 44), randn_cpu({2, 3}, 45).to(kGpu)}, 0), Error);
}

// A few SGD steps of `make()`'s model on the CPU and on the GPU from the same weights and
// batches; returns the largest relative gap of the losses and of the eval-mode logits after.
double train_gap(const std::function<std::shared_ptr<nn::Module>()>& make, int steps) {
  std::vector<double> losses[2];
  Tensor eval_logits[2];
  for (int d = 0; d < 2; ++d) {
    const Device dev = d == 0 ? Device(kCPU) : kGpu;
    manual_seed(5);
    std::shared_ptr<nn::Module> net = make();
    net->to(dev);
    optim::SGD opt(net->parameters(), 0.05, /*momentum=*/0.9);
    for (int s = 0; s < steps; ++s) {
      const Tensor x = randn_cpu({12, 784}, 100 + s).to(dev);
      std::vector<int64_t> ids(12);
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 7 + s) % 10);
      const Tensor y = tensor(ids, {12}).to(dev);
      Tensor loss = cross_entropy(net->forward(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      losses[d].push_back(loss.item());
    }
    net->eval();
    NoGradGuard no_grad;
    eval_logits[d] = net->forward(randn_cpu({5, 784}, 999).to(dev)).cpu();
  }
  double gap = 0;
  for (size_t i = 0; i < losses[0].size(); ++i) {
    EXPECT_TRUE(std::isfinite(losses[1][i]));
    gap = std::max(gap, std::abs(losses[1][i] - losses[0][i]) / std::abs(losses[0][i]));
  }
  return std::max(gap, rel_error(eval_logits[1], eval_logits[0]));
}

TEST(CudaModels, CnnTrainsAsOnTheCpu) {
  MANTISSA_REQUIRE_GPU();
  EXPECT_LT(train_gap([] { return models::make_cnn(); }, 5), 1e-3);
}

TEST(CudaModels, VitTrainsAsOnTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (const char* pool : {"cls", "mean"}) {
    SCOPED_TRACE(pool);
    EXPECT_LT(train_gap(
                  [pool] {
                    return std::make_shared<models::ViT>(models::ViTConfig{
                        .patch = 7, .width = 32, .depth = 2, .heads = 4, .pool = pool});
                  },
                  5),
              1e-3);
  }
}

// The Trainer with the image classifier (accuracy counting, validation) on `accelerator`: the
// step losses and the last validation accuracy of 2 epochs on random 28x28 images.
struct ClassifierRun {
  std::vector<double> losses;
  double val_acc = 0;
  Device device;
};

ClassifierRun fit_classifier(const std::string& accelerator,
                             const std::function<std::shared_ptr<nn::Module>()>& make) {
  train::TrainerOptions o = train::testing::quiet_options("32-true");
  o.accelerator = accelerator;
  o.seed = 3;
  o.max_epochs = 2;
  train::Trainer trainer(o);
  manual_seed(3);
  models::TrainMetrics metrics;
  models::ImageClassifier module(
      make(), optim::OptimizerChoice{.name = "sgd", .lr = 0.05, .weight_decay = 0}, &metrics,
      nullptr, /*quiet=*/true, 0, "constant");
  Generator gen(9);
  auto train_set = std::make_shared<data::TensorDataset>(randn({64, 784}, kFloat32, &gen),
                                                         randint(0, 10, {64}, kInt64, &gen));
  auto val_set = std::make_shared<data::TensorDataset>(randn({32, 784}, kFloat32, &gen),
                                                       randint(0, 10, {32}, kInt64, &gen));
  data::DataLoader train(train_set, 16);
  data::DataLoader val(val_set, 16);
  trainer.fit(module, train, &val);
  return {trainer.step_losses(), module.last_val_acc(), trainer.device()};
}

void expect_same_classifier_runs(const ClassifierRun& gpu, const ClassifierRun& cpu) {
  EXPECT_EQ(gpu.device, kGpu);
  ASSERT_EQ(gpu.losses.size(), 8u);  // 2 epochs of 4 batches
  ASSERT_EQ(cpu.losses.size(), gpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3 * std::abs(cpu.losses[i])) << "step " << i;
  EXPECT_NEAR(gpu.val_acc, cpu.val_acc, 1.0 / 32 + 1e-9);  // one image may flip
}

TEST(CudaModels, TheTrainerTrainsTheImageClassifiersOnTheGpu) {
  MANTISSA_REQUIRE_GPU();
  const auto cnn = [] { return std::shared_ptr<nn::Module>(models::make_cnn()); };
  const auto vit = [] {
    return std::shared_ptr<nn::Module>(std::make_shared<models::ViT>(
        models::ViTConfig{.patch = 7, .width = 32, .depth = 2, .heads = 4}));
  };
  {
    SCOPED_TRACE("cnn");
    expect_same_classifier_runs(fit_classifier("gpu", cnn), fit_classifier("cpu", cnn));
  }
  {
    SCOPED_TRACE("vit");
    expect_same_classifier_runs(fit_classifier("gpu", vit), fit_classifier("cpu", vit));
  }
}

}  // namespace
}  // namespace mantissa
