// The CNN's and ViT's ops on a GPU against the CPU: conv2d (im2col + GEMM, col2im gather) with
// stride, padding and dilation, max/avg/adaptive pooling, batch_norm in training and eval mode
// (with its running statistics), cat, and a few SGD steps of the reference CNN and a small ViT
// from the same weights on both devices.
#include <gtest/gtest.h>

#include <string>

#include "../train/tiny_module.h"
#include "cuda_op_check.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/models/cnn.h"
#include "mantissa/models/image_classifier.h"
#include "mantissa/models/vit.h"
#include "mantissa/ops/batch_norm.h"
#include "mantissa/ops/conv.h"
#include "mantissa/ops/loss.h"
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

// Looser than one rounding: the GPU's GEMM rounds its product before the bias / col2im sums.
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
};

TEST(CudaConv2d, ForwardAndGradientsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  const std::vector<ConvCase> cases = {
      {"3x3 pad 1", {3, 5, 11, 9}, {4, 5, 3, 3}, {1, 1}, {1, 1}, {1, 1}, true},
      {"3x3 stride 2 pad 1", {3, 5, 11, 9}, {4, 5, 3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
      {"dilated, uneven", {3, 5, 11, 9}, {6, 5, 3, 3}, {2, 1}, {0, 2}, {2, 1}, false},
      {"2x3 stride 3 (unread inputs)", {2, 3, 10, 11}, {4, 3, 2, 3}, {3, 3}, {0, 0}, {1, 1}, true},
      {"1x1", {3, 7, 5, 4}, {2, 7, 1, 1}, {1, 1}, {0, 0}, {1, 1}, true},
      {"patches 7x7 stride 7", {2, 1, 28, 28}, {8, 1, 7, 7}, {7, 7}, {0, 0}, {1, 1}, true},
  };
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    for (const ConvCase& c : cases) {
      const Tensor x = randn_cpu(c.x, 1).to(dt);
      const Tensor w = randn_cpu(c.w, 2, 0.3).to(dt);
      const Tensor b = randn_cpu({c.w[0]}, 3).to(dt);
      const std::string what = std::string(dt.name()) + " " + c.name;
      const ConvCase cc = c;
      if (c.bias) {
        check_op(
            what, {x, w, b},
            [cc](const V& v) {
              return conv2d(v[0], v[1], v[2], cc.stride, cc.padding, cc.dilation);
            },
            conv_tol(dt));
      } else {
        check_op(
            what, {x, w},
            [cc](const V& v) {
              return conv2d(v[0], v[1], Tensor(), cc.stride, cc.padding, cc.dilation);
            },
            conv_tol(dt));
      }
    }
  }
  // Grouped convolutions are refused on a GPU with a message, not computed wrongly.
  EXPECT_THROW(
      (void)conv2d(randn_cpu({1, 4, 5, 5}, 4).to(kGpu), randn_cpu({4, 2, 3, 3}, 5).to(kGpu),
                   Tensor(), {1, 1}, {0, 0}, {1, 1}, 2),
      Error);
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
